// l1_loss.cpp — L1LossCPU: a thin wrapper over l1_loss_ops.h with T = float.
#include "layers/cpu/l1_loss.h"

#include "layers/cpu/l1_loss_ops.h"

namespace hpmc {

void L1LossCPU::compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred,
                             Tensor& acc) {
  const Shape& s = pred.shape();
  acc.data<double>()[0] += l1_loss(pred.data<float>(), target.data<float>(),
                                   dpred ? dpred->data<float>() : nullptr, s.n, s.per_sample());
}

HPMC_REGISTER_LOSS_CPU(L1Loss)

}  // namespace hpmc
