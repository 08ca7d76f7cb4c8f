// avgpool2d.cpp — AvgPool2dCPU: a thin wrapper over avgpool2d_ops.h with
// T = float.
#include "layers/cpu/avgpool2d.h"

#include "layers/cpu/avgpool2d_ops.h"

namespace hpmc {

void AvgPool2dCPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  avgpool2d_forward(x.data<float>(), y.data<float>(), int64_t(s.n) * s.c, s.h, s.w, win_.kernel,
                    win_.stride);
}

void AvgPool2dCPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                 Tensor* dx) {
  if (!dx) return;
  const Shape& s = x.shape();
  avgpool2d_backward(dy.data<float>(), dx->data<float>(), int64_t(s.n) * s.c, s.h, s.w,
                     win_.kernel, win_.stride);
}

HPMC_REGISTER_CPU(AvgPool2d)

}  // namespace hpmc
