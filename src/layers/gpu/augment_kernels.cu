// augment_kernels.cu — the training-time input transforms of factory.h on the
// device: the flip/crop augmentation of a gathered batch and the gaussian or
// masking input noise; and the scale of a loss gradient (the trainer's
// micro-batch weights). The draws are data/augment_ops.h's, the very functions
// the CPU loops (data/augment.h) call, so both make the same decisions.
//
// Mapping: one thread per output value (grid-stride), NCHW order; each thread
// recomputes its sample's draw (one Philox call) or its value's draw, so no
// thread depends on another and there is no shared state. augment_batch
// reads other pixels of the same plane and writes a separate buffer.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "core/error.h"
#include "data/augment_ops.h"
#include "layers/gpu/factory.h"

namespace hpmc::gpu {

namespace {

__global__ void augment_kernel(const float* __restrict__ x, float* __restrict__ y, size_t total,
                               int c, int h, int w, bool hflip, int pad, uint64_t key,
                               uint64_t step, uint64_t first_sample) {
  const size_t first = size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
  const size_t stride = size_t(gridDim.x) * size_t(blockDim.x);
  const size_t plane = size_t(h) * size_t(w);
  const size_t per = size_t(c) * plane;
  for (size_t t = first; t < total; t += stride) {
    const size_t i = t / per;
    const size_t in_plane = t % plane;
    const int r = int(in_plane / size_t(w));
    const int col = int(in_plane % size_t(w));
    const AugmentDraw d = augment_draw(key, step, first_sample + uint64_t(i), hflip, pad);
    const long s = augment_source(d, r, col, h, w);
    y[t] = s < 0 ? 0.0f : x[(t - in_plane) + size_t(s)];
  }
}

__global__ void gaussian_kernel(const float* x, float* y, size_t count, float s, uint64_t key,
                                uint64_t step, uint64_t base) {
  const size_t first = size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
  const size_t stride = size_t(gridDim.x) * size_t(blockDim.x);
  for (size_t t = first; t < count; t += stride)
    y[t] = __fmaf_rn(s, gaussian_draw(key, step, base + t), x[t]);
}

__global__ void mask_kernel(const float* x, float* y, size_t count, uint64_t threshold,
                            uint64_t key, uint64_t step, uint64_t base) {
  const size_t first = size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
  const size_t stride = size_t(gridDim.x) * size_t(blockDim.x);
  for (size_t t = first; t < count; t += stride)
    y[t] = mask_keep(key, step, base + t, threshold) ? x[t] : 0.0f;
}

__global__ void scale_kernel(float* x, size_t n, float s) {
  const size_t first = size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
  const size_t stride = size_t(gridDim.x) * size_t(blockDim.x);
  for (size_t i = first; i < n; i += stride) x[i] *= s;
}

}  // namespace

void augment_batch(const float* x, float* y, int n, int c, int h, int w, bool hflip, int pad,
                   uint64_t key, uint64_t step, uint64_t first) {
  HPMC_CHECK(n >= 0 && c >= 0 && h >= 0 && w >= 0 && pad >= 0, "augment_batch: bad sizes n ", n,
             ", c ", c, ", h ", h, ", w ", w, ", pad ", pad);
  const size_t total = size_t(n) * size_t(c) * size_t(h) * size_t(w);
  if (total == 0) return;
  HPMC_CHECK(x && y, "augment_batch: null device pointer (x ", x, ", y ", y, ")");
  augment_kernel<<<grid_for(total), kBlock>>>(x, y, total, c, h, w, hflip, pad, key, step,
                                              first);
  HPMC_CUDA_LAUNCH_CHECK("augment_batch kernel");
}

void gaussian_noise(const float* x, float* y, size_t count, float std, uint64_t key,
                    uint64_t step, uint64_t base) {
  if (count == 0) return;
  HPMC_CHECK(x && y, "gaussian_noise: null device pointer (x ", x, ", y ", y, ")");
  gaussian_kernel<<<grid_for(count), kBlock>>>(x, y, count, std, key, step, base);
  HPMC_CUDA_LAUNCH_CHECK("gaussian_noise kernel");
}

void mask_noise(const float* x, float* y, size_t count, uint64_t threshold, uint64_t key,
                uint64_t step, uint64_t base) {
  if (count == 0) return;
  HPMC_CHECK(x && y, "mask_noise: null device pointer (x ", x, ", y ", y, ")");
  mask_kernel<<<grid_for(count), kBlock>>>(x, y, count, threshold, key, step, base);
  HPMC_CUDA_LAUNCH_CHECK("mask_noise kernel");
}

void scale(float* x, size_t n, float s) {
  if (n == 0) return;
  HPMC_CHECK(x, "scale: null device pointer");
  scale_kernel<<<grid_for(n), kBlock>>>(x, n, s);
  HPMC_CUDA_LAUNCH_CHECK("scale kernel");
}

}  // namespace hpmc::gpu
