// bce_loss.cpp — BceWithLogitsLossCPU and BceLossCPU: thin wrappers over
// bce_loss_ops.h with T = float.
#include "layers/cpu/bce_loss.h"

#include "layers/cpu/bce_loss_ops.h"

namespace hpmc {

void BceWithLogitsLossCPU::compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred,
                                        Tensor& acc) {
  const Shape& s = pred.shape();
  acc.data<double>()[0] +=
      bce_with_logits_loss(pred.data<float>(), target.data<float>(),
                           dpred ? dpred->data<float>() : nullptr, s.n, s.per_sample());
}

HPMC_REGISTER_LOSS_CPU(BceWithLogitsLoss)

void BceLossCPU::compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred,
                              Tensor& acc) {
  const Shape& s = pred.shape();
  acc.data<double>()[0] += bce_loss(pred.data<float>(), target.data<float>(),
                                    dpred ? dpred->data<float>() : nullptr, s.n, s.per_sample());
}

HPMC_REGISTER_LOSS_CPU(BceLoss)

}  // namespace hpmc
