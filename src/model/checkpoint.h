// checkpoint.h — a model's weights, optimizer state and training position in
// one safetensors file.
//
// Tensors: "<layer>.<param>" (float32, PyTorch layouts: conv weight
// [out, in, kh, kw], linear weight [out, in], bias [out]) — the names and
// layouts a PyTorch model of the same architecture uses, so `safetensors`
// or numpy loads them; layer buffers (batch norm's running statistics) as
// "<layer>.<buffer>" under PyTorch's names. With momentum > 0, the SGD momentum buffers follow
// as "optimizer.momentum.<layer>.<param>".
// Metadata (strings): format, hpmc version, config name, impl, seed,
// batch size, training-set size, epoch, step, global step, and the epoch's
// partial loss sums as exact hex floats, so that `--resume` continues bit
// for bit. Nothing time-dependent goes in: the same run gives the same bytes.
#pragma once

#include <map>
#include <string>

#include "model/config.h"
#include "model/model.h"
#include "model/trainer.h"

namespace hpmc {

struct CheckpointMeta {
  std::map<std::string, std::string> values;
  std::string get(const std::string& key) const;  // "" if absent
};

// Write crash-safely (temp file, fsync, rename).
void save_checkpoint(const std::string& path, const Model& model, const Config& cfg,
                     const TrainState& state, int train_size);

// Load the weights into `model`, checking that every parameter is present
// with its shape (the first mismatch is named with both shapes). With
// `state` non-null, also restore the momentum and the training position,
// checking that the run can continue exactly (same seed, batch, data size)
// and that every metadata field is well formed, in its range and consistent
// with the others (DataError naming the file and the field), all before the
// model changes.
CheckpointMeta load_checkpoint(const std::string& path, Model& model, const Config* cfg = nullptr,
                               TrainState* state = nullptr, int train_size = -1);

}  // namespace hpmc
