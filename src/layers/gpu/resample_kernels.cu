// resample_kernels.cu — the kernels of resample_kernels.h. Each is a
// grid-stride loop over a 64-bit element index t = ((p · rows) + r) · cols + c.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "layers/gpu/resample_kernels.h"
#include "layers/resample_index.h"

namespace hpmc::gpu {

namespace {

__device__ __forceinline__ size_t first_index() {
  return size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
}
__device__ __forceinline__ size_t grid_stride() {
  return size_t(gridDim.x) * size_t(blockDim.x);
}

// Element t of a stack of planes of rows × cols: its plane, row and column.
struct PlaneIndex {
  size_t p;
  int r, c;
};
__device__ __forceinline__ PlaneIndex plane_index(size_t t, int rows, int cols) {
  const size_t plane = size_t(rows) * size_t(cols);
  const size_t p = t / plane, rem = t - p * plane;
  const int r = int(rem / size_t(cols));
  return {p, r, int(rem - size_t(r) * size_t(cols))};
}

// ---- avgpool2d -----------------------------------------------------------------------

__global__ void avgpool_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       size_t total, int h, int w, int oh, int ow, int k, int s) {
  const float area = float(k * k);
  for (size_t t = first_index(); t < total; t += grid_stride()) {
    const auto [p, i, j] = plane_index(t, oh, ow);
    const float* xp = x + p * size_t(h) * size_t(w);
    float sum = 0.0f;
    for (int a = 0; a < k; ++a) {
      const float* row = xp + size_t(i * s + a) * size_t(w) + size_t(j) * size_t(s);
      for (int b = 0; b < k; ++b) sum += row[b];
    }
    y[t] = sum / area;
  }
}

__global__ void avgpool_backward_kernel(const float* __restrict__ dy, float* __restrict__ dx,
                                        size_t total, int h, int w, int oh, int ow, int k,
                                        int s) {
  const float area = float(k * k);
  for (size_t t = first_index(); t < total; t += grid_stride()) {
    const auto [p, r, c] = plane_index(t, h, w);
    const float* dyp = dy + p * size_t(oh) * size_t(ow);
    int i_lo, i_hi, j_lo, j_hi;
    pool_windows_containing(r, k, s, oh, i_lo, i_hi);
    pool_windows_containing(c, k, s, ow, j_lo, j_hi);
    float sum = 0.0f;
    for (int i = i_lo; i <= i_hi; ++i)
      for (int j = j_lo; j <= j_hi; ++j) sum += dyp[size_t(i) * size_t(ow) + size_t(j)] / area;
    dx[t] = sum;
  }
}

// ---- bilinear up-sampling ---------------------------------------------------------------

__global__ void bilinear_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                        size_t total, int h, int w, int s, float ratio) {
  const int oh = h * s, ow = w * s;
  for (size_t t = first_index(); t < total; t += grid_stride()) {
    const auto [p, i, j] = plane_index(t, oh, ow);
    const BilinearTap<float> a = bilinear_tap(ratio, i, h, s);
    const BilinearTap<float> b = bilinear_tap(ratio, j, w, s);
    const float* xp = x + p * size_t(h) * size_t(w);
    const float* x0 = xp + size_t(a.i0) * size_t(w);
    const float* x1 = xp + size_t(a.i1) * size_t(w);
    const float top = add_rn(mul_rn(b.l0, x0[b.i0]), mul_rn(b.l1, x0[b.i1]));
    const float bottom = add_rn(mul_rn(b.l0, x1[b.i0]), mul_rn(b.l1, x1[b.i1]));
    y[t] = add_rn(mul_rn(a.l0, top), mul_rn(a.l1, bottom));
  }
}

__global__ void bilinear_backward_kernel(const float* __restrict__ dy, float* __restrict__ dx,
                                         size_t total, int h, int w, int s, float ratio) {
  const int oh = h * s, ow = w * s;
  for (size_t t = first_index(); t < total; t += grid_stride()) {
    const auto [p, r, c] = plane_index(t, h, w);
    const float* dyp = dy + p * size_t(oh) * size_t(ow);
    int i_lo, i_hi, j_lo, j_hi;
    bilinear_outputs_reading(r, s, oh, i_lo, i_hi);
    bilinear_outputs_reading(c, s, ow, j_lo, j_hi);
    float sum = 0.0f;
    for (int i = i_lo; i <= i_hi; ++i) {
      const float wr = bilinear_weight(bilinear_tap(ratio, i, h, s), r);
      if (wr == 0.0f) continue;
      const float* dyrow = dyp + size_t(i) * size_t(ow);
      for (int j = j_lo; j <= j_hi; ++j) {
        const float wc = bilinear_weight(bilinear_tap(ratio, j, w, s), c);
        if (wc == 0.0f) continue;
        sum = add_rn(sum, mul_rn(wr, mul_rn(wc, dyrow[j])));
      }
    }
    dx[t] = sum;
  }
}

}  // namespace

void avgpool2d_forward(const float* x, float* y, int64_t planes, int h, int w, int kernel,
                       int stride) {
  const int oh = pool_out_size(h, kernel, stride), ow = pool_out_size(w, kernel, stride);
  const size_t total = size_t(planes) * size_t(oh) * size_t(ow);
  if (total == 0) return;
  avgpool_forward_kernel<<<grid_for(total), kBlock>>>(x, y, total, h, w, oh, ow, kernel, stride);
  HPMC_CUDA_LAUNCH_CHECK("avgpool2d forward kernel");
}

void avgpool2d_backward(const float* dy, float* dx, int64_t planes, int h, int w, int kernel,
                        int stride) {
  const int oh = pool_out_size(h, kernel, stride), ow = pool_out_size(w, kernel, stride);
  const size_t total = size_t(planes) * size_t(h) * size_t(w);
  if (total == 0) return;
  avgpool_backward_kernel<<<grid_for(total), kBlock>>>(dy, dx, total, h, w, oh, ow, kernel,
                                                       stride);
  HPMC_CUDA_LAUNCH_CHECK("avgpool2d backward kernel");
}

// ratio = 1/s rounded to float, as the CPU's bilinear_taps<float>.
void upsample2d_bilinear_forward(const float* x, float* y, int64_t planes, int h, int w,
                                 int scale) {
  const size_t total = size_t(planes) * size_t(h) * size_t(scale) * size_t(w) * size_t(scale);
  if (total == 0) return;
  bilinear_forward_kernel<<<grid_for(total), kBlock>>>(x, y, total, h, w, scale,
                                                       float(1.0 / scale));
  HPMC_CUDA_LAUNCH_CHECK("upsample2d bilinear forward kernel");
}

void upsample2d_bilinear_backward(const float* dy, float* dx, int64_t planes, int h, int w,
                                  int scale) {
  const size_t total = size_t(planes) * size_t(h) * size_t(w);
  if (total == 0) return;
  bilinear_backward_kernel<<<grid_for(total), kBlock>>>(dy, dx, total, h, w, scale,
                                                        float(1.0 / scale));
  HPMC_CUDA_LAUNCH_CHECK("upsample2d bilinear backward kernel");
}

}  // namespace hpmc::gpu
