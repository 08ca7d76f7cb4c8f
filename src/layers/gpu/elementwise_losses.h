// elementwise_losses.h — the GPU losses bce_with_logits, bce and l1, with the
// contract of layers/loss.h (acc is a float64 (2,1,1,1) tensor on the GPU;
// acc[0] += Σ per-sample losses, acc[1] is left alone; dpred, when non-null,
// is overwritten with d(mean loss)/d pred). No CUDA type appears here. The
// kernels are elementwise_loss_kernels.h's: per-sample block sums and one
// fixed-order reduction on the device, no host synchronisation and no
// floating-point atomics; how they agree with the CPU losses is stated there.
//
// bce's bad inputs (a target outside [0, 1], a prediction outside [0, 1]
// that is not NaN): the CPU loss throws at once; the GPU loss makes that
// batch's loss NaN, records the first bad element in a sticky device status
// word, and check_status() — which the trainer calls where it reads the
// accumulator — throws the CPU's error for it (bce_range_error), once.
#pragma once

#include <memory>

#include "layers/loss_spec.h"

namespace hpmc::gpu {

// The device workspace of one loss object (per-sample sums, the status word).
struct ElementwiseLossState;

class BceWithLogitsLossGPU : public LossGPU<BceWithLogitsLossSpec> {
 public:
  BceWithLogitsLossGPU();
  ~BceWithLogitsLossGPU() override;

 protected:
  void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) override;

 private:
  std::unique_ptr<ElementwiseLossState> st_;
};

class BceLossGPU : public LossGPU<BceLossSpec> {
 public:
  BceLossGPU();
  ~BceLossGPU() override;
  // Throws the CPU's DataError (bad target) or ConfigError (bad prediction),
  // once, if a call since the last check saw a bad input.
  void check_status() override;

 protected:
  void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) override;

 private:
  std::unique_ptr<ElementwiseLossState> st_;
};

class L1LossGPU : public LossGPU<L1LossSpec> {
 public:
  L1LossGPU();
  ~L1LossGPU() override;

 protected:
  void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) override;

 private:
  std::unique_ptr<ElementwiseLossState> st_;
};

}  // namespace hpmc::gpu
