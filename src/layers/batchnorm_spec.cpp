// batchnorm_spec.cpp — the schema, checks, shapes, parameters and buffers of
// batchnorm2d (see batchnorm_spec.h).
#include "layers/batchnorm_spec.h"

#include "core/error.h"

namespace hpmc {

const LayerSchema& BatchNorm2dSpec::static_schema() {
  static const LayerSchema s{
      LayerKind::kBatchNorm2d,
      "batchnorm2d",
      "per-channel normalization over N·H·W, batch statistics in training and running ones in "
      "eval, then γ·x̂ + β (nn.BatchNorm2d); shape unchanged; weight, bias [C]",
      {float_key("eps", "1e-05", 0, 1, "added to the variance"),
       float_key("momentum", "0.1", 0, 1, "weight of each batch in the running statistics"),
       bool_key("affine", "true", "learn a scale (weight) and a shift (bias) per channel")}};
  return s;
}

BatchNorm2dConfig BatchNorm2dSpec::config_from(const LayerArgs& a) {
  BatchNorm2dConfig c;
  c.channels = a.in.c;
  c.eps = a.f("eps");
  c.momentum = a.f("momentum");
  c.affine = a.b("affine");
  return c;
}

BatchNorm2dSpec::BatchNorm2dSpec(std::string name, const BatchNorm2dConfig& cfg)
    : Layer(std::move(name)), cfg_(cfg) {
  if (cfg.channels < 1)
    throw ConfigError(str("batchnorm2d '", this->name(), "': needs at least 1 channel, got ",
                          cfg.channels));
  if (!(cfg.eps >= 0))
    throw ConfigError(str("batchnorm2d '", this->name(), "': eps must be at least 0, got ", cfg.eps));
  if (!(cfg.momentum >= 0 && cfg.momentum <= 1))
    throw ConfigError(str("batchnorm2d '", this->name(), "': momentum must be in [0, 1], got ",
                          cfg.momentum));
}

std::string BatchNorm2dSpec::describe() const {
  return str(cfg_.channels, " ch eps ", cfg_.eps, " momentum ", cfg_.momentum,
             cfg_.affine ? "" : " no-affine");
}

Shape BatchNorm2dSpec::output_shape(const Shape& in) const {
  if (in.c != cfg_.channels)
    throw ShapeError(str("batchnorm2d '", name(), "': built for ", cfg_.channels,
                         " channels, got input ", in.sample_str()));
  return in;
}

std::vector<ParamSpec> BatchNorm2dSpec::param_specs() const {
  if (!cfg_.affine) return {};
  ParamSpec w{"weight", {cfg_.channels}, 1, Init::kConstant, 1.0f};
  ParamSpec b{"bias", {cfg_.channels}, 1, Init::kZeros, 0.0f};
  return {w, b};
}

std::vector<ParamSpec> BatchNorm2dSpec::buffer_specs() const {
  ParamSpec mean{"running_mean", {cfg_.channels}, 1, Init::kZeros, 0.0f};
  ParamSpec var{"running_var", {cfg_.channels}, 1, Init::kConstant, 1.0f};
  ParamSpec count{"num_batches_tracked", {}, 1, Init::kZeros, 0.0f};
  return {mean, var, count};
}

size_t BatchNorm2dSpec::workspace_bytes(const Shape& /*in*/) const {
  return 2 * size_t(cfg_.channels) * sizeof(double);
}

void BatchNorm2dSpec::check_training_batch(const Shape& in) const {
  if (size_t(in.n) * size_t(in.h) * size_t(in.w) < 2)
    throw ShapeError(str("batchnorm2d '", name(), "': training needs more than one value per ",
                         "channel, got a batch of ", in.n, " of ", in.sample_str(),
                         " (as PyTorch); train with a batch of at least 2"));
}

HPMC_REGISTER_SPEC(BatchNorm2d)

}  // namespace hpmc
