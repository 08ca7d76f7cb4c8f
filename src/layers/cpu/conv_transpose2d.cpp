// conv_transpose2d.cpp — ConvTranspose2dCPU: the float32 calls into
// conv_transpose2d_ops.h on the layer's equivalent convolution, in the
// layer's precision (fp32 or bf16).
#include "layers/cpu/conv_transpose2d.h"

#include <algorithm>

#include "core/threads.h"
#include "layers/cpu/conv_transpose2d_ops.h"

namespace hpmc {

size_t ConvTranspose2dCPU::workspace_bytes(const Shape& in) const {
  // conv2d_ops.h's per-thread buffers for the equivalent convolution (as
  // Conv2dCPU counts them): one image's column matrix and a partial weight
  // and bias gradient each; the thin path's buffers are no larger.
  const Conv2dShape s = equivalent_conv(in);
  const size_t threads = size_t(std::max(1, std::min(num_threads(), in.n)));
  const size_t column = s.is_pointwise() ? 0 : size_t(s.col_rows()) * size_t(s.col_cols());
  // In bf16, the gemm path's weights packed once a pass, shared by the threads.
  return threads * (column + s.weight_count() + size_t(s.K)) * sizeof(float) +
         cpu::conv2d_packed_weights_bytes(s, precision());
}

void ConvTranspose2dCPU::forward_impl(const Tensor& x, Tensor& y) {
  const float* b = cfg_.bias ? param(1) : nullptr;
  cpu::conv_transpose2d_forward(equivalent_conv(x.shape()), x.data<float>(), param(0), b,
                                y.data<float>(), ws_, precision());
}

void ConvTranspose2dCPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                       Tensor* dx) {
  const Conv2dShape eq = equivalent_conv(x.shape());
  float* db = cfg_.bias ? grad(1) : nullptr;
  cpu::conv_transpose2d_backward_params(eq, x.data<float>(), dy.data<float>(), grad(0), db, ws_,
                                        precision());
  if (dx)
    cpu::conv_transpose2d_backward_data(eq, dy.data<float>(), param(0), dx->data<float>(), ws_,
                                        precision());
}

HPMC_REGISTER_CPU(ConvTranspose2d)

}  // namespace hpmc
