// loss.cpp — the checked front door of every loss.
#include "layers/loss.h"

#include "core/error.h"

namespace hpmc {

void Loss::check_tensor(const Tensor& t, DType dtype, const char* what) const {
  HPMC_CHECK(t.defined(), type(), ": ", what, " is not allocated");
  HPMC_CHECK(t.device() == device(), type(), " (", device_name(device()), "): ", what, " is on ",
             device_name(t.device()));
  HPMC_CHECK(t.dtype() == dtype, type(), ": ", what, " is ", dtype_name(t.dtype()), ", expected ",
             dtype_name(dtype));
}

void Loss::compute(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) {
  check_tensor(pred, DType::kF32, "prediction");
  check_tensor(target, target_dtype(), "target");
  const Shape& s = pred.shape();
  if (is_classifier()) {
    HPMC_CHECK(s.h == 1 && s.w == 1 && s.c >= 1, type(), ": prediction has shape ", s.str(),
               ", expected logits (N, K, 1, 1)");
    HPMC_CHECK(target.shape() == Shape(s.n, 1, 1, 1), type(), ": target shape ",
               target.shape().str(), " does not match prediction shape ", s.str(),
               "; expected labels (", s.n, ", 1, 1, 1)");
  } else {
    HPMC_CHECK(target.shape() == s, type(), ": target shape ", target.shape().str(),
               " does not match prediction shape ", s.str());
  }
  if (dpred) {
    check_tensor(*dpred, DType::kF32, "prediction gradient");
    HPMC_CHECK(dpred->shape() == s, type(), ": prediction gradient shape ", dpred->shape().str(),
               " does not match prediction shape ", s.str());
  }
  check_tensor(acc, DType::kF64, "accumulator");
  HPMC_CHECK(acc.shape() == Shape(2, 1, 1, 1), type(), ": accumulator has shape ",
             acc.shape().str(), ", expected (2, 1, 1, 1)");
  compute_impl(pred, target, dpred, acc);
}

}  // namespace hpmc
