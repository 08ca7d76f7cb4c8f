// upsample2d.cpp — UpSample2dCPU: configuration check and a thin wrapper over
// upsample2d_ops.h with T = float.
#include "layers/cpu/upsample2d.h"

#include "core/error.h"
#include "layers/cpu/upsample2d_ops.h"

namespace hpmc {

UpSample2dCPU::UpSample2dCPU(std::string name, int scale)
    : LayerCPU(std::move(name)), scale_(scale) {
  if (scale_ < 1)
    throw ConfigError(str("upsample2d '", this->name(), "': scale must be at least 1, got ",
                          scale_));
}

std::string UpSample2dCPU::describe() const { return str("nearest x", scale_); }

Shape UpSample2dCPU::output_shape(const Shape& in) const {
  return Shape(in.n, in.c, in.h * scale_, in.w * scale_);
}

void UpSample2dCPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  upsample2d_forward(x.data<float>(), y.data<float>(), int64_t(s.n) * s.c, s.h, s.w, scale_);
}

void UpSample2dCPU::backward_impl(const Tensor& x, const Tensor& /*y*/,
                                  const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const Shape& s = x.shape();
  upsample2d_backward(dy.data<float>(), dx->data<float>(), int64_t(s.n) * s.c, s.h, s.w, scale_);
}

}  // namespace hpmc
