// step_strategy.h — how the trainer takes one training step on a batch: a
// strategy per way of running it, chosen once per training set.
//
//   layer by layer  gather the batch (and augment it), then the model's
//                   forward, the loss, backward and the optimizer's update
//                   (Trainer::step): any model
//   fused           the whole step as one GPU kernel (fused_step.h): an MLP of
//                   the mnist_mlp kind on --impl im2col with training.fuse and
//                   an update the kernel can apply
//
// choose_step_strategy takes the fused step where fused_step_refusal() finds
// nothing against it and fused_step_cost_refusal() does not expect layer by
// layer to be faster, and trains layer by layer otherwise, saying why.
// HPMC_STEP in the environment overrides the cost rule, for A/B timings:
// auto (or unset) as above, fused (wherever the fused step fits), layers
// (never fused). Both
// read and write the same parameter, gradient and momentum buffers, so
// checkpoints, evaluation and resuming do not care which one ran.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "model/config.h"
#include "model/model.h"
#include "optim/optimizer.h"

namespace hpmc {

class BatchFeeder;
class Profiler;

class StepStrategy {
 public:
  virtual ~StepStrategy() = default;
  // The line `hpmc run` and `hpmc bench` print: "fused: the whole step is one
  // GPU kernel (training.fuse)" or "layer by layer: <why not fused>".
  virtual std::string describe() const = 0;
  // One step on order[begin, begin + n) of the feeder's epoch order at the
  // schedule's learning rate `lr` (the layer-by-layer path's Trainer::step
  // asks the schedule itself, for the same value); acc += {Σ loss, Σ
  // correct}. `prof` (may be null) times it.
  virtual void run(BatchFeeder& feed, int begin, int n, Tensor& acc, double lr,
                   Profiler* prof) = 0;
};

enum class StepChoice { kAuto, kFused, kLayers };
// HPMC_STEP's value (UsageError, one line, for anything else).
StepChoice step_choice_from_env();

// A layer-by-layer step on order[begin, begin + n) of the feeder: gather,
// augment, forward, loss, backward, update (Trainer::train_layers).
using LayerStepFn = std::function<void(BatchFeeder& feed, int begin, int n, Tensor& acc)>;

// The strategy for training `model` with `opt` on the feeder's data over
// `ranks` data-parallel ranks: the fused step where it fits (one rank only:
// the gradients of several must be all-reduced between the backward pass and
// the update), else layer by layer through `layer_step` (with the reason).
std::unique_ptr<StepStrategy> choose_step_strategy(Model& model, Optimizer& opt,
                                                   const TrainingConfig& cfg,
                                                   const BatchFeeder& feed,
                                                   LayerStepFn layer_step, int ranks = 1);

}  // namespace hpmc
