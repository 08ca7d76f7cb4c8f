// dropout_kernels.cu — the kernel of dropout_kernels.h: a grid-stride loop
// over blocks of four elements, each one Philox-4x32-10 call whose four words
// decide the four elements (the CPU's dropout_apply, element for element).
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "layers/gpu/dropout_kernels.h"

namespace hpmc::gpu {

namespace {

__global__ void dropout_kernel(const float* __restrict__ in, float* __restrict__ out, size_t n,
                               DropoutMask mask, float scale) {
  const size_t blocks = (n + 3) / 4;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t b = size_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += stride) {
    const unsigned bits = mask.keep4(b);
    const size_t i0 = 4 * b;
    const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
    for (size_t i = i0; i < i1; ++i) out[i] = (bits >> (i - i0)) & 1u ? in[i] * scale : 0.0f;
  }
}

}  // namespace

void dropout_apply(const float* in, float* out, size_t n, const DropoutMask& mask, float scale) {
  if (n == 0) return;
  dropout_kernel<<<grid_for((n + 3) / 4), kBlock>>>(in, out, n, mask, scale);
  HPMC_CUDA_LAUNCH_CHECK("dropout kernel");
}

}  // namespace hpmc::gpu
