// fuzz_checkpoint_model.h — the model and run whose checkpoints
// fuzz_safetensors loads, shared with the seed writer so that its seeds are
// checkpoints this model can resume from.
//
// A tiny autoencoder on MNIST-shaped input (conv2d 1->2 1x1, relu, conv2d
// 2->1 1x1: seven parameters) with momentum, so a checkpoint holds weights,
// biases and momentum buffers in a few hundred bytes of tensors.
#pragma once

#include <memory>

#include "data/dataset.h"
#include "model/config.h"
#include "model/model.h"

namespace hpmc::fuzz {

inline const Config& checkpoint_config() {
  static const Config cfg = parse_config(
      "name: fuzz\n"
      "data: {format: mnist}\n"
      "model:\n"
      "  loss: mse\n"
      "  layers:\n"
      "    - {type: conv2d, out_channels: 2, kernel: 1}\n"
      "    - {type: relu}\n"
      "    - {type: conv2d, out_channels: 1, kernel: 1}\n"
      "training: {epochs: 3, batch_size: 32, momentum: 0.9, seed: 5}\n",
      "fuzz.yaml");
  return cfg;
}

// The training-set size the checkpoints were written for: 4 steps an epoch.
constexpr int kCheckpointTrainSize = 100;

inline std::unique_ptr<Model> checkpoint_model() {
  return Model::build(checkpoint_config(), Impl::kCpu, sample_shape(DataFormat::kMnist), 10);
}

}  // namespace hpmc::fuzz
