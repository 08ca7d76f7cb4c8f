// linear_spec.h — what every Linear layer (CPU or GPU) must agree on: the
// config, its validation, the flat-input shape rule, the parameter tensors
// and the one-line description, as device-neutral free functions.
//
// Input: a flat NCHW tensor (N, in_features, 1, 1); weight [out, in]
// (PyTorch's layout), bias [out], output (N, out_features, 1, 1).
#pragma once

#include <string>
#include <vector>

#include "core/shape.h"
#include "layers/layer.h"

namespace hpmc {

struct LinearConfig {
  int in_features = 0, out_features = 0;
  bool bias = true;
};

// Throws ConfigError naming the layer for a non-positive feature count.
void linear_check_config(const std::string& layer_name, const LinearConfig& cfg);

// (n, out_features, 1, 1). Throws ShapeError for an input that is not flat
// (suggesting a flatten layer) or has the wrong feature count.
Shape linear_output_shape(const LinearConfig& cfg, const Shape& in);

// weight {out, in} and, with bias, bias {out}; both fan_in = in.
std::vector<ParamSpec> linear_param_specs(const LinearConfig& cfg);

// FLOPs (2 per multiply-add) for an input of in.n samples: forward
// 2·N·in·out; backward 2·N·in·out for the weight gradient plus the same for
// the input gradient when `input_grad`. The bias terms are not counted.
double linear_forward_flops(const LinearConfig& cfg, const Shape& in);
double linear_backward_flops(const LinearConfig& cfg, const Shape& in, bool input_grad);

// "784->128", with " no-bias" appended when there is no bias.
std::string linear_describe(const LinearConfig& cfg);

}  // namespace hpmc
