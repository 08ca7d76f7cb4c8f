// maxpool2d.cpp — MaxPool2dCPU: configuration and shape checks, and a thin
// wrapper over maxpool2d_ops.h with T = float.
#include "layers/cpu/maxpool2d.h"

#include "core/error.h"
#include "layers/cpu/maxpool2d_ops.h"

namespace hpmc {

MaxPool2dCPU::MaxPool2dCPU(std::string name, const MaxPool2dConfig& cfg)
    : LayerCPU(std::move(name)), kernel_(cfg.kernel), stride_(cfg.stride) {
  if (kernel_ < 1)
    throw ConfigError(str("maxpool2d '", this->name(), "': kernel must be at least 1, got ",
                          kernel_));
  if (stride_ < 0)
    throw ConfigError(str("maxpool2d '", this->name(),
                          "': stride must be at least 1 (or 0 for the kernel size), got ",
                          stride_));
  if (stride_ == 0) stride_ = kernel_;
}

std::string MaxPool2dCPU::describe() const {
  return str(kernel_, "x", kernel_, " s", stride_);
}

Shape MaxPool2dCPU::output_shape(const Shape& in) const {
  if (in.h < kernel_ || in.w < kernel_)
    throw ShapeError(str("maxpool2d: a ", kernel_, "x", kernel_, " window does not fit a ", in.h,
                         "x", in.w, " input ", in.sample_str(),
                         " (no padding); use a smaller kernel or a larger input"));
  return Shape(in.n, in.c, maxpool2d_out_size(in.h, kernel_, stride_),
               maxpool2d_out_size(in.w, kernel_, stride_));
}

void MaxPool2dCPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  maxpool2d_forward(x.data<float>(), y.data<float>(), int64_t(s.n) * s.c, s.h, s.w, kernel_,
                    stride_);
}

void MaxPool2dCPU::backward_impl(const Tensor& x, const Tensor& /*y*/,
                                 const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const Shape& s = x.shape();
  maxpool2d_backward(x.data<float>(), dy.data<float>(), dx->data<float>(), int64_t(s.n) * s.c,
                     s.h, s.w, kernel_, stride_);
}

}  // namespace hpmc
