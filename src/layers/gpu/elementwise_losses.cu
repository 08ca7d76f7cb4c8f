// elementwise_losses.cu — BceWithLogitsLossGPU, BceLossGPU and L1LossGPU:
// each owns a grow-only device workspace and (bce) a status word, and runs
// elementwise_loss() of elementwise_loss_kernels.cu; their registration.
#include "layers/gpu/elementwise_losses.h"

#include "core/error.h"
#include "layers/cpu/bce_loss_ops.h"  // bce_range_error: the CPU's message
#include "layers/gpu/elementwise_loss_kernels.h"

namespace hpmc::gpu {

struct ElementwiseLossState {
  Tensor workspace;  // float64 on the GPU: elementwise_loss_workspace_bytes(n)
  Tensor status;     // int32 (kLossStatusInts, 1, 1, 1) on the GPU, zeroed

  void run(ElementwiseLoss kind, const Tensor& pred, const Tensor& target, Tensor* dpred,
           Tensor& acc) {
    const Shape& s = pred.shape();
    if (s.n <= 0 || s.per_sample() == 0) return;  // adds 0, writes nothing (as the CPU)
    const size_t doubles = (elementwise_loss_workspace_bytes(s.n) + 7) / 8;
    if (!workspace.defined() || workspace.capacity() < doubles)
      // Replacing the buffer frees the old one; cudaFree waits for the
      // kernels that may still use it.
      workspace = Tensor::empty(Shape(int(doubles), 1, 1, 1), DType::kF64, Device::kGPU);
    if (!status.defined())
      status = Tensor::zeros(Shape(kLossStatusInts, 1, 1, 1), DType::kI32, Device::kGPU);
    elementwise_loss(kind, pred.data<float>(), target.data<float>(),
                     dpred ? dpred->data<float>() : nullptr, s.n, s.per_sample(),
                     workspace.data<double>(), acc.data<double>(), status.data<int32_t>());
  }
};

BceWithLogitsLossGPU::BceWithLogitsLossGPU() : st_(std::make_unique<ElementwiseLossState>()) {}
BceWithLogitsLossGPU::~BceWithLogitsLossGPU() = default;

void BceWithLogitsLossGPU::compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred,
                                        Tensor& acc) {
  st_->run(ElementwiseLoss::kBceWithLogits, pred, target, dpred, acc);
}

BceLossGPU::BceLossGPU() : st_(std::make_unique<ElementwiseLossState>()) {}
BceLossGPU::~BceLossGPU() = default;

void BceLossGPU::compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred,
                              Tensor& acc) {
  st_->run(ElementwiseLoss::kBce, pred, target, dpred, acc);
}

void BceLossGPU::check_status() {
  if (!st_->status.defined()) return;
  // One small synchronous copy, only where the caller syncs anyway; the
  // report is cleared so a caller that catches the error starts clean.
  const LossStatus bad = take_loss_status(st_->status.data<int32_t>());
  if (bad.bad)
    bce_range_error(bad.sample, bad.element, bad.is_target, bad.value,
                    " (found on the GPU; that batch's loss is NaN)");
}

L1LossGPU::L1LossGPU() : st_(std::make_unique<ElementwiseLossState>()) {}
L1LossGPU::~L1LossGPU() = default;

void L1LossGPU::compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred,
                             Tensor& acc) {
  st_->run(ElementwiseLoss::kL1, pred, target, dpred, acc);
}

HPMC_REGISTER_LOSS_GPU(BceWithLogitsLoss)
HPMC_REGISTER_LOSS_GPU(BceLoss)
HPMC_REGISTER_LOSS_GPU(L1Loss)

}  // namespace hpmc::gpu
