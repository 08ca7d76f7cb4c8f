// conv_transpose2d_spec.h — the conv_transpose2d layer type, defined once for
// every device: its schema (keys), config, validation, shape rule, parameter
// tensors, FLOPs and one-line description. ConvTranspose2dSpec is the
// device-neutral layer class; ConvTranspose2dCPU and gpu::ConvTranspose2dGPU
// derive from it and add only the passes. The rules are also free functions,
// for the kernels' tests (as in conv2d_spec.h).
//
// PyTorch's nn.ConvTranspose2d with a square kernel, the same stride, padding
// and output_padding on both axes, groups 1 and dilation 1. Layouts: input x
// NCHW (C = in), weight [in, out, kh, kw] (PyTorch's layout for the
// transposed convolution), bias [out], output NOHW with
//   H_out = (H − 1)·stride − 2·padding + kernel + output_padding
// (the same for W). By definition each input pixel scatters a weighted copy
// of the kernel into the output:
//   y[n][o][i·st − pad + r][j·st − pad + s] += x[n][c][i][j] · w[c][o][r][s]
// (taps that land outside [0, H_out) × [0, W_out) dropped), then + b[o].
//
// The equivalent convolution. A transposed convolution is the input
// gradient of a convolution: take the Conv2D that maps the OUTPUT space
// (C = out channels, H_out × W_out) to the INPUT space (K = in channels,
// H × W) with the same kernel, stride and padding. Its KCRS weight is [in,
// out, k, k] — exactly this layer's weight — and its output size
// conv_out_size(H_out, k, st, pad) is H for every output_padding < stride.
// Then, with eq that convolution,
//   forward          y  = eq.backward_data(dy := x) + b
//   backward_data    dx = eq.forward(x := dy)                     (no bias)
//   backward_params  dw += eq.backward_params(x := dy, dy := x)   (the weight part)
//                    db += Σ_{n,h,w} dy[n][o][h][w]               (its own reduction:
//                    eq's bias gradient would sum over the in channels)
// so every implementation (CPU conv2d_ops.h, the GPU families of
// conv2d_kernels.h) runs the Conv2D code it already has.
#pragma once

#include <string>
#include <vector>

#include "core/shape.h"
#include "layers/conv_shape.h"
#include "layers/layer.h"

namespace hpmc {

struct ConvTranspose2dConfig {
  int in_channels = 0, out_channels = 0, kernel = 3, stride = 1, padding = 0,
      output_padding = 0;
  bool bias = true;
};

// H_out = (in − 1)·stride − 2·pad + k + output_padding, in 64 bits (it may be
// ≤ 0 or past the int range for a bad config; the shape rule refuses those).
long long conv_transpose_out_size(int in, int k, int stride, int pad, int output_padding);

// Throws ConfigError naming the layer for a non-positive size or stride, a
// negative padding or output_padding, a padding of a whole kernel or more, or
// an output_padding not smaller than the stride (PyTorch's rule).
void conv_transpose2d_check_config(const std::string& layer_name,
                                   const ConvTranspose2dConfig& cfg);

// The output shape for an input shape (n carried through). Throws ShapeError
// quoting the input shape (and the output it would give) for the wrong
// channel count, an output of less than 1×1, or sizes past the tensor limit.
Shape conv_transpose2d_output_shape(const ConvTranspose2dConfig& cfg, const Shape& in);

// The equivalent convolution for an input shape (which must be valid): N,
// C = out_channels, H_out × W_out → K = in_channels, P × Q = H × W, R = S =
// kernel, the layer's stride and padding.
Conv2dShape conv_transpose2d_equivalent_conv(const ConvTranspose2dConfig& cfg, const Shape& in);

// weight {in, out, k, k} and, with bias, bias {out}; both with PyTorch's
// fan_in for this layout, weight.size(1)·k·k = out·k·k
// (torch.nn.init._calculate_fan_in_and_fan_out on the [in, out, k, k] weight).
std::vector<ParamSpec> conv_transpose2d_param_specs(const ConvTranspose2dConfig& cfg);

// FLOPs (2 per multiply-add): forward 2·N·in·H·W·out·k·k (every input pixel
// times every kernel tap, taps cropped by the padding included, as the
// equivalent convolution's count); backward the same for the weight gradient
// plus the same again for the input gradient when `input_grad`. The bias
// terms are not counted.
double conv_transpose2d_forward_flops(const ConvTranspose2dConfig& cfg, const Shape& in);
double conv_transpose2d_backward_flops(const ConvTranspose2dConfig& cfg, const Shape& in,
                                       bool input_grad);

// "4x4 s2 p1", with " op1" for an output_padding and " no-bias" appended
// when there is no bias.
std::string conv_transpose2d_describe(const ConvTranspose2dConfig& cfg);

class ConvTranspose2dSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // The config the keys give; in_channels from the input shape.
  static ConvTranspose2dConfig config_from(const LayerArgs& a);
  // Throws ConfigError for an invalid config (conv_transpose2d_check_config).
  ConvTranspose2dSpec(std::string name, const ConvTranspose2dConfig& cfg);
  explicit ConvTranspose2dSpec(const LayerArgs& a) : ConvTranspose2dSpec(a.name, config_from(a)) {}

  const LayerSchema& schema() const override { return static_schema(); }
  std::string describe() const override { return conv_transpose2d_describe(cfg_); }
  Shape output_shape(const Shape& in) const override {
    return conv_transpose2d_output_shape(cfg_, in);
  }
  std::vector<ParamSpec> param_specs() const override {
    return conv_transpose2d_param_specs(cfg_);
  }
  double forward_flops(const Shape& in) const override {
    return conv_transpose2d_forward_flops(cfg_, in);
  }
  double backward_flops(const Shape& in, bool input_grad) const override {
    return conv_transpose2d_backward_flops(cfg_, in, input_grad);
  }

  const ConvTranspose2dConfig& config() const { return cfg_; }
  // The equivalent convolution for an input shape (which must be valid).
  Conv2dShape equivalent_conv(const Shape& in) const {
    return conv_transpose2d_equivalent_conv(cfg_, in);
  }

 protected:
  ConvTranspose2dConfig cfg_;
};

}  // namespace hpmc
