// maxpool2d.cpp — MaxPool2dCPU: configuration and shape checks from
// layers/pool_spec.h, and a thin wrapper over maxpool2d_ops.h with T = float.
#include "layers/cpu/maxpool2d.h"

#include "layers/cpu/maxpool2d_ops.h"

namespace hpmc {

void MaxPool2dCPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  maxpool2d_forward(x.data<float>(), y.data<float>(), int64_t(s.n) * s.c, s.h, s.w, win_.kernel,
                    win_.stride);
}

void MaxPool2dCPU::backward_impl(const Tensor& x, const Tensor& /*y*/,
                                 const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const Shape& s = x.shape();
  maxpool2d_backward(x.data<float>(), dy.data<float>(), dx->data<float>(), int64_t(s.n) * s.c,
                     s.h, s.w, win_.kernel, win_.stride);
}

HPMC_REGISTER_CPU(MaxPool2d)

}  // namespace hpmc
