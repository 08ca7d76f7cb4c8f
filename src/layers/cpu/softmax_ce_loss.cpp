// softmax_ce_loss.cpp — SoftmaxCrossEntropyCPU: a thin wrapper over
// softmax_ce_loss_ops.h with T = float.
#include "layers/cpu/softmax_ce_loss.h"

#include "core/error.h"
#include "layers/cpu/softmax_ce_loss_ops.h"

namespace hpmc {

void SoftmaxCrossEntropyCPU::compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred,
                                          Tensor& acc) {
  const Shape& s = pred.shape();
  const SoftmaxCeResult r =
      softmax_ce_loss(pred.data<float>(), target.data<int32_t>(),
                      dpred ? dpred->data<float>() : nullptr, s.n, s.c);
  double* a = acc.data<double>();
  a[0] += r.loss_sum;
  a[1] += double(r.correct);
}

HPMC_REGISTER_LOSS_CPU(SoftmaxCrossEntropy)

}  // namespace hpmc
