// mse_loss.cpp — MseLossCPU: a thin wrapper over
// mse_loss_ops.h with T = float.
#include "layers/cpu/mse_loss.h"

#include "layers/cpu/mse_loss_ops.h"

namespace hpmc {

void MseLossCPU::compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred,
                              Tensor& acc) {
  const Shape& s = pred.shape();
  const double sum = mse_loss(pred.data<float>(), target.data<float>(),
                              dpred ? dpred->data<float>() : nullptr, s.n, s.per_sample());
  acc.data<double>()[0] += sum;
}

HPMC_REGISTER_LOSS_CPU(MseLoss)

}  // namespace hpmc
