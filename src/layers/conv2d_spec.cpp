// conv2d_spec.cpp — the device-neutral Conv2D rules of conv2d_spec.h.
#include "layers/conv2d_spec.h"

#include "core/error.h"

namespace hpmc {

namespace {

// "CxHxW" even for a flat input, where Shape::sample_str() would say "C".
std::string chw(const Shape& s) { return str(s.c, "x", s.h, "x", s.w); }

}  // namespace

void conv2d_check_config(const std::string& layer_name, const Conv2dConfig& c) {
  auto fail = [&](const std::string& what) {
    throw ConfigError(str("conv2d '", layer_name, "': ", what));
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

Shape conv2d_output_shape(const Conv2dConfig& cfg, const Shape& in) {
  if (in.c != cfg.in_channels)
    throw ShapeError(
        str("conv2d expects ", cfg.in_channels, " input channels, got input ", chw(in)));
  // In 64 bits: an input near the element limit plus the padding must not wrap.
  const long long padded_h = in.h + 2LL * cfg.padding, padded_w = in.w + 2LL * cfg.padding;
  if (padded_h < cfg.kernel || padded_w < cfg.kernel)
    throw ShapeError(str("conv2d kernel ", cfg.kernel, " with padding ", cfg.padding,
                         " does not fit input ", chw(in), " (padded to ", padded_h, "x", padded_w,
                         ")"));
  if (padded_h > (long long)kMaxTensorElements || padded_w > (long long)kMaxTensorElements)
    throw ShapeError(str("conv2d with padding ", cfg.padding, " on input ", chw(in),
                         " gives a padded size past ", kMaxTensorElements));
  // Sizes the kernels index with 32-bit integers (shape.h).
  const size_t taps = size_t(in.c) * size_t(cfg.kernel) * size_t(cfg.kernel);
  const size_t weights = taps * size_t(cfg.out_channels);
  if (weights > kMaxTensorElements)
    throw ShapeError(str("its weight [", cfg.out_channels, ", ", in.c, ", ", cfg.kernel, ", ",
                         cfg.kernel, "] would hold ", weights, " values, more than ",
                         kMaxTensorElements, "; use fewer channels or a smaller kernel"));
  Conv2dShape s = conv2d_shape(cfg, in);
  const size_t column = taps * size_t(s.P) * size_t(s.Q);
  if (column > kMaxTensorElements)
    throw ShapeError(str("conv2d on input ", chw(in), " would need a column matrix of ", taps,
                         " x ", size_t(s.P) * size_t(s.Q), " = ", column,
                         " values per image, more than ", kMaxTensorElements,
                         "; use fewer input channels, a smaller kernel or a smaller input"));
  return Shape(in.n, s.K, s.P, s.Q);
}

Conv2dShape conv2d_shape(const Conv2dConfig& cfg, const Shape& in) {
  return make_conv2d_shape(in.n, in.c, in.h, in.w, cfg.out_channels, cfg.kernel, cfg.kernel,
                           cfg.stride, cfg.padding);
}

std::vector<ParamSpec> conv2d_param_specs(const Conv2dConfig& cfg) {
  const int k = cfg.kernel;
  const int fan_in = cfg.in_channels * k * k;
  std::vector<ParamSpec> specs;
  specs.push_back(
      {"weight", {cfg.out_channels, cfg.in_channels, k, k}, fan_in, Init::kKaimingUniform});
  if (cfg.bias) specs.push_back({"bias", {cfg.out_channels}, fan_in, Init::kKaimingUniform});
  return specs;
}

double conv2d_forward_flops(const Conv2dConfig& cfg, const Shape& in) {
  const Conv2dShape s = conv2d_shape(cfg, in);
  return 2.0 * s.N * s.K * s.P * s.Q * s.C * s.R * s.S;
}

double conv2d_backward_flops(const Conv2dConfig& cfg, const Shape& in, bool input_grad) {
  return (input_grad ? 2 : 1) * conv2d_forward_flops(cfg, in);
}

std::string conv2d_describe(const Conv2dConfig& cfg) {
  std::string d = str(cfg.kernel, "x", cfg.kernel, " s", cfg.stride, " p", cfg.padding);
  return cfg.bias ? d : d + " no-bias";
}

const LayerSchema& Conv2dSpec::static_schema() {
  static const LayerSchema s{
      LayerKind::kConv2d,
      "conv2d",
      "2-d convolution (nn.Conv2d), square kernel, zero padding: C×H×W → out_channels×P×Q, "
      "P = ⌊(H + 2·padding − kernel)/stride⌋ + 1; weight [out, in, k, k]",
      {int_key("out_channels", "", 1, 1 << 16, "output channels"),
       int_key("kernel", "3", 1, 1024, "kernel size (k×k)"),
       int_key("stride", "1", 1, 1024, "stride on both axes"),
       int_key("padding", "0", 0, 1024, "zero padding on every side (less than kernel)"),
       bool_key("bias", "true", "learn a bias per output channel")}};
  return s;
}

Conv2dConfig Conv2dSpec::config_from(const LayerArgs& a) {
  Conv2dConfig c;
  c.in_channels = a.in.c;
  c.out_channels = a.i("out_channels");
  c.kernel = a.i("kernel");
  c.stride = a.i("stride");
  c.padding = a.i("padding");
  c.bias = a.b("bias");
  return c;
}

Conv2dSpec::Conv2dSpec(std::string name, const Conv2dConfig& cfg)
    : Layer(std::move(name)), cfg_(cfg) {
  conv2d_check_config(this->name(), cfg_);
}

HPMC_REGISTER_SPEC(Conv2d)

}  // namespace hpmc
