// conv2d_spec.h — what every Conv2D layer (CPU or GPU) must agree on: the
// config, its validation, the shape rule, the parameter tensors and the
// one-line description. Device-neutral free functions, so Conv2dCPU and
// Conv2dGPU cannot drift apart.
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

}  // namespace hpmc
