// activation_spec.cpp — the schemas, checks and descriptions of the
// activation layer types.
#include "layers/activation_spec.h"

#include <cmath>

#include "core/error.h"

namespace hpmc {

const LayerSchema& ReLUSpec::static_schema() {
  static const LayerSchema s{LayerKind::kReLU, "relu", "max(x, 0) element-wise (nn.ReLU); shape unchanged", {}};
  return s;
}

HPMC_REGISTER_SPEC(ReLU)

const LayerSchema& SigmoidSpec::static_schema() {
  static const LayerSchema s{LayerKind::kSigmoid, "sigmoid",
                             "1 / (1 + exp(−x)) element-wise (nn.Sigmoid); shape unchanged", {}};
  return s;
}

HPMC_REGISTER_SPEC(Sigmoid)

const LayerSchema& TanhSpec::static_schema() {
  static const LayerSchema s{LayerKind::kTanh, "tanh",
                             "tanh(x) element-wise (nn.Tanh); shape unchanged", {}};
  return s;
}

HPMC_REGISTER_SPEC(Tanh)

const LayerSchema& LeakyReLUSpec::static_schema() {
  static const LayerSchema s{
      LayerKind::kLeakyReLU,
      "leaky_relu",
      "x > 0 ? x : negative_slope·x element-wise (nn.LeakyReLU); shape unchanged",
      {float_key("negative_slope", "0.01", 0, 1e6, "slope for x ≤ 0")}};
  return s;
}

LeakyReLUSpec::LeakyReLUSpec(std::string name, float negative_slope)
    : Layer(std::move(name)), slope_(negative_slope) {
  if (!(slope_ >= 0.0f) || !std::isfinite(slope_))
    throw ConfigError(str("leaky_relu '", this->name(), "': negative_slope must be 0 or more, got ",
                          slope_));
}

std::string LeakyReLUSpec::describe() const { return str("slope ", slope_); }

HPMC_REGISTER_SPEC(LeakyReLU)

const LayerSchema& PReLUSpec::static_schema() {
  static const LayerSchema s{
      LayerKind::kPReLU,
      "prelu",
      "x > 0 ? x : a_c·x with a learned slope a_c per channel (nn.PReLU(num_parameters=C)); "
      "shape unchanged",
      {float_key("init", "0.25", -1000, 1000, "initial value of every slope")}};
  return s;
}

PReLUSpec::PReLUSpec(std::string name, int channels, float init)
    : Layer(std::move(name)), channels_(channels), init_(init) {
  if (channels_ < 1)
    throw ConfigError(str("prelu '", this->name(), "': needs at least 1 channel, got ", channels_));
}

Shape PReLUSpec::output_shape(const Shape& in) const {
  if (in.c != channels_)
    throw ShapeError(str("prelu has ", channels_, " slopes (one per channel), got input ",
                         in.sample_str(), " with ", in.c, " channels"));
  return in;
}

std::vector<ParamSpec> PReLUSpec::param_specs() const {
  return {{"weight", {channels_}, 1, Init::kConstant, init_}};
}

std::string PReLUSpec::describe() const { return str(channels_, " slopes"); }

HPMC_REGISTER_SPEC(PReLU)

}  // namespace hpmc
