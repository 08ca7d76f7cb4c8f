// avgpool2d.cu — AvgPool2dGPU: a thin wrapper over the avgpool2d kernels of
// resample_kernels.h.
#include "layers/gpu/avgpool2d.h"
#include "layers/gpu/resample_kernels.h"

namespace hpmc::gpu {

void AvgPool2dGPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  avgpool2d_forward(x.data<float>(), y.data<float>(), int64_t(s.n) * s.c, s.h, s.w, win_.kernel,
                    win_.stride);
}

void AvgPool2dGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                 Tensor* dx) {
  if (!dx) return;
  const Shape& s = x.shape();
  avgpool2d_backward(dy.data<float>(), dx->data<float>(), int64_t(s.n) * s.c, s.h, s.w,
                     win_.kernel, win_.stride);
}

HPMC_REGISTER_GPU(AvgPool2d)

}  // namespace hpmc::gpu
