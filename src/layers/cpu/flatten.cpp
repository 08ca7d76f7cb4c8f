// flatten.cpp — FlattenCPU: copies, since only the shape changes.
#include "layers/cpu/flatten.h"

#include <cstring>

#include "layers/pool_spec.h"

namespace hpmc {

// Copies rather than shared views: the model owns each activation buffer and
// the layer contract writes y and dx, so aliasing x would break that.
void FlattenCPU::forward_impl(const Tensor& x, Tensor& y) {
  std::memcpy(y.data<float>(), x.data<float>(), x.numel() * sizeof(float));
}

void FlattenCPU::backward_impl(const Tensor& /*x*/, const Tensor& /*y*/,
                               const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  std::memcpy(dx->data<float>(), dy.data<float>(), dy.numel() * sizeof(float));
}

HPMC_REGISTER_CPU(Flatten)

}  // namespace hpmc
