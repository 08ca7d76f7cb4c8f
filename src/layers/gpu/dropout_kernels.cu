// dropout_kernels.cu — the kernel of dropout_kernels.h: a grid-stride loop
// over blocks of four elements, each one Philox-4x32-10 call whose four words
// decide the four elements (the CPU's dropout_apply, element for element).
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "layers/gpu/dropout_kernels.h"

namespace hpmc::gpu {

namespace {

// Indices [base, base + n): Philox blocks base/4 .. (base + n + 3)/4 − 1.
__global__ void dropout_kernel(const float* __restrict__ in, float* __restrict__ out, size_t n,
                               DropoutMask mask, float scale, uint64_t base) {
  const uint64_t first = base / 4;
  const size_t blocks = size_t((base + n + 3) / 4 - first);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x; k < blocks; k += stride) {
    const uint64_t b = first + k;
    const unsigned bits = mask.keep4(b);
    const uint64_t g0 = 4 * b < base ? base : 4 * b;
    const uint64_t g1 = 4 * b + 4 < base + n ? 4 * b + 4 : base + n;
    for (uint64_t g = g0; g < g1; ++g) {
      const size_t i = size_t(g - base);
      out[i] = (bits >> (g - 4 * b)) & 1u ? in[i] * scale : 0.0f;
    }
  }
}

}  // namespace

void dropout_apply(const float* in, float* out, size_t n, const DropoutMask& mask, float scale,
                   uint64_t base) {
  if (n == 0) return;
  dropout_kernel<<<grid_for((base + n + 3) / 4 - base / 4), kBlock>>>(in, out, n, mask, scale,
                                                                      base);
  HPMC_CUDA_LAUNCH_CHECK("dropout kernel");
}

}  // namespace hpmc::gpu
