// simple_layers.cu — kernels and wrappers of the parameter-free GPU layers
// (see simple_layers.h for what each computes and why it is bit-equal to the
// CPU layer).
//
// Every kernel is a grid-stride loop over a 64-bit element index, so any
// tensor size is covered by any grid (grid_for caps the block count), and no
// thread reads or writes outside [0, total). Kernels run on the default
// stream; the launch is checked here and Layer::forward/backward check again
// (with a synchronize under --sync-debug).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "layers/gpu/simple_layers.h"

namespace hpmc::gpu {

namespace {

// The first thread's element index and the stride of a grid-stride loop.
__device__ __forceinline__ size_t first_index() {
  return size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
}
__device__ __forceinline__ size_t grid_stride() {
  return size_t(gridDim.x) * size_t(blockDim.x);
}

// ---- ReLU ----------------------------------------------------------------------

// `v < 0 ? 0 : v` (not `v > 0 ? v : 0`) so a NaN passes through, as on the CPU.
__global__ void relu_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    size_t n) {
  for (size_t i = first_index(); i < n; i += grid_stride()) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

// dx = dy where x > 0, else 0 (the derivative at 0 is 0; NaN x gives 0).
__global__ void relu_backward_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                     float* __restrict__ dx, size_t n) {
  for (size_t i = first_index(); i < n; i += grid_stride()) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

// ---- MaxPool2D -------------------------------------------------------------------

// Offset within the plane of the first maximum of the k×k window whose top
// left corner is (row0, col0), or of its first NaN — the same scan, in the
// same order, with the same comparisons as maxpool2d_argmax in
// layers/cpu/maxpool2d_ops.h. The caller guarantees the window lies inside
// the plane (row0 + k ≤ h, col0 + k ≤ w).
__device__ __forceinline__ size_t window_argmax(const float* __restrict__ plane, int w, int row0,
                                                int col0, int k) {
  size_t best = size_t(row0) * size_t(w) + size_t(col0);
  float bv = plane[best];
  if (isnan(bv)) return best;
  for (int a = 0; a < k; ++a) {
    const size_t row = size_t(row0 + a) * size_t(w);
    for (int b = 0; b < k; ++b) {
      const size_t idx = row + size_t(col0 + b);
      const float v = plane[idx];
      if (isnan(v)) return idx;
      if (v > bv) {  // strict: the first of equal maxima wins
        bv = v;
        best = idx;
      }
    }
  }
  return best;
}

// One thread per output element t = ((p · oh) + i) · ow + j. Window (i, j)
// covers rows i·s .. i·s+k−1 ≤ (oh−1)·s + k − 1 ≤ h − 1 (oh = floor((h−k)/s)+1),
// likewise columns, so it lies inside the plane.
__global__ void maxpool_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       size_t total, int h, int w, int oh, int ow, int k, int s) {
  const size_t in_plane = size_t(h) * size_t(w), out_plane = size_t(oh) * size_t(ow);
  for (size_t t = first_index(); t < total; t += grid_stride()) {
    const size_t p = t / out_plane;
    const size_t rem = t - p * out_plane;
    const int i = int(rem / size_t(ow));
    const int j = int(rem - size_t(i) * size_t(ow));
    const float* xp = x + p * in_plane;
    y[t] = xp[window_argmax(xp, w, i * s, j * s, k)];
  }
}

// The windows along one axis that contain input position r: window i covers
// i·s .. i·s+k−1, so it contains r iff i·s ≤ r ≤ i·s + k − 1, i.e.
// ceil((r − k + 1) / s) ≤ i ≤ floor(r / s); clipped to [0, o − 1]. The range
// is empty (lo > hi) for a position no window covers (the floored remainder,
// or a gap when s > k).
__device__ __forceinline__ void windows_containing(int r, int k, int s, int o, int& lo, int& hi) {
  const int d = r - k + 1;  // i·s ≥ d
  lo = d <= 0 ? 0 : (d + s - 1) / s;
  hi = r / s;
  if (hi > o - 1) hi = o - 1;
}

// One thread per input element t = ((p · h) + r) · w + c: the gather form of
// the CPU's scatter `dx[argmax(window)] += dy[window]`. The CPU zeroes dx and
// visits windows in row-major (i, j) order, so element (r, c) receives
// 0 + dy[i1,j1] + dy[i2,j2] + ... over the windows whose first maximum it is,
// in row-major window order; this loop adds exactly those terms in exactly
// that order, hence the same float result. Windows that do not contain (r, c)
// cannot have it as their argmax, so the containing range only has to be a
// superset — it is exact here. No thread writes another's element: no atomics.
__global__ void maxpool_backward_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                        float* __restrict__ dx, size_t total, int h, int w,
                                        int oh, int ow, int k, int s) {
  const size_t in_plane = size_t(h) * size_t(w), out_plane = size_t(oh) * size_t(ow);
  for (size_t t = first_index(); t < total; t += grid_stride()) {
    const size_t p = t / in_plane;
    const size_t off = t - p * in_plane;  // (r, c) within the plane
    const int r = int(off / size_t(w));
    const int c = int(off - size_t(r) * size_t(w));
    int i_lo, i_hi, j_lo, j_hi;
    windows_containing(r, k, s, oh, i_lo, i_hi);
    windows_containing(c, k, s, ow, j_lo, j_hi);
    const float* xp = x + p * in_plane;
    const float* dyp = dy + p * out_plane;
    float sum = 0.0f;
    for (int i = i_lo; i <= i_hi; ++i)
      for (int j = j_lo; j <= j_hi; ++j)
        if (window_argmax(xp, w, i * s, j * s, k) == off) sum += dyp[size_t(i) * ow + j];
    dx[t] = sum;
  }
}

