// conv2d.cu — Conv2dGPU: dispatch to the kernel family chosen at build time
// of the layer (naive, tiled, or the implicit-GEMM kernels for "im2col").
#include "layers/gpu/conv2d.h"

#include "core/error.h"
#include "layers/gpu/conv2d_kernels.h"

namespace hpmc::gpu {

namespace {

// The share of the unfolded multiply-adds that the upsample fold runs: a 2×2
// instead of a 3×3 kernel per output pixel (conv2d.h).
constexpr double kFoldShare = 4.0 / 9.0;

}  // namespace

std::string Conv2dGPU::describe() const {
  std::string d = conv2d_describe(cfg_);
  if (folded_upsample() > 1) d += str(" + nearest x", folded_upsample(), " folded in");
  return d;
}

double Conv2dGPU::forward_flops(const Shape& in) const {
  const double f = conv2d_forward_flops(cfg_, in);
  return folded_upsample() > 1 ? f * kFoldShare : f;
}

double Conv2dGPU::backward_flops(const Shape& in, bool input_grad) const {
  const double f = conv2d_backward_flops(cfg_, in, input_grad);
  return folded_upsample() > 1 ? f * kFoldShare : f;
}

bool Conv2dGPU::fuse_relu_forward() {
  if (family_ != Family::kIm2col) return false;
  relu_ = true;
  return true;
}

bool Conv2dGPU::fuse_relu_backward() {
  if (family_ != Family::kIm2col || folded_upsample() == 1) return false;
  relu_mask_ = true;
  return true;
}

bool Conv2dGPU::accept_upsample_fold(int scale) {
  return family_ == Family::kIm2col && scale == 2 &&
         implicit::upconv_applies(conv_shape(input_shape().with_batch(1)));
}

Conv2dShape Conv2dGPU::run_shape(const Tensor& x) const {
  const Shape& in = x.shape();
  const int f = folded_upsample();
  return conv_shape(Shape(in.n, in.c, in.h * f, in.w * f));
}

void Conv2dGPU::forward_impl(const Tensor& x, Tensor& y) {
  const Conv2dShape s = run_shape(x);
  const float* w = param(0);
  const float* b = cfg_.bias ? param(1) : nullptr;
  float* out = y.data<float>();
  if (folded_upsample() > 1) {  // im2col only (accept_upsample_fold); x is the low resolution
    implicit::upconv_forward(s, x.data<float>(), w, b, out, relu_);
    return;
  }
  switch (family_) {
    case Family::kNaive: naive::conv2d_forward(s, x.data<float>(), w, b, out); return;
    case Family::kTiled: tiled::conv2d_forward(s, x.data<float>(), w, b, out); return;
    case Family::kIm2col:
      if (relu_) implicit::conv2d_forward_relu(s, x.data<float>(), w, b, out);
      else implicit::conv2d_forward(s, x.data<float>(), w, b, out);
      return;
  }
  throw RuntimeError(str("conv2d '", name(), "': unknown kernel family ", int(family_)));
}

void Conv2dGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const Conv2dShape s = run_shape(x);
  const float* xp = x.data<float>();
  const float* dyp = dy.data<float>();
  float* dw = grad(0);
  float* db = cfg_.bias ? grad(1) : nullptr;
  if (folded_upsample() > 1) {  // x and dx at the low resolution
    implicit::upconv_backward_params(s, xp, dyp, dw, db);
    if (dx)
      implicit::upconv_backward_data(s, dyp, param(0), relu_mask_ ? xp : nullptr,
                                     dx->data<float>());
    return;
  }
  switch (family_) {
    case Family::kNaive:
      naive::conv2d_backward_params(s, xp, dyp, dw, db);
      if (dx) naive::conv2d_backward_data(s, dyp, param(0), dx->data<float>());
      return;
    case Family::kTiled:
      tiled::conv2d_backward_params(s, xp, dyp, dw, db);
      if (dx) tiled::conv2d_backward_data(s, dyp, param(0), dx->data<float>());
      return;
    case Family::kIm2col:
      implicit::conv2d_backward_params(s, xp, dyp, dw, db);
      if (dx) implicit::conv2d_backward_data(s, dyp, param(0), dx->data<float>());
      return;
  }
  throw RuntimeError(str("conv2d '", name(), "': unknown kernel family ", int(family_)));
}

HPMC_REGISTER_GPU(Conv2d)

}  // namespace hpmc::gpu
