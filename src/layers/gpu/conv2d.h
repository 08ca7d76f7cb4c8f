// conv2d.h — the GPU 2-d convolution layer: the same layer as Conv2dCPU
// (schema, config, validation, shapes and parameters all from Conv2dSpec) running
// one kernel family of conv2d_kernels.h on device tensors. No CUDA types.
//
// forward   family::conv2d_forward (y overwritten); im2col with a fused ReLU:
//           implicit::conv2d_forward_relu
// backward  family::conv2d_backward_params into grad(0)/grad(1) (accumulate),
//           then, if dx is requested, family::conv2d_backward_data (overwrite)
//
// im2col with the nearest ×2 upsample before it folded in (layer.h,
// fold_upsample; when implicit::upconv_applies to the conv on the upsampled
// input the layer was built for): x and dx are the upsample's input and input
// gradient, and the layer runs implicit::upconv_forward (with the fused ReLU
// flag), upconv_backward_params, then upconv_backward_data, which also applies
// the mask of the ReLU before the upsample when its backward is fused here
// (fuse_relu_backward agrees only then).
#pragma once

#include <string>
#include <vector>

#include "layers/conv2d_spec.h"
#include "layers/conv_shape.h"
#include "layers/gpu/family.h"
#include "layers/layer.h"

namespace hpmc::gpu {

class Conv2dGPU : public LayerGPU<Conv2dSpec> {
 public:
  // Throws ConfigError for an invalid config (see conv2d_check_config).
  Conv2dGPU(std::string name, const Conv2dConfig& cfg, Family family)
      : LayerGPU(std::move(name), cfg), family_(family) {}
  // The family that args.impl names.
  explicit Conv2dGPU(const LayerArgs& args)
      : LayerGPU(args), family_(family_of(args.impl, args.name)) {}

  const char* impl() const override { return family_name(family_); }
  std::string describe() const override;
  // `in` is the input shape the layer was built for (the upsampled one when an
  // upsample is folded in). Folded, the passes run the multiply-adds they
  // actually execute: each output pixel of a 3×3 pad-1 convolution of a ×2
  // nearest upsample is a 2×2 convolution of the low-resolution input (with
  // summed weights), and the input and weight gradients map the same way, so
  // every count is 4/9 of the unfolded one.
  double forward_flops(const Shape& in) const override;
  double backward_flops(const Shape& in, bool input_grad) const override;

  // im2col: the ReLU after this layer runs in the forward's epilogue (layer.h).
  bool fuse_relu_forward() override;
  // im2col with an upsample folded in: the ReLU before that upsample runs in
  // upconv_backward_data (layer.h). Declined otherwise.
  bool fuse_relu_backward() override;

  Family family() const { return family_; }

 protected:
  // im2col, scale 2, and implicit::upconv_applies to this conv on the
  // upsampled input_shape().
  bool accept_upsample_fold(int scale) override;
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  // The convolution's sizes for input x: on x itself, or on the upsampled x
  // when an upsample is folded in (x is then the low-resolution input).
  Conv2dShape run_shape(const Tensor& x) const;

  Family family_;
  bool relu_ = false;       // forward writes relu(y)
  bool relu_mask_ = false;  // folded backward applies the mask x > 0 to dx
};

}  // namespace hpmc::gpu
