// conv2d.h — the GPU 2-d convolution layer: the same layer as Conv2dCPU
// (schema, config, validation, shapes and parameters all from Conv2dSpec) running
// one kernel family of conv2d_kernels.h on device tensors. No CUDA types.
//
// forward   family::conv2d_forward (y overwritten)
// backward  if dx is requested, family::conv2d_backward_data (overwrite), then
//           family::conv2d_backward_params into grad(0)/grad(1) (accumulate)
// For im2col both inside an implicit::KeepInput on the layer's InputCopy (in
// bf16 the weight gradient reads the forward's channels-last copy of x) and
// the backward inside an implicit::SharedDy (the input gradient's copy of dy,
// converted in one launch with the weights' layout, serves the weight
// gradient too).
//
// A convolution with an activation in its epilogue, or with the upsample
// before it folded in, is a fused layer (fused_chain.h), made by the GPU
// rewrite (model/gpu_rewrite.h), not this class.
#pragma once

#include <string>
#include <vector>

#include "layers/conv2d_spec.h"
#include "layers/conv_shape.h"
#include "layers/gpu/conv2d_kernels.h"
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
  // The forward's channels-last copy of x (InputCopy, im2col in bf16).
  size_t workspace_bytes(const Shape& in) const override;
  Family family() const { return family_; }

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  Family family_;
  implicit::InputCopy input_copy_;  // im2col in bf16: x in NHWC bf16 from forward to backward
};

}  // namespace hpmc::gpu
