// linear_spec.cpp — the device-neutral Linear rules of linear_spec.h.
#include "layers/linear_spec.h"

#include "core/error.h"

namespace hpmc {

void linear_check_config(const std::string& layer_name, const LinearConfig& cfg) {
  if (cfg.in_features <= 0)
    throw ConfigError(
        str("linear '", layer_name, "': in_features must be positive, got ", cfg.in_features));
  if (cfg.out_features <= 0)
    throw ConfigError(
        str("linear '", layer_name, "': out_features must be positive, got ", cfg.out_features));
}

Shape linear_output_shape(const LinearConfig& cfg, const Shape& in) {
  const int f = cfg.in_features;
  if (in.h != 1 || in.w != 1)
    throw ShapeError(str("linear expects a flat input of ", f, " features (N, ", f, ", 1, 1), got ",
                         in.c, "x", in.h, "x", in.w, ": add a flatten layer before it"));
  if (in.c != f)
    throw ShapeError(str("linear expects a flat input of ", f, " features (N, ", f, ", 1, 1), got ",
                         in.c, " features"));
  const size_t weights = size_t(cfg.in_features) * size_t(cfg.out_features);
  if (weights > kMaxTensorElements)
    throw ShapeError(str("its weight [", cfg.out_features, ", ", f, "] would hold ", weights,
                         " values, more than ", kMaxTensorElements,
                         "; use fewer out_features, or fewer features before it"));
  return Shape(in.n, cfg.out_features, 1, 1);
}

std::vector<ParamSpec> linear_param_specs(const LinearConfig& cfg) {
  std::vector<ParamSpec> specs;
  specs.push_back(
      {"weight", {cfg.out_features, cfg.in_features}, cfg.in_features, Init::kKaimingUniform});
  if (cfg.bias)
    specs.push_back({"bias", {cfg.out_features}, cfg.in_features, Init::kKaimingUniform});
  return specs;
}

double linear_forward_flops(const LinearConfig& cfg, const Shape& in) {
  return 2.0 * in.n * cfg.in_features * cfg.out_features;
}

double linear_backward_flops(const LinearConfig& cfg, const Shape& in, bool input_grad) {
  return (input_grad ? 2 : 1) * linear_forward_flops(cfg, in);
}

std::string linear_describe(const LinearConfig& cfg) {
  std::string d = str(cfg.in_features, "->", cfg.out_features);
  return cfg.bias ? d : d + " no-bias";
}

const LayerSchema& LinearSpec::static_schema() {
  static const LayerSchema s{
      LayerKind::kLinear,
      "linear",
      "fully connected layer (nn.Linear): F → out_features; needs a flat input (add flatten); "
      "weight [out, in]",
      {int_key("out_features", "", 1, 1 << 24, "output features"),
       bool_key("bias", "true", "learn a bias per output feature")}};
  return s;
}

LinearConfig LinearSpec::config_from(const LayerArgs& a) {
  LinearConfig c;
  c.in_features = a.in.c;
  c.out_features = a.i("out_features");
  c.bias = a.b("bias");
  return c;
}

LinearSpec::LinearSpec(std::string name, const LinearConfig& cfg)
    : Layer(std::move(name)), cfg_(cfg) {
  linear_check_config(this->name(), cfg_);
}

HPMC_REGISTER_SPEC(Linear)

}  // namespace hpmc
