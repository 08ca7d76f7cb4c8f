// linear_spec.h — the linear layer type, defined once for every device: its
// schema, config, validation, flat-input shape rule, parameter tensors, FLOPs
// and one-line description. LinearSpec is the device-neutral layer class;
// LinearCPU and gpu::LinearGPU add only the passes.
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

class LinearSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // The config the keys give; in_features from the (flat) input shape.
  static LinearConfig config_from(const LayerArgs& a);
  // Throws ConfigError for a non-positive feature count.
  LinearSpec(std::string name, const LinearConfig& cfg);
  explicit LinearSpec(const LayerArgs& a) : LinearSpec(a.name, config_from(a)) {}

  const LayerSchema& schema() const override { return static_schema(); }
  std::string describe() const override { return linear_describe(cfg_); }
  Shape output_shape(const Shape& in) const override { return linear_output_shape(cfg_, in); }
  std::vector<ParamSpec> param_specs() const override { return linear_param_specs(cfg_); }
  double forward_flops(const Shape& in) const override { return linear_forward_flops(cfg_, in); }
  double backward_flops(const Shape& in, bool input_grad) const override {
    return linear_backward_flops(cfg_, in, input_grad);
  }
  const LinearConfig& config() const { return cfg_; }

 protected:
  LinearConfig cfg_;
};

}  // namespace hpmc
