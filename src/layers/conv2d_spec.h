// conv2d_spec.h — the conv2d layer type, defined once for every device: its
// schema (keys), config, validation, shape rule, parameter tensors, FLOPs
// and one-line description. Conv2dSpec is the device-neutral layer class;
// Conv2dCPU and gpu::Conv2dGPU derive from it and add only the passes. The
// rules are also free functions, for the kernels' tests.
//
// Layouts: input NCHW, weight KCRS ([out, in, kh, kw]), bias [out], output
// NKPQ (PyTorch's nn.Conv2d with a square kernel, the same stride and zero
// padding on both axes).
#pragma once

#include <string>
#include <vector>

#include "core/shape.h"
#include "layers/conv_shape.h"
#include "layers/layer.h"

namespace hpmc {

struct Conv2dConfig {
  int in_channels = 0, out_channels = 0, kernel = 3, stride = 1, padding = 0;
  bool bias = true;
};

// Throws ConfigError naming the layer for a non-positive size or stride, a
// negative padding, or a padding of a whole kernel or more.
void conv2d_check_config(const std::string& layer_name, const Conv2dConfig& cfg);

// The output shape for an input shape (n carried through). Throws ShapeError
// quoting the input shape for the wrong channel count or a kernel that does
// not fit the padded input.
Shape conv2d_output_shape(const Conv2dConfig& cfg, const Shape& in);

// The full convolution sizes for an input shape (which must be valid).
Conv2dShape conv2d_shape(const Conv2dConfig& cfg, const Shape& in);

// weight {out, in, k, k} and, with bias, bias {out}; both fan_in = in·k·k.
std::vector<ParamSpec> conv2d_param_specs(const Conv2dConfig& cfg);

// FLOPs (2 per multiply-add) for an input shape: forward 2·N·K·P·Q·C·R·S;
// backward the same for the weight gradient plus the same again for the
// input gradient when `input_grad`. The bias terms are not counted.
double conv2d_forward_flops(const Conv2dConfig& cfg, const Shape& in);
double conv2d_backward_flops(const Conv2dConfig& cfg, const Shape& in, bool input_grad);

// "3x3 s1 p1", with " no-bias" appended when there is no bias.
std::string conv2d_describe(const Conv2dConfig& cfg);

class Conv2dSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // The config the keys give; in_channels from the input shape.
  static Conv2dConfig config_from(const LayerArgs& a);
  // Throws ConfigError for an invalid config (conv2d_check_config).
  Conv2dSpec(std::string name, const Conv2dConfig& cfg);
  explicit Conv2dSpec(const LayerArgs& a) : Conv2dSpec(a.name, config_from(a)) {}

  const LayerSchema& schema() const override { return static_schema(); }
  std::string describe() const override { return conv2d_describe(cfg_); }
  Shape output_shape(const Shape& in) const override { return conv2d_output_shape(cfg_, in); }
  std::vector<ParamSpec> param_specs() const override { return conv2d_param_specs(cfg_); }
  double forward_flops(const Shape& in) const override { return conv2d_forward_flops(cfg_, in); }
  double backward_flops(const Shape& in, bool input_grad) const override {
    return conv2d_backward_flops(cfg_, in, input_grad);
  }

  const Conv2dConfig& config() const { return cfg_; }
  // The full convolution sizes for an input shape (which must be valid).
  Conv2dShape conv_shape(const Shape& in) const { return conv2d_shape(cfg_, in); }

 protected:
  Conv2dConfig cfg_;
};

}  // namespace hpmc
