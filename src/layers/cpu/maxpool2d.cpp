// maxpool2d.cpp — MaxPool2dCPU: configuration and shape checks from
// layers/pool_spec.h, and a thin wrapper over maxpool2d_ops.h with T = float.
#include "layers/cpu/maxpool2d.h"

#include "layers/cpu/maxpool2d_ops.h"

namespace hpmc {

MaxPool2dCPU::MaxPool2dCPU(std::string name, const MaxPool2dConfig& cfg)
    : LayerCPU(std::move(name)), spec_(maxpool2d_spec(this->name(), cfg)) {}

std::string MaxPool2dCPU::describe() const { return maxpool2d_describe(spec_); }

Shape MaxPool2dCPU::output_shape(const Shape& in) const {
  return maxpool2d_output_shape(spec_, in);
}

void MaxPool2dCPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  maxpool2d_forward(x.data<float>(), y.data<float>(), int64_t(s.n) * s.c, s.h, s.w, spec_.kernel,
                    spec_.stride);
}

void MaxPool2dCPU::backward_impl(const Tensor& x, const Tensor& /*y*/,
                                 const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const Shape& s = x.shape();
  maxpool2d_backward(x.data<float>(), dy.data<float>(), dx->data<float>(), int64_t(s.n) * s.c,
                     s.h, s.w, spec_.kernel, spec_.stride);
}

}  // namespace hpmc
