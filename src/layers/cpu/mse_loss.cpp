// mse_loss.cpp — MseLossCPU: argument checks and a thin wrapper over
// mse_loss_ops.h with T = float.
#include "layers/cpu/mse_loss.h"

#include "core/error.h"
#include "layers/cpu/mse_loss_ops.h"

namespace hpmc {

namespace {

void check_cpu(const Tensor& t, DType dtype, const char* what) {
  HPMC_CHECK(t.defined(), "mse: ", what, " is not allocated");
  HPMC_CHECK(t.device() == Device::kCPU, "mse (cpu): ", what, " is on ", device_name(t.device()));
  HPMC_CHECK(t.dtype() == dtype, "mse: ", what, " is ", dtype_name(t.dtype()), ", expected ",
             dtype_name(dtype));
}

}  // namespace

void MseLossCPU::compute(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) {
  check_cpu(pred, DType::kF32, "prediction");
  check_cpu(target, DType::kF32, "target");
  HPMC_CHECK(target.shape() == pred.shape(), "mse: target shape ", target.shape().str(),
             " does not match prediction shape ", pred.shape().str());
  if (dpred) {
    check_cpu(*dpred, DType::kF32, "prediction gradient");
    HPMC_CHECK(dpred->shape() == pred.shape(), "mse: prediction gradient shape ",
               dpred->shape().str(), " does not match prediction shape ", pred.shape().str());
  }
  check_cpu(acc, DType::kF64, "accumulator");
  HPMC_CHECK(acc.shape() == Shape(2, 1, 1, 1), "mse: accumulator has shape ", acc.shape().str(),
             ", expected (2, 1, 1, 1)");

  const Shape& s = pred.shape();
  const double sum = mse_loss(pred.data<float>(), target.data<float>(),
                              dpred ? dpred->data<float>() : nullptr, s.n, s.per_sample());
  acc.data<double>()[0] += sum;
}

}  // namespace hpmc
