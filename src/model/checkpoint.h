// checkpoint.h — a model's weights, optimizer state and training position in
// one safetensors file.
//
// Tensors: "<layer>.<param>" (float32, PyTorch layouts: conv weight
// [out, in, kh, kw], linear weight [out, in], bias [out]) — the names and
// layouts a PyTorch model of the same architecture uses, so `safetensors`
// or numpy loads them; layer buffers (batch norm's running statistics) as
// "<layer>.<buffer>" under PyTorch's names. The optimizer's state buffers
// follow as "optimizer.<state>.<layer>.<param>": optimizer.momentum.* for sgd
// with momentum (the names checkpoints have always used), optimizer.m.* and
// optimizer.v.* for adam and adamw.
// The tensors are FP32 in every training.precision (the master weights);
// a checkpoint trained in bf16 loads, evaluates and resumes in any precision.
// Metadata (strings): format, hpmc version, config name, impl, precision
// (for reading, as impl: neither is checked on --resume), seed,
// batch size (the samples of one step: ranks × training.batch_size ×
// training.grad_accumulation, which is training.batch_size for one process
// without accumulation, as it always was; ranks, rank_batch_size and
// grad_accumulation give the factors, and epoch_samples the position in the
// epoch in samples), training-set size, input noise and augmentation (their
// describe(), data/augment.h), epoch, step, global step, the epoch's
// partial loss sums as exact hex floats, and the optimizer (optimizer: its
// type; optimizer_state: its state buffers, "momentum", "m,v" or "";
// optimizer_steps: the steps it has taken; optimizer_settings: its
// hyperparameters, for reading; schedule: the schedule's identity;
// momentum: whether there is a momentum buffer, as before), so that
// `--resume` continues bit for bit. Nothing time-dependent goes in: the same
// run gives the same bytes. A checkpoint without the optimizer fields
// (written before they existed) is sgd at a constant rate.
#pragma once

#include <map>
#include <string>

#include "model/config.h"
#include "model/model.h"
#include "model/trainer.h"
#include "optim/optimizer.h"

namespace hpmc {

struct CheckpointMeta {
  std::map<std::string, std::string> values;
  std::string get(const std::string& key) const;  // "" if absent
};

// Write crash-safely (temp file, fsync, rename). `opt` must have taken
// state.global_step steps; `ranks` ranks trained it (data parallel).
void save_checkpoint(const std::string& path, const Model& model, const Optimizer& opt,
                     const Config& cfg, const TrainState& state, int train_size, int ranks = 1);

// Load the weights into `model`, checking that every parameter is present
// with its shape (the first mismatch is named with both shapes).
CheckpointMeta load_checkpoint(const std::string& path, Model& model);

// The same, and restore the optimizer's state and step count and the
// training position, checking that the run can continue exactly: the same
// seed, samples per step (over `ranks` ranks: the ranks, batch size and
// grad_accumulation may change where their product stays), data size,
// optimizer type (and for sgd, momentum on or off), schedule, input noise
// and augmentation (ConfigError naming the setting), every metadata field well
// formed, in its range and consistent with the others (DataError naming the
// file and the field), all before the model or the optimizer changes. The
// optimizer's hyperparameters (learning rate, momentum, betas, eps, weight
// decay) and the clipping may differ from the checkpoint's, as --lr always
// could.
CheckpointMeta load_checkpoint(const std::string& path, Model& model, Optimizer& opt,
                               const Config& cfg, TrainState& state, int train_size,
                               int ranks = 1);

}  // namespace hpmc
