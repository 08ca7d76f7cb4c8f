// conv_transpose2d_spec.cpp — the device-neutral ConvTranspose2D rules and
// schema of conv_transpose2d_spec.h.
#include "layers/conv_transpose2d_spec.h"

#include "core/error.h"

namespace hpmc {

namespace {

// "CxHxW" even for a flat input, where Shape::sample_str() would say "C".
std::string chw(const Shape& s) { return str(s.c, "x", s.h, "x", s.w); }

}  // namespace

long long conv_transpose_out_size(int in, int k, int stride, int pad, int output_padding) {
  return (static_cast<long long>(in) - 1) * stride - 2LL * pad + k + output_padding;
}

void conv_transpose2d_check_config(const std::string& layer_name,
                                   const ConvTranspose2dConfig& c) {
  auto fail = [&](const std::string& what) {
    throw ConfigError(str("conv_transpose2d '", layer_name, "': ", what));
  };
  if (c.in_channels <= 0) fail(str("in_channels must be positive, got ", c.in_channels));
  if (c.out_channels <= 0) fail(str("out_channels must be positive, got ", c.out_channels));
  if (c.kernel <= 0) fail(str("kernel must be positive, got ", c.kernel));
  if (c.stride <= 0) fail(str("stride must be positive, got ", c.stride));
  if (c.padding < 0) fail(str("padding must be 0 or more, got ", c.padding));
  if (c.output_padding < 0)
    fail(str("output_padding must be 0 or more, got ", c.output_padding));
  // As for conv2d: the padding of the equivalent convolution, and a padding of
  // a whole kernel or more (PyTorch allows it) is far more likely a typo.
  if (c.padding >= c.kernel)
    fail(str("padding ", c.padding, " must be smaller than kernel ", c.kernel));
  // PyTorch's rule: the extra rows must lie within one stride of the last
  // input pixel's kernel, or they could not be told from a larger input.
  if (c.output_padding >= c.stride)
    fail(str("output_padding ", c.output_padding, " must be smaller than stride ", c.stride,
             " (as in PyTorch)"));
}

Shape conv_transpose2d_output_shape(const ConvTranspose2dConfig& cfg, const Shape& in) {
  if (in.c != cfg.in_channels)
    throw ShapeError(str("conv_transpose2d expects ", cfg.in_channels,
                         " input channels, got input ", chw(in)));
  const long long ho =
      conv_transpose_out_size(in.h, cfg.kernel, cfg.stride, cfg.padding, cfg.output_padding);
  const long long wo =
      conv_transpose_out_size(in.w, cfg.kernel, cfg.stride, cfg.padding, cfg.output_padding);
  const std::string gives = str("conv_transpose2d kernel ", cfg.kernel, " stride ", cfg.stride,
                                " padding ", cfg.padding, " output_padding ",
                                cfg.output_padding, " on input ", chw(in), " gives output ",
                                cfg.out_channels, "x", ho, "x", wo);
  if (ho < 1 || wo < 1)
    throw ShapeError(gives + ", less than 1x1; use less padding or a larger input");
  // The equivalent convolution pads the output plane: that must stay in range.
  if (ho + 2LL * cfg.padding > (long long)kMaxTensorElements ||
      wo + 2LL * cfg.padding > (long long)kMaxTensorElements)
    throw ShapeError(gives + str(", a size past ", kMaxTensorElements));
  const size_t plane_out = size_t(ho) * size_t(wo);
  if (size_t(cfg.out_channels) * plane_out > kMaxTensorElements)
    throw ShapeError(gives + str(", more than ", kMaxTensorElements,
                                 " values per image; use fewer channels or a smaller input"));
  // Sizes the kernels index with 32-bit integers (shape.h).
  const size_t taps = size_t(cfg.out_channels) * size_t(cfg.kernel) * size_t(cfg.kernel);
  const size_t weights = taps * size_t(in.c);
  if (weights > kMaxTensorElements)
    throw ShapeError(str("its weight [", in.c, ", ", cfg.out_channels, ", ", cfg.kernel, ", ",
                         cfg.kernel, "] would hold ", weights, " values, more than ",
                         kMaxTensorElements, "; use fewer channels or a smaller kernel"));
  // The equivalent convolution's column matrix (out·k·k rows, one column per
  // input pixel), which the CPU path builds per image.
  const size_t column = taps * size_t(in.h) * size_t(in.w);
  if (column > kMaxTensorElements)
    throw ShapeError(str("conv_transpose2d on input ", chw(in), " would need a column matrix of ",
                         taps, " x ", size_t(in.h) * size_t(in.w), " = ", column,
                         " values per image, more than ", kMaxTensorElements,
                         "; use fewer output channels, a smaller kernel or a smaller input"));
  return Shape(in.n, cfg.out_channels, int(ho), int(wo));
}

Conv2dShape conv_transpose2d_equivalent_conv(const ConvTranspose2dConfig& cfg, const Shape& in) {
  const int ho = int(
      conv_transpose_out_size(in.h, cfg.kernel, cfg.stride, cfg.padding, cfg.output_padding));
  const int wo = int(
      conv_transpose_out_size(in.w, cfg.kernel, cfg.stride, cfg.padding, cfg.output_padding));
  Conv2dShape s = make_conv2d_shape(in.n, cfg.out_channels, ho, wo, cfg.in_channels, cfg.kernel,
                                    cfg.kernel, cfg.stride, cfg.padding);
  // floor((H_out + 2·pad − k) / st) + 1 = floor(((H − 1)·st + op) / st) + 1 = H
  // exactly because op < st (conv_transpose2d_check_config).
  HPMC_CHECK(s.P == in.h && s.Q == in.w, "the equivalent convolution of conv_transpose2d maps ",
             ho, "x", wo, " to ", s.P, "x", s.Q, ", not to the input's ", in.h, "x", in.w);
  return s;
}

std::vector<ParamSpec> conv_transpose2d_param_specs(const ConvTranspose2dConfig& cfg) {
  const int k = cfg.kernel;
  const int fan_in = cfg.out_channels * k * k;
  std::vector<ParamSpec> specs;
  specs.push_back(
      {"weight", {cfg.in_channels, cfg.out_channels, k, k}, fan_in, Init::kKaimingUniform});
  if (cfg.bias) specs.push_back({"bias", {cfg.out_channels}, fan_in, Init::kKaimingUniform});
  return specs;
}

double conv_transpose2d_forward_flops(const ConvTranspose2dConfig& cfg, const Shape& in) {
  return 2.0 * in.n * cfg.in_channels * in.h * in.w * cfg.out_channels * cfg.kernel *
         cfg.kernel;
}

double conv_transpose2d_backward_flops(const ConvTranspose2dConfig& cfg, const Shape& in,
                                       bool input_grad) {
  return (input_grad ? 2 : 1) * conv_transpose2d_forward_flops(cfg, in);
}

std::string conv_transpose2d_describe(const ConvTranspose2dConfig& cfg) {
  std::string d = str(cfg.kernel, "x", cfg.kernel, " s", cfg.stride, " p", cfg.padding);
  if (cfg.output_padding) d += str(" op", cfg.output_padding);
  return cfg.bias ? d : d + " no-bias";
}

const LayerSchema& ConvTranspose2dSpec::static_schema() {
  static const LayerSchema s{
      LayerKind::kConvTranspose2d,
      "conv_transpose2d",
      "2-d transposed convolution (nn.ConvTranspose2d), square kernel: C×H×W → "
      "out_channels×H_out×W_out, H_out = (H − 1)·stride − 2·padding + kernel + "
      "output_padding; weight [in, out, k, k]",
      {int_key("out_channels", "", 1, 1 << 16, "output channels"),
       int_key("kernel", "3", 1, 1024, "kernel size (k×k)"),
       int_key("stride", "1", 1, 1024, "stride on both axes (the upsampling factor)"),
       int_key("padding", "0", 0, 1024,
               "rows and columns cropped from every side of the output (less than kernel)"),
       int_key("output_padding", "0", 0, 1023,
               "rows and columns added at the bottom and right of the output (less than stride)"),
       bool_key("bias", "true", "learn a bias per output channel")}};
  return s;
}

ConvTranspose2dConfig ConvTranspose2dSpec::config_from(const LayerArgs& a) {
  ConvTranspose2dConfig c;
  c.in_channels = a.in.c;
  c.out_channels = a.i("out_channels");
  c.kernel = a.i("kernel");
  c.stride = a.i("stride");
  c.padding = a.i("padding");
  c.output_padding = a.i("output_padding");
  c.bias = a.b("bias");
  return c;
}

ConvTranspose2dSpec::ConvTranspose2dSpec(std::string name, const ConvTranspose2dConfig& cfg)
    : Layer(std::move(name)), cfg_(cfg) {
  conv_transpose2d_check_config(this->name(), cfg_);
}

HPMC_REGISTER_SPEC(ConvTranspose2d)

}  // namespace hpmc
