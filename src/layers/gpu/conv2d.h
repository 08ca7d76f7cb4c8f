// conv2d.h — the GPU 2-d convolution layer: the same layer as Conv2dCPU
// (config, validation, shapes and parameters all from conv2d_spec.h) running
// one kernel family of conv2d_kernels.h on device tensors. No CUDA types.
//
// forward   family::conv2d_forward (y overwritten); im2col with a fused ReLU:
//           implicit::conv2d_forward_relu
// backward  family::conv2d_backward_params into grad(0)/grad(1) (accumulate),
//           then, if dx is requested, family::conv2d_backward_data (overwrite)
#pragma once

#include <string>
#include <vector>

#include "layers/conv2d_spec.h"
#include "layers/conv_shape.h"
#include "layers/gpu/family.h"
#include "layers/layer.h"

namespace hpmc::gpu {

class Conv2dGPU : public LayerGPU {
 public:
  // Throws ConfigError for an invalid config (see conv2d_check_config).
  Conv2dGPU(std::string name, const Conv2dConfig& cfg, Family family);

  const char* type() const override { return "conv2d"; }
  const char* impl() const override { return family_name(family_); }
  std::string describe() const override { return conv2d_describe(cfg_); }
  Shape output_shape(const Shape& in) const override { return conv2d_output_shape(cfg_, in); }
  std::vector<ParamSpec> param_specs() const override { return conv2d_param_specs(cfg_); }
  double forward_flops(const Shape& in) const override { return conv2d_forward_flops(cfg_, in); }
  double backward_flops(const Shape& in, bool input_grad) const override {
    return conv2d_backward_flops(cfg_, in, input_grad);
  }

  // im2col: the ReLU after this layer runs in the forward's epilogue (layer.h).
  bool fuse_relu_forward() override;

  const Conv2dConfig& config() const { return cfg_; }
  Family family() const { return family_; }
  Conv2dShape conv_shape(const Shape& in) const { return conv2d_shape(cfg_, in); }

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  Conv2dConfig cfg_;
  Family family_;
  bool relu_ = false;  // forward writes relu(y)
};

}  // namespace hpmc::gpu
