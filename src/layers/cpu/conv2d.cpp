// conv2d.cpp — Conv2dCPU: the shared rules of conv2d_spec.h and the float32
// calls into conv2d_ops.h, which picks im2col + gemm or the thin kernels, in
// the layer's precision (fp32 or bf16).
#include "layers/cpu/conv2d.h"

#include <algorithm>

#include "core/threads.h"

namespace hpmc {

size_t Conv2dCPU::workspace_bytes(const Shape& in) const {
  // The GEMM path's per-thread buffers (conv2d_ops.h, Conv2dWorkspace): one
  // image's column matrix and a partial weight and bias gradient each; the
  // thin path's buffers are no larger.
  const Conv2dShape s = conv_shape(in);
  const size_t threads = size_t(std::max(1, std::min(num_threads(), in.n)));
  const size_t column = s.is_pointwise() ? 0 : size_t(s.col_rows()) * size_t(s.col_cols());
  // In bf16, the gemm path's weights packed once a pass, shared by the threads.
  return threads * (column + s.weight_count() + size_t(s.K)) * sizeof(float) +
         cpu::conv2d_packed_weights_bytes(s, precision());
}

void Conv2dCPU::forward_impl(const Tensor& x, Tensor& y) {
  const float* b = cfg_.bias ? param(1) : nullptr;
  cpu::conv2d_forward(conv_shape(x.shape()), x.data<float>(), param(0), b, y.data<float>(), ws_,
                      precision());
}

void Conv2dCPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const Conv2dShape s = conv_shape(x.shape());
  float* db = cfg_.bias ? grad(1) : nullptr;
  cpu::conv2d_backward_params(s, x.data<float>(), dy.data<float>(), grad(0), db, ws_, precision());
  if (dx)
    cpu::conv2d_backward_data(s, dy.data<float>(), param(0), dx->data<float>(), ws_, precision());
}

HPMC_REGISTER_CPU(Conv2d)

}  // namespace hpmc
