// softmax_ce_loss.cpp — SoftmaxCrossEntropyCPU: argument checks and a thin
// wrapper over softmax_ce_loss_ops.h with T = float.
#include "layers/cpu/softmax_ce_loss.h"

#include "core/error.h"
#include "layers/cpu/softmax_ce_loss_ops.h"

namespace hpmc {

namespace {

void check_cpu(const Tensor& t, DType dtype, const char* what) {
  HPMC_CHECK(t.defined(), "softmax_cross_entropy: ", what, " is not allocated");
  HPMC_CHECK(t.device() == Device::kCPU, "softmax_cross_entropy (cpu): ", what, " is on ",
             device_name(t.device()));
  HPMC_CHECK(t.dtype() == dtype, "softmax_cross_entropy: ", what, " is ", dtype_name(t.dtype()),
             ", expected ", dtype_name(dtype));
}

}  // namespace

void SoftmaxCrossEntropyCPU::compute(const Tensor& pred, const Tensor& target, Tensor* dpred,
                                     Tensor& acc) {
  check_cpu(pred, DType::kF32, "prediction");
  check_cpu(target, DType::kI32, "target");
  const Shape& s = pred.shape();
  HPMC_CHECK(s.h == 1 && s.w == 1 && s.c >= 1, "softmax_cross_entropy: prediction has shape ",
             s.str(), ", expected logits (N, K, 1, 1)");
  HPMC_CHECK(target.shape() == Shape(s.n, 1, 1, 1), "softmax_cross_entropy: target shape ",
             target.shape().str(), " does not match prediction shape ", s.str(),
             "; expected labels (", s.n, ", 1, 1, 1)");
  if (dpred) {
    check_cpu(*dpred, DType::kF32, "prediction gradient");
    HPMC_CHECK(dpred->shape() == s, "softmax_cross_entropy: prediction gradient shape ",
               dpred->shape().str(), " does not match prediction shape ", s.str());
  }
  check_cpu(acc, DType::kF64, "accumulator");
  HPMC_CHECK(acc.shape() == Shape(2, 1, 1, 1), "softmax_cross_entropy: accumulator has shape ",
             acc.shape().str(), ", expected (2, 1, 1, 1)");

  const SoftmaxCeResult r =
      softmax_ce_loss(pred.data<float>(), target.data<int32_t>(),
                      dpred ? dpred->data<float>() : nullptr, s.n, s.c);
  double* a = acc.data<double>();
  a[0] += r.loss_sum;
  a[1] += double(r.correct);
}

}  // namespace hpmc
