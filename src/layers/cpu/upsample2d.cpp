// upsample2d.cpp — UpSample2dCPU: configuration check and shape from
// layers/pool_spec.h, and a thin wrapper over upsample2d_ops.h with T = float
// (nearest or bilinear, as the layer's mode key says).
#include "layers/cpu/upsample2d.h"

#include "layers/cpu/upsample2d_ops.h"
#include "layers/pool_spec.h"

namespace hpmc {

void UpSample2dCPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  if (interp_ == UpsampleMode::kBilinear)
    upsample2d_bilinear_forward(x.data<float>(), y.data<float>(), int64_t(s.n) * s.c, s.h, s.w,
                                scale_);
  else
    upsample2d_forward(x.data<float>(), y.data<float>(), int64_t(s.n) * s.c, s.h, s.w, scale_);
}

void UpSample2dCPU::backward_impl(const Tensor& x, const Tensor& /*y*/,
                                  const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const Shape& s = x.shape();
  if (interp_ == UpsampleMode::kBilinear)
    upsample2d_bilinear_backward(dy.data<float>(), dx->data<float>(), int64_t(s.n) * s.c, s.h,
                                 s.w, scale_);
  else
    upsample2d_backward(dy.data<float>(), dx->data<float>(), int64_t(s.n) * s.c, s.h, s.w, scale_);
}

HPMC_REGISTER_CPU(UpSample2d)

}  // namespace hpmc
