// linear.cpp — LinearCPU: config checks, the flat-input rule, and the
// float32 calls into linear_ops.h.
#include "layers/cpu/linear.h"

#include "core/error.h"
#include "layers/cpu/linear_ops.h"

namespace hpmc {

LinearCPU::LinearCPU(std::string name, const LinearConfig& cfg)
    : LayerCPU(std::move(name)), cfg_(cfg) {
  if (cfg_.in_features <= 0)
    throw ConfigError(
        str("linear '", this->name(), "': in_features must be positive, got ", cfg_.in_features));
  if (cfg_.out_features <= 0)
    throw ConfigError(
        str("linear '", this->name(), "': out_features must be positive, got ", cfg_.out_features));
}

std::string LinearCPU::describe() const {
  std::string d = str(cfg_.in_features, "->", cfg_.out_features);
  return cfg_.bias ? d : d + " no-bias";
}

Shape LinearCPU::output_shape(const Shape& in) const {
  const int f = cfg_.in_features;
  if (in.h != 1 || in.w != 1)
    throw ShapeError(str("linear expects a flat input of ", f, " features (N, ", f, ", 1, 1), got ",
                         in.c, "x", in.h, "x", in.w, ": add a flatten layer before it"));
  if (in.c != f)
    throw ShapeError(str("linear expects a flat input of ", f, " features (N, ", f, ", 1, 1), got ",
                         in.c, " features"));
  return Shape(in.n, cfg_.out_features, 1, 1);
}

std::vector<ParamSpec> LinearCPU::param_specs() const {
  std::vector<ParamSpec> specs;
  specs.push_back(
      {"weight", {cfg_.out_features, cfg_.in_features}, cfg_.in_features, Init::kKaimingUniform});
  if (cfg_.bias)
    specs.push_back({"bias", {cfg_.out_features}, cfg_.in_features, Init::kKaimingUniform});
  return specs;
}

void LinearCPU::forward_impl(const Tensor& x, Tensor& y) {
  const float* b = cfg_.bias ? param(1) : nullptr;
  cpu::linear_forward(x.shape().n, cfg_.in_features, cfg_.out_features, x.data<float>(), param(0),
                      b, y.data<float>());
}

void LinearCPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const int n = x.shape().n, in = cfg_.in_features, out = cfg_.out_features;
  float* db = cfg_.bias ? grad(1) : nullptr;
  cpu::linear_backward_params(n, in, out, x.data<float>(), dy.data<float>(), grad(0), db);
  if (dx) cpu::linear_backward_data(n, in, out, dy.data<float>(), param(0), dx->data<float>());
}

}  // namespace hpmc
