// dropout.cu — DropoutGPU: dropout_apply (dropout_kernels.h) with the mode's
// counters in training, a device-to-device copy in eval.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "layers/gpu/dropout.h"
#include "layers/gpu/dropout_kernels.h"

namespace hpmc::gpu {

namespace {

// out = in through the mask of the current mode, or a copy in eval.
void run(const LayerMode& m, double p, const Tensor& in, Tensor& out) {
  const size_t n = in.numel();
  if (n == 0) return;
  if (!m.training) {
    HPMC_CUDA_CHECK(cudaMemcpyAsync(out.data<float>(), in.data<float>(), n * sizeof(float),
                                    cudaMemcpyDeviceToDevice, 0));
    return;
  }
  dropout_apply(in.data<float>(), out.data<float>(), n,
                make_dropout_mask(p, m.seed, uint64_t(m.stream), uint64_t(m.step)),
                dropout_scale<float>(p), uint64_t(m.first) * in.shape().per_sample());
}

}  // namespace

void DropoutGPU::forward_impl(const Tensor& x, Tensor& y) { run(mode(), p_, x, y); }

void DropoutGPU::backward_impl(const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& dy,
                               Tensor* dx) {
  if (dx) run(mode(), p_, dy, *dx);
}

HPMC_REGISTER_GPU(Dropout)

}  // namespace hpmc::gpu
