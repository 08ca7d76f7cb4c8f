// fused_step.h — a whole training step as one GPU kernel, for the models
// that fit one (layers/gpu/mlp_step.h has the kernel and its phases): the
// "fused" step strategy (step_strategy.h).
//
// choose_step_strategy takes it when training.fuse is true (the default), the
// model runs on the GPU with --impl im2col, and the model is an MLP of the
// mnist_mlp kind: optional leading flatten layers, then 2 to 8 linear layers
// with a bias, a relu between each two and none after the last, softmax
// cross-entropy on at most 32 classes, every training label in range, uint8
// training images, training.precision fp32, neither training.input_noise
// nor data.augment (the kernel gathers its own batch), training.grad_accumulation
// 1 and one rank (the kernel updates each layer as soon as its gradient is
// done, with no point between to sum gradients: choose_step_strategy checks
// the ranks). Anything else trains layer by layer, as does every model with
// training.fuse: false; fused_step_refusal says why. The kernel's update is
// SGD (momentum, weight decay, the schedule's learning rate passed per step);
// Adam, AdamW, Nesterov momentum and gradient clipping train layer by layer
// (fused_optimizer_refusal says why).
#pragma once

#include <memory>
#include <string>

#include "data/dataset.h"
#include "model/config.h"
#include "model/model.h"
#include "model/step_strategy.h"
#include "optim/optimizer.h"

namespace hpmc {

class BatchFeeder;
namespace gpu {
class MlpStep;
}

// Why the model trains layer by layer, or "" when the fused step fits it.
// Looks at the model, the training config and the training labels only.
std::string fused_step_refusal(const Model& model, const TrainingConfig& cfg,
                               const Dataset& train);
// The part of it that concerns the optimizer, schedule and clipping alone:
// why the fused kernel cannot apply cfg's update, or "".
std::string fused_optimizer_refusal(const TrainingConfig& cfg);

// The cost rule: the fused step only up to kFusedStepMaxFlopsPerLayer of
// work a step per linear layer (the FLOP of their products at the largest
// batch, as `hpmc bench` counts them: forward and weight gradient, and the
// input gradient but for the first layer's). Layer by layer pays a fixed
// ~0.05 ms per linear layer (its kernels and their launches) and then runs its
// products at up to 70% of the FP32 peak (the implicit engine with split-K,
// the large GEMM engine); the fused step pays ~0.01 ms per layer but reaches
// 10–20% on large products — so the crossover grows with the depth. Measured
// over the 90 MLP points of bench/sweep.py on an NVIDIA H200 (2026-11-27,
// docs/PERFORMANCE.md#step-choice, HPMC_STEP=fused against HPMC_STEP=layers
// at every point): any threshold from 0.42 to 0.56 GFLOP a layer puts 87 of
// the 90 points on the faster side and loses at most 5.5% at the other three;
// a threshold on the whole step's work could not do better than 3 points
// losing up to 39% (the deep, narrow mlp-512x4-b256). Timed again in bf16
// (both paths on tensor cores), the same line puts 82 of the 90 on the
// faster side; bf16's own best (1.31 GFLOP) gets 84 but saves 0.03% of the
// total, so one line serves every precision.
constexpr double kFusedStepMaxFlopsPerLayer = 0.5e9;
// The linear layers' FLOP a step at `batch`, counted as above, and how many
// linear layers there are (0 and 0 for a model the fused step cannot run).
double fused_step_flops(const Model& model, int batch, int* linear_layers = nullptr);
// Why layer by layer is expected to be the faster for `model` at `batch`, or "".
std::string fused_step_cost_refusal(const Model& model, int batch);

class FusedStep : public StepStrategy {
 public:
  // The fused step for batches up to max_batch, updating the model's
  // parameters and `opt`'s momentum (an Sgd); call only when
  // fused_step_refusal() gave "". run() counts the optimizer's steps.
  FusedStep(Model& model, Optimizer& opt, const TrainingConfig& cfg, int max_batch);
  ~FusedStep() override;

  std::string describe() const override;
  // One step on order[begin, begin + n) of the feeder's epoch order (the
  // feeder's dataset on the GPU) at learning rate lr; acc += {Σ loss, Σ correct}.
  void run(BatchFeeder& feed, int begin, int n, Tensor& acc, double lr, Profiler* prof) override;

 private:
  std::unique_ptr<gpu::MlpStep> step_;
  Optimizer& opt_;
};

}  // namespace hpmc
