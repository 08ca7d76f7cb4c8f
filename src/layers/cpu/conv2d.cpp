// conv2d.cpp — Conv2dCPU: config checks, shape rules, and the float32 calls
// into the im2col + gemm kernels of conv2d_ops.h.
#include "layers/cpu/conv2d.h"

#include "core/error.h"

namespace hpmc {

namespace {

void check_config(const std::string& name, const Conv2dConfig& c) {
  auto fail = [&](const std::string& what) {
    throw ConfigError(str("conv2d '", name, "': ", what));
  };
  if (c.in_channels <= 0) fail(str("in_channels must be positive, got ", c.in_channels));
  if (c.out_channels <= 0) fail(str("out_channels must be positive, got ", c.out_channels));
  if (c.kernel <= 0) fail(str("kernel must be positive, got ", c.kernel));
  if (c.stride <= 0) fail(str("stride must be positive, got ", c.stride));
  if (c.padding < 0) fail(str("padding must be 0 or more, got ", c.padding));
  // With padding >= kernel the border outputs would see nothing but zeros.
  // PyTorch allows it, but in a config file it is far more likely a typo.
  if (c.padding >= c.kernel)
    fail(str("padding ", c.padding, " must be smaller than kernel ", c.kernel));
}

// "CxHxW" even for a flat input, where Shape::sample_str() would say "C".
std::string chw(const Shape& s) { return str(s.c, "x", s.h, "x", s.w); }

}  // namespace

Conv2dCPU::Conv2dCPU(std::string name, const Conv2dConfig& cfg)
    : LayerCPU(std::move(name)), cfg_(cfg) {
  check_config(this->name(), cfg_);
}

std::string Conv2dCPU::describe() const {
  std::string d = str(cfg_.kernel, "x", cfg_.kernel, " s", cfg_.stride, " p", cfg_.padding);
  return cfg_.bias ? d : d + " no-bias";
}

Shape Conv2dCPU::output_shape(const Shape& in) const {
  if (in.c != cfg_.in_channels)
    throw ShapeError(
        str("conv2d expects ", cfg_.in_channels, " input channels, got input ", chw(in)));
  int padded_h = in.h + 2 * cfg_.padding, padded_w = in.w + 2 * cfg_.padding;
  if (padded_h < cfg_.kernel || padded_w < cfg_.kernel)
    throw ShapeError(str("conv2d kernel ", cfg_.kernel, " with padding ", cfg_.padding,
                         " does not fit input ", chw(in), " (padded to ", padded_h, "x", padded_w,
                         ")"));
  Conv2dShape s = conv_shape(in);
  return Shape(in.n, s.K, s.P, s.Q);
}

Conv2dShape Conv2dCPU::conv_shape(const Shape& in) const {
  return make_conv2d_shape(in.n, in.c, in.h, in.w, cfg_.out_channels, cfg_.kernel, cfg_.kernel,
                           cfg_.stride, cfg_.padding);
}

std::vector<ParamSpec> Conv2dCPU::param_specs() const {
  const int k = cfg_.kernel;
  const int fan_in = cfg_.in_channels * k * k;
  std::vector<ParamSpec> specs;
  specs.push_back(
      {"weight", {cfg_.out_channels, cfg_.in_channels, k, k}, fan_in, Init::kKaimingUniform});
  if (cfg_.bias) specs.push_back({"bias", {cfg_.out_channels}, fan_in, Init::kKaimingUniform});
  return specs;
}

void Conv2dCPU::forward_impl(const Tensor& x, Tensor& y) {
  const float* b = cfg_.bias ? param(1) : nullptr;
  cpu::conv2d_gemm_forward(conv_shape(x.shape()), x.data<float>(), param(0), b, y.data<float>(),
                           ws_);
}

void Conv2dCPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const Conv2dShape s = conv_shape(x.shape());
  float* db = cfg_.bias ? grad(1) : nullptr;
  cpu::conv2d_gemm_backward_params(s, x.data<float>(), dy.data<float>(), grad(0), db, ws_);
  if (dx) cpu::conv2d_gemm_backward_data(s, dy.data<float>(), param(0), dx->data<float>(), ws_);
}

}  // namespace hpmc