// ---- UpSample2D ----------------------------------------------------------------

// One thread per output element t = ((p · oh) + i) · ow + j: y = x[p, i/s, j/s].
__global__ void upsample_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                        size_t total, int h, int w, int s) {
  const int ow = w * s;
  const size_t in_plane = size_t(h) * size_t(w), out_plane = size_t(h) * size_t(s) * size_t(ow);
  for (size_t t = first_index(); t < total; t += grid_stride()) {
    const size_t p = t / out_plane;
    const size_t rem = t - p * out_plane;
    const int i = int(rem / size_t(ow));
    const int j = int(rem - size_t(i) * size_t(ow));
    y[t] = x[p * in_plane + size_t(i / s) * size_t(w) + size_t(j / s)];
  }
}

// One thread per input element t = ((p · h) + i) · w + j: dx = the sum of the
// s×s block dy[p, i·s + a, j·s + b], a then b ascending, starting from 0 —
// the CPU loop's order, so the same float result.
__global__ void upsample_backward_kernel(const float* __restrict__ dy, float* __restrict__ dx,
                                         size_t total, int h, int w, int s) {
  const int ow = w * s;
  const size_t in_plane = size_t(h) * size_t(w), out_plane = size_t(h) * size_t(s) * size_t(ow);
  for (size_t t = first_index(); t < total; t += grid_stride()) {
    const size_t p = t / in_plane;
    const size_t rem = t - p * in_plane;
    const int i = int(rem / size_t(w));
    const int j = int(rem - size_t(i) * size_t(w));
    const float* block = dy + p * out_plane + size_t(i) * size_t(s) * size_t(ow) +
                         size_t(j) * size_t(s);
    float sum = 0.0f;
    for (int a = 0; a < s; ++a) {
      const float* row = block + size_t(a) * size_t(ow);
      for (int b = 0; b < s; ++b) sum += row[b];
    }
    dx[t] = sum;
  }
}

}  // namespace

// ---- the layers ------------------------------------------------------------------

ReLUGPU::ReLUGPU(std::string name) : LayerGPU(std::move(name)) {}

