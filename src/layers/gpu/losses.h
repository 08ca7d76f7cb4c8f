// losses.h — the GPU losses: MSE and fused softmax cross-entropy, with the
// contract of layers/loss.h (acc is a float64 (2,1,1,1) tensor on the GPU;
// acc[0] += Σ per-sample losses, acc[1] += correct count for a classifier;
// dpred, when non-null, is overwritten with d(mean loss)/d pred). No CUDA type
// appears here; the kernels live in losses.cu, and a CUDA-less build never
// compiles or links these classes (the loss registry, model/registry.h, is
// the way in). Argument checks are Loss::compute's, as for every loss.
//
// Every call runs on the default stream without any host synchronisation:
//   1. a per-sample kernel writes each sample's loss (double) — and, for the
//      classifier, a flag word (correct / bad label) — into a workspace owned
//      by the loss, and writes dpred;
//   2. ONE block of a fixed size then reduces the workspace in a fixed order
//      (a strided serial pass per thread, then a shared-memory tree) and ADDS
//      the totals into acc on the device.
// No floating-point atomics anywhere, so the same inputs give bit-identical
// acc and dpred on every run (and on any GPU model: nothing depends on the
// SM count). The math and its order per sample follow the CPU ops
// (layers/cpu/*_ops.h); the batch sum is a tree rather than a serial sum, so
// acc agrees with the CPU to rounding of doubles, not bit for bit.
//
// Labels outside [0, K) (cross-entropy). The CPU loss throws DataError before
// computing anything; a GPU loss cannot know without a host copy per step, so
//   * the bad sample's loss is NaN (so acc[0] becomes NaN, and the trainer's
//     existing finiteness check on the accumulator stops the run at the step
//     it reads it), it counts as incorrect and its dpred row is 0 (it adds no
//     gradient; z[label] is never read);
//   * the reduction records the first bad (sample, label) in a sticky device
//     status word, which check_status() reads (one small synchronous copy)
//     and turns into the CPU's DataError naming the sample, the label and K.
//     The trainer calls check_status() only where it reads the accumulator,
//     so a training step itself makes no host copy and no sync.
#pragma once

#include <memory>

#include "layers/loss_spec.h"

namespace hpmc::gpu {

class MseLossGPU : public LossGPU<MseLossSpec> {
 public:
  MseLossGPU();
  ~MseLossGPU() override;

 protected:
  // Adds Σ per-sample loss to acc[0] (acc[1] is left alone); overwrites
  // *dpred with 2 (p − t) / (N · per_sample) when dpred is non-null.
  void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) override;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

class SoftmaxCrossEntropyGPU : public LossGPU<SoftmaxCrossEntropySpec> {
 public:
  SoftmaxCrossEntropyGPU();
  ~SoftmaxCrossEntropyGPU() override;
  // Throws DataError (once) if a call since the last check saw a label
  // outside [0, K) (see above).
  void check_status() override;

 protected:
  // Adds Σ per-sample loss to acc[0] and the number of correct argmax
  // predictions (first maximum on ties) to acc[1]; overwrites *dpred with
  // (softmax − onehot) / N when dpred is non-null.
  void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) override;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace hpmc::gpu
