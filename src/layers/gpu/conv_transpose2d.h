// conv_transpose2d.h — the GPU 2-d transposed convolution (PyTorch's
// nn.ConvTranspose2d; conv_transpose2d_spec.h states the definition and the
// shapes): the layer gpu::ConvTranspose2dGPU, whose kernel family follows
// --impl (naive, tiled, or the implicit GEMM that im2col names; family.h) as
// Conv2dGPU's does, and the host functions it calls, on the default stream,
// one set per family of conv2d_kernels.h. No CUDA types.
//
// Layouts: x N×in×H×W, w [in, out, k, k], b [out], y N×out×H_out×W_out.
// `eq` is the layer's equivalent convolution for its input
// (conv_transpose2d_equivalent_conv: C = out, H × W = H_out × W_out, K = in,
// P × Q = H × W), whose KCRS weight is w itself, so each pass is a pass of the
// family's Conv2D kernels (which take any size, stride and padding):
//   forward          y  = family::conv2d_backward_data(eq, x, w), then
//                         y[n][o][·][·] += b[o] (add_channel_bias); y overwritten
//   backward_data    dx = family::conv2d_forward(eq, dy, w, no bias); dx overwritten
//   backward_params  dw += family::conv2d_backward_params(eq, dy, x, no bias), then
//                    db += Σ_{n,h,w} dy[n][o][h][w] (channel_sum); both accumulate
// db has its own reduction because eq's bias gradient would sum over its
// output channels, which are this layer's INPUT channels.
#pragma once

#include <string>

#include "layers/conv_shape.h"
#include "layers/conv_transpose2d_spec.h"
#include "layers/gpu/family.h"
#include "layers/layer.h"

namespace hpmc::gpu {

// The same layer as ConvTranspose2dCPU (schema, config, shapes and
// parameters from ConvTranspose2dSpec) running conv_transpose2d_forward,
// then conv_transpose2d_backward_params into grad(0)/grad(1) and, if dx is
// requested, conv_transpose2d_backward_data, with its family.
class ConvTranspose2dGPU : public LayerGPU<ConvTranspose2dSpec> {
 public:
  // Throws ConfigError for an invalid config (see conv_transpose2d_check_config).
  ConvTranspose2dGPU(std::string name, const ConvTranspose2dConfig& cfg, Family family)
      : LayerGPU(std::move(name), cfg), family_(family) {}
  // The family that args.impl names.
  explicit ConvTranspose2dGPU(const LayerArgs& args)
      : LayerGPU(args), family_(family_of(args.impl, args.name)) {}

  const char* impl() const override { return family_name(family_); }
  Family family() const { return family_; }

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  Family family_;
};

// y = conv_transpose(x, w) + b; b may be null. Overwrites y.
void conv_transpose2d_forward(Family family, const Conv2dShape& eq, const float* x,
                              const float* w, const float* b, float* y);
// dx = dL/dx for dy = dL/dy. Overwrites dx.
void conv_transpose2d_backward_data(Family family, const Conv2dShape& eq, const float* dy,
                                    const float* w, float* dx);
// dw += dL/dw and, if db is non-null, db += dL/db.
void conv_transpose2d_backward_params(Family family, const Conv2dShape& eq, const float* x,
                                      const float* dy, float* dw, float* db);

// The two bias passes, shared by every family, on eq's input space
// (N × eq.C × eq.H × eq.W, the layer's output):
// y[n][o][i] += b[o], one thread per element (fp32: the same single rounding
// as the CPU layer's, after the sum).
void add_channel_bias(const Conv2dShape& eq, const float* b, float* y);
// db[o] += Σ_{n,i} dy[n][o][i]: one block per channel; each thread sums a
// fixed strided subset in double, then a fixed shared-memory tree; one fp32
// rounding at the end. No atomics: bit-identical run to run.
void channel_sum(const Conv2dShape& eq, const float* dy, float* db);

}  // namespace hpmc::gpu