void ReLUGPU::forward_impl(const Tensor& x, Tensor& y) {
  const size_t n = x.numel();
  if (n == 0) return;
  relu_forward_kernel<<<grid_for(n), kBlock>>>(x.data<float>(), y.data<float>(), n);
  HPMC_CUDA_LAUNCH_CHECK("relu forward kernel");
}

void ReLUGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const size_t n = x.numel();
  if (n == 0) return;
  relu_backward_kernel<<<grid_for(n), kBlock>>>(x.data<float>(), dy.data<float>(),
                                                dx->data<float>(), n);
  HPMC_CUDA_LAUNCH_CHECK("relu backward kernel");
}

MaxPool2dGPU::MaxPool2dGPU(std::string name, const MaxPool2dConfig& cfg)
    : LayerGPU(std::move(name)), spec_(maxpool2d_spec(this->name(), cfg)) {}

void MaxPool2dGPU::forward_impl(const Tensor& x, Tensor& y) {
  // Layer::forward has checked x and y against output_shape(), which throws
  // unless the window fits (so oh, ow ≥ 1).
  const Shape& s = x.shape();
  const Shape o = y.shape();
  const size_t total = o.count();
  if (total == 0) return;
  maxpool_forward_kernel<<<grid_for(total), kBlock>>>(x.data<float>(), y.data<float>(), total,
                                                      s.h, s.w, o.h, o.w, spec_.kernel,
                                                      spec_.stride);
  HPMC_CUDA_LAUNCH_CHECK("maxpool2d forward kernel");
}

void MaxPool2dGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                 Tensor* dx) {
  if (!dx) return;
  const Shape& s = x.shape();
  const Shape& o = dy.shape();
  const size_t total = s.count();
  if (total == 0) return;
  maxpool_backward_kernel<<<grid_for(total), kBlock>>>(x.data<float>(), dy.data<float>(),
                                                       dx->data<float>(), total, s.h, s.w, o.h,
                                                       o.w, spec_.kernel, spec_.stride);
  HPMC_CUDA_LAUNCH_CHECK("maxpool2d backward kernel");
}

UpSample2dGPU::UpSample2dGPU(std::string name, int scale)
    : LayerGPU(std::move(name)), scale_(upsample2d_check_scale(this->name(), scale)) {}

void UpSample2dGPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  const size_t total = y.numel();
  if (total == 0) return;
  upsample_forward_kernel<<<grid_for(total), kBlock>>>(x.data<float>(), y.data<float>(), total,
                                                       s.h, s.w, scale_);
  HPMC_CUDA_LAUNCH_CHECK("upsample2d forward kernel");
}

void UpSample2dGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                  Tensor* dx) {
  if (!dx) return;
  const Shape& s = x.shape();
  const size_t total = s.count();
  if (total == 0) return;
  upsample_backward_kernel<<<grid_for(total), kBlock>>>(dy.data<float>(), dx->data<float>(),
                                                        total, s.h, s.w, scale_);
  HPMC_CUDA_LAUNCH_CHECK("upsample2d backward kernel");
}

FlattenGPU::FlattenGPU(std::string name) : LayerGPU(std::move(name)) {}

// Copies rather than views, as FlattenCPU: the model owns each activation
// buffer, and the layer contract writes y and dx.
void FlattenGPU::forward_impl(const Tensor& x, Tensor& y) {
  const size_t bytes = x.numel() * sizeof(float);
  if (bytes == 0) return;
  HPMC_CUDA_CHECK(cudaMemcpyAsync(y.data<float>(), x.data<float>(), bytes,
                                  cudaMemcpyDeviceToDevice, 0));
}

void FlattenGPU::backward_impl(const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& dy,
                               Tensor* dx) {
  if (!dx) return;
  const size_t bytes = dy.numel() * sizeof(float);
  if (bytes == 0) return;
  HPMC_CUDA_CHECK(cudaMemcpyAsync(dx->data<float>(), dy.data<float>(), bytes,
                                  cudaMemcpyDeviceToDevice, 0));
}

}  // namespace hpmc::gpu
