// conv_transpose2d.h — the CPU 2-d transposed convolution layer (PyTorch's
// nn.ConvTranspose2d with a square kernel, the same stride, padding and
// output_padding on both axes).
//
// Layouts: input N×in×H×W, weight [in, out, k, k], bias [out], output
// N×out×H_out×W_out. The layer runs conv_transpose2d_ops.h in float32, which
// runs conv2d_ops.h on the layer's equivalent convolution (the thin kernels or
// im2col + gemm, as conv2d_thin_applies picks for it), OpenMP over the images.
// The schema, config and rules shared with the GPU layer are in
// conv_transpose2d_spec.h.
#pragma once

#include "layers/conv_transpose2d_spec.h"
#include "layers/cpu/conv2d_ops.h"
#include "layers/layer.h"

namespace hpmc {

class ConvTranspose2dCPU : public LayerCPU<ConvTranspose2dSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name, ConvTranspose2dConfig) or (LayerArgs)

  size_t workspace_bytes(const Shape& in) const override;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  cpu::Conv2dWorkspace<float> ws_;  // per-thread buffers, reused across calls
};

}  // namespace hpmc
