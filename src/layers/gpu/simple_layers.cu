// simple_layers.cu — kernels and wrappers of the parameter-free GPU layers
// (see simple_layers.h for what each computes and why it is bit-equal to the
// CPU layer).
//
// Every kernel is a grid-stride loop over a 64-bit element index, so any
// tensor size is covered by any grid (grid_for caps the block count), and no
// thread reads or writes outside [0, total). Kernels run on the default
// stream; the launch is checked here and Layer::forward/backward check again
// (with a synchronize under --sync-debug).
//
// These layers only move bytes, so the common shapes get 16-byte accesses:
//   ReLU       float4 over the tensor (16-byte aligned), a scalar tail.
//   MaxPool2D  2×2 stride 2 with H even, W % 4 == 0, aligned: one thread per
//              two adjacent outputs reads two float4 rows of x; backward writes
//              the two float4 rows of dx (dy where the window's first maximum
//              is, 0 elsewhere) instead of the gather below. Other shapes with
//              stride ≥ kernel (no overlap) scatter per window the same way,
//              scalar; overlapping windows keep the gather.
//   UpSample2D scale 2 with W even, aligned: one thread per two input pixels
//              (a float2), its 2×4 block of the output as two float4 rows.
// Each keeps the bit-exact arithmetic of the scalar kernels (see simple_layers.h).
// Their index arithmetic is 32-bit (FastDiv), so the host takes them only when
// the thread count fits; 64-bit divisions per element would cost more than the
// memory traffic.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "layers/gpu/implicit_fastdiv.h"
#include "layers/gpu/pool2x2.cuh"
#include "layers/gpu/resample_kernels.h"
#include "layers/gpu/simple_kernels.h"
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

using implicit_detail::FastDiv;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// The 32-bit vector kernels take at most this many threads' worth of work.
constexpr size_t kMaxVecItems = size_t(1) << 31;

// ---- ReLU ----------------------------------------------------------------------

__device__ __forceinline__ float relu(float v) { return v < 0.0f ? 0.0f : v; }

// y = relu(x) on n4 float4s, then the n − 4·n4 < 4 scalars after them.
__global__ void relu_forward_vec_kernel(const float4* __restrict__ x, float4* __restrict__ y,
                                        size_t n4, size_t n) {
  for (size_t i = first_index(); i < n4; i += grid_stride()) {
    const float4 v = x[i];
    y[i] = make_float4(relu(v.x), relu(v.y), relu(v.z), relu(v.w));
  }
  const size_t t = 4 * n4 + first_index();
  if (t < n) reinterpret_cast<float*>(y)[t] = relu(reinterpret_cast<const float*>(x)[t]);
}

__device__ __forceinline__ float relu_grad(float x, float dy) { return x > 0.0f ? dy : 0.0f; }

__global__ void relu_backward_vec_kernel(const float4* __restrict__ x,
                                         const float4* __restrict__ dy, float4* __restrict__ dx,
                                         size_t n4, size_t n) {
  for (size_t i = first_index(); i < n4; i += grid_stride()) {
    const float4 v = x[i], g = dy[i];
    dx[i] = make_float4(relu_grad(v.x, g.x), relu_grad(v.y, g.y), relu_grad(v.z, g.z),
                        relu_grad(v.w, g.w));
  }
  const size_t t = 4 * n4 + first_index();
  if (t < n)
    reinterpret_cast<float*>(dx)[t] = relu_grad(reinterpret_cast<const float*>(x)[t],
                                                reinterpret_cast<const float*>(dy)[t]);
}

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

// Element t of a stack of planes of `plane` elements in rows of `cols`: its
// plane, row and column.
struct PlaneIndex {
  size_t p;
  int i, j;
};
__device__ __forceinline__ PlaneIndex plane_index(size_t t, size_t plane, int cols) {
  const size_t p = t / plane, rem = t - p * plane;
  const int i = int(rem / size_t(cols));
  return {p, i, int(rem - size_t(i) * size_t(cols))};
}

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
    const auto [p, i, j] = plane_index(t, out_plane, ow);
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
                                        int oh, int ow, int k, int s, bool relu) {
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
    dx[t] = relu && !(xp[off] > 0.0f) ? 0.0f : sum;
  }
}

// 2×2 windows, stride 2, H even, W % 4 == 0, so pooled row R of the whole
// tensor (plane·OH + i) reads input rows 2R and 2R+1. Thread e: R = e / (W/4),
// outputs (R, 2j) and (R, 2j+1) with j = e mod (W/4), from x columns 4j .. 4j+3.
__global__ void maxpool2x2_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                          unsigned total, FastDiv fquads, int w) {
  for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    int R, j;
    fquads.divmod(int(e), R, j);
    const float* r0 = x + size_t(2 * R) * size_t(w) + 4 * j;
    const float4 u = *reinterpret_cast<const float4*>(r0);
    const float4 v = *reinterpret_cast<const float4*>(r0 + w);
    const int i0 = argmax2x2(u.x, u.y, v.x, v.y), i1 = argmax2x2(u.z, u.w, v.z, v.w);
    *reinterpret_cast<float2*>(y + size_t(R) * size_t(w / 2) + 2 * j) =
        make_float2(pick4(i0, u.x, u.y, v.x, v.y), pick4(i1, u.z, u.w, v.z, v.w));
  }
}

// The same threads for backward: each writes its two windows' 2×4 block of dx,
// 0 + dy at the window's first maximum (the CPU's zeroed dx plus one dy: +0
// for a dy of −0) and 0 elsewhere. Windows do not overlap, so no element gets
// two terms.
__global__ void maxpool2x2_backward_kernel(const float* __restrict__ x,
                                           const float* __restrict__ dy, float* __restrict__ dx,
                                           unsigned total, FastDiv fquads, int w, bool relu) {
  for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    int R, j;
    fquads.divmod(int(e), R, j);
    const size_t off = size_t(2 * R) * size_t(w) + 4 * j;
    const float4 u = *reinterpret_cast<const float4*>(x + off);
    const float4 v = *reinterpret_cast<const float4*>(x + off + w);
    const float2 g = *reinterpret_cast<const float2*>(dy + size_t(R) * size_t(w / 2) + 2 * j);
    const int i0 = argmax2x2(u.x, u.y, v.x, v.y), i1 = argmax2x2(u.z, u.w, v.z, v.w);
    float g0 = 0.0f + g.x, g1 = 0.0f + g.y;
    if (relu) {  // the fused ReLU's mask at each window's maximum (0 stays 0 elsewhere)
      if (!(pick4(i0, u.x, u.y, v.x, v.y) > 0.0f)) g0 = 0.0f;
      if (!(pick4(i1, u.z, u.w, v.z, v.w) > 0.0f)) g1 = 0.0f;
    }
    *reinterpret_cast<float4*>(dx + off) =
        make_float4(i0 == 0 ? g0 : 0.0f, i0 == 1 ? g0 : 0.0f, i1 == 0 ? g1 : 0.0f,
                    i1 == 1 ? g1 : 0.0f);
    *reinterpret_cast<float4*>(dx + off + w) =
        make_float4(i0 == 2 ? g0 : 0.0f, i0 == 3 ? g0 : 0.0f, i1 == 2 ? g1 : 0.0f,
                    i1 == 3 ? g1 : 0.0f);
  }
}

// Stride ≥ kernel (windows do not overlap), any shape: one thread per output
// t = ((p · oh) + i) · ow + j owns the cell of rows i·s .. i·s+s−1 (to h for the
// last i) and columns likewise; the cells tile the plane and each holds its
// window. It writes the whole cell: 0 + dy at the window's first maximum, 0
// elsewhere — the CPU's result, as no element lies in two windows.
__global__ void maxpool_backward_cells_kernel(const float* __restrict__ x,
                                              const float* __restrict__ dy,
                                              float* __restrict__ dx, size_t total, int h, int w,
                                              int oh, int ow, int k, int s, bool relu) {
  const size_t in_plane = size_t(h) * size_t(w), out_plane = size_t(oh) * size_t(ow);
  for (size_t t = first_index(); t < total; t += grid_stride()) {
    const auto [p, i, j] = plane_index(t, out_plane, ow);
    const float* xp = x + p * in_plane;
    float* dxp = dx + p * in_plane;
    const size_t best = window_argmax(xp, w, i * s, j * s, k);
    const float g = relu && !(xp[best] > 0.0f) ? 0.0f : 0.0f + dy[t];
    const int r1 = i == oh - 1 ? h : (i + 1) * s, c1 = j == ow - 1 ? w : (j + 1) * s;
    for (int r = i * s; r < r1; ++r)
      for (int c = j * s; c < c1; ++c) {
        const size_t idx = size_t(r) * size_t(w) + size_t(c);
        dxp[idx] = idx == best ? g : 0.0f;
      }
  }
}

// ---- UpSample2D ----------------------------------------------------------------

// One thread per output element t = ((p · oh) + i) · ow + j: y = x[p, i/s, j/s].
__global__ void upsample_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                        size_t total, int h, int w, int s) {
  const int ow = w * s;
  const size_t in_plane = size_t(h) * size_t(w), out_plane = size_t(h) * size_t(s) * size_t(ow);
  for (size_t t = first_index(); t < total; t += grid_stride()) {
    const auto [p, i, j] = plane_index(t, out_plane, ow);
    y[t] = x[p * in_plane + size_t(i / s) * size_t(w) + size_t(j / s)];
  }
}

// One thread per input element t = ((p · h) + i) · w + j: dx = the sum of the
// s×s block dy[p, i·s + a, j·s + b], a then b ascending, starting from 0 —
// the CPU loop's order, so the same float result. With a fused ReLU before the
// layer (mask non-null: the layer's input x), dx = x > 0 ? sum : 0.
__global__ void upsample_backward_kernel(const float* __restrict__ dy, float* __restrict__ dx,
                                         size_t total, int h, int w, int s,
                                         const float* __restrict__ mask) {
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
    dx[t] = mask && !(mask[t] > 0.0f) ? 0.0f : sum;
  }
}

// Scale 2, W even: input row r of the whole tensor (plane·h + i) becomes
// output rows 2r and 2r+1. Thread e: r = e / (W/2), input pixels 2j, 2j+1 with
// j = e mod (W/2) (a float2), output columns 4j .. 4j+3 of both rows.
__global__ void upsample2x_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                          unsigned total, FastDiv fpairs, int w) {
  for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    int r, j;
    fpairs.divmod(int(e), r, j);
    const float2 v = *reinterpret_cast<const float2*>(x + size_t(r) * size_t(w) + 2 * j);
    const float4 o = make_float4(v.x, v.x, v.y, v.y);
    float* y0 = y + size_t(2 * r) * size_t(2 * w) + 4 * j;
    *reinterpret_cast<float4*>(y0) = o;
    *reinterpret_cast<float4*>(y0 + 2 * w) = o;
  }
}

// dx = ((0 + dy[2r][2j']) + dy[2r][2j'+1]) + dy[2r+1][2j']) + dy[2r+1][2j'+1]
// for j' = 2j, 2j+1: the scalar kernel's order (rows, then columns, from 0).
__global__ void upsample2x_backward_kernel(const float* __restrict__ dy, float* __restrict__ dx,
                                           unsigned total, FastDiv fpairs, int w,
                                           const float* __restrict__ mask) {
  for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    int r, j;
    fpairs.divmod(int(e), r, j);
    const float* d0 = dy + size_t(2 * r) * size_t(2 * w) + 4 * j;
    const float4 u = *reinterpret_cast<const float4*>(d0);
    const float4 v = *reinterpret_cast<const float4*>(d0 + 2 * w);
    float s0 = 0.0f, s1 = 0.0f;
    s0 += u.x;
    s0 += u.y;
    s0 += v.x;
    s0 += v.y;
    s1 += u.z;
    s1 += u.w;
    s1 += v.z;
    s1 += v.w;
    const size_t at = size_t(r) * size_t(w) + 2 * j;
    if (mask) {  // the fused ReLU: x > 0 ? dx : 0
      const float2 m = *reinterpret_cast<const float2*>(mask + at);
      if (!(m.x > 0.0f)) s0 = 0.0f;
      if (!(m.y > 0.0f)) s1 = 0.0f;
    }
    *reinterpret_cast<float2*>(dx + at) = make_float2(s0, s1);
  }
}

}  // namespace

// ---- the kernels as host functions (simple_kernels.h) ----------------------------

void relu_forward(const float* xp, float* yp, size_t n) {
  if (n == 0) return;
  if (aligned16(xp) && aligned16(yp)) {
    const size_t n4 = n / 4;
    relu_forward_vec_kernel<<<grid_for(n4 > 0 ? n4 : 1), kBlock>>>(
        reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), n4, n);
  } else {
    relu_forward_kernel<<<grid_for(n), kBlock>>>(xp, yp, n);
  }
  HPMC_CUDA_LAUNCH_CHECK("relu forward kernel");
}

void relu_backward(const float* xp, const float* dyp, float* dxp, size_t n) {
  if (n == 0) return;
  if (aligned16(xp) && aligned16(dyp) && aligned16(dxp)) {
    const size_t n4 = n / 4;
    relu_backward_vec_kernel<<<grid_for(n4 > 0 ? n4 : 1), kBlock>>>(
        reinterpret_cast<const float4*>(xp), reinterpret_cast<const float4*>(dyp),
        reinterpret_cast<float4*>(dxp), n4, n);
  } else {
    relu_backward_kernel<<<grid_for(n), kBlock>>>(xp, dyp, dxp, n);
  }
  HPMC_CUDA_LAUNCH_CHECK("relu backward kernel");
}

namespace {

// The 2×2 stride-2 vector kernels apply: H even, W % 4 == 0 (so every output
// pair and input float4 row segment lies in one row), tensors 16-byte
// aligned, and a thread count that fits the 32-bit index.
bool maxpool_fast_2x2(const PoolWindow& win, const Shape& in, const float* a, const float* b,
                      const float* c) {
  return win.kernel == 2 && win.stride == 2 && in.h % 2 == 0 && in.w % 4 == 0 &&
         aligned16(a) && aligned16(b) && (!c || aligned16(c)) && in.count() / 8 < kMaxVecItems;
}

// The scale-2 vector kernels apply: W even (input float2s, output float4s
// within a row), tensors 16-byte aligned, a thread count that fits 32 bits.
bool upsample_fast_2x(int scale, const Shape& in, const float* a, const float* b) {
  return scale == 2 && in.w % 2 == 0 && aligned16(a) && aligned16(b) &&
         in.count() / 2 < kMaxVecItems;
}

}  // namespace

void maxpool2d_forward(const Shape& s, const PoolWindow& win, const float* xp, float* yp) {
  // maxpool2d_output_shape throws unless the window fits (so oh, ow ≥ 1).
  const Shape o = maxpool2d_output_shape(win, s);
  const size_t total = o.count();
  if (total == 0) return;
  if (maxpool_fast_2x2(win, s, xp, yp, nullptr)) {
    const size_t quads = total / 2;  // = planes · OH · W/4
    maxpool2x2_forward_kernel<<<grid_for(quads), kBlock>>>(xp, yp, unsigned(quads),
                                                           FastDiv(s.w / 4), s.w);
  } else {
    maxpool_forward_kernel<<<grid_for(total), kBlock>>>(xp, yp, total, s.h, s.w, o.h, o.w,
                                                        win.kernel, win.stride);
  }
  HPMC_CUDA_LAUNCH_CHECK("maxpool2d forward kernel");
}

void maxpool2d_backward(const Shape& s, const PoolWindow& win, const float* xp, const float* dyp,
                        float* dxp, bool relu_mask) {
  const size_t total = s.count();
  if (total == 0) return;
  const Shape o = maxpool2d_output_shape(win, s);
  const size_t outs = o.count();
  if (maxpool_fast_2x2(win, s, xp, dyp, dxp)) {
    const size_t quads = outs / 2;
    maxpool2x2_backward_kernel<<<grid_for(quads), kBlock>>>(xp, dyp, dxp, unsigned(quads),
                                                            FastDiv(s.w / 4), s.w, relu_mask);
  } else if (win.stride >= win.kernel && outs > 0) {
    maxpool_backward_cells_kernel<<<grid_for(outs), kBlock>>>(
        xp, dyp, dxp, outs, s.h, s.w, o.h, o.w, win.kernel, win.stride, relu_mask);
  } else {
    maxpool_backward_kernel<<<grid_for(total), kBlock>>>(xp, dyp, dxp, total, s.h, s.w, o.h, o.w,
                                                         win.kernel, win.stride, relu_mask);
  }
  HPMC_CUDA_LAUNCH_CHECK("maxpool2d backward kernel");
}

void upsample2d_forward(const Shape& s, int scale, const float* xp, float* yp) {
  const size_t total = upsample2d_output_shape(scale, s).count();
  if (total == 0) return;
  if (upsample_fast_2x(scale, s, xp, yp)) {
    const size_t pairs = s.count() / 2;
    upsample2x_forward_kernel<<<grid_for(pairs), kBlock>>>(xp, yp, unsigned(pairs),
                                                           FastDiv(s.w / 2), s.w);
  } else {
    upsample_forward_kernel<<<grid_for(total), kBlock>>>(xp, yp, total, s.h, s.w, scale);
  }
  HPMC_CUDA_LAUNCH_CHECK("upsample2d forward kernel");
}

void upsample2d_backward(const Shape& s, int scale, const float* dyp, float* dxp,
                         const float* mask) {
  const size_t total = s.count();
  if (total == 0) return;
  if (upsample_fast_2x(scale, s, dyp, dxp) && (!mask || aligned16(mask))) {
    upsample2x_backward_kernel<<<grid_for(total / 2), kBlock>>>(dyp, dxp, unsigned(total / 2),
                                                                FastDiv(s.w / 2), s.w, mask);
  } else {
    upsample_backward_kernel<<<grid_for(total), kBlock>>>(dyp, dxp, total, s.h, s.w, scale,
                                                          mask);
  }
  HPMC_CUDA_LAUNCH_CHECK("upsample2d backward kernel");
}

// ---- the layers ------------------------------------------------------------------

void ReLUGPU::forward_impl(const Tensor& x, Tensor& y) {
  relu_forward(x.data<float>(), y.data<float>(), x.numel());
}

void ReLUGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  relu_backward(x.data<float>(), dy.data<float>(), dx->data<float>(), x.numel());
}

void MaxPool2dGPU::forward_impl(const Tensor& x, Tensor& y) {
  maxpool2d_forward(x.shape(), win_, x.data<float>(), y.data<float>());
}

void MaxPool2dGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                 Tensor* dx) {
  if (!dx) return;
  maxpool2d_backward(x.shape(), win_, x.data<float>(), dy.data<float>(), dx->data<float>(),
                     /*relu_mask=*/false);
}

void UpSample2dGPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  if (interp_ == UpsampleMode::kBilinear) {
    if (s.count() == 0) return;
    upsample2d_bilinear_forward(x.data<float>(), y.data<float>(), int64_t(s.n) * s.c, s.h, s.w,
                                scale_);
    return;
  }
  upsample2d_forward(s, scale_, x.data<float>(), y.data<float>());
}

void UpSample2dGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                  Tensor* dx) {
  if (!dx) return;
  const Shape& s = x.shape();
  if (interp_ == UpsampleMode::kBilinear) {
    if (s.count() == 0) return;
    upsample2d_bilinear_backward(dy.data<float>(), dx->data<float>(), int64_t(s.n) * s.c, s.h,
                                 s.w, scale_);
    return;
  }
  upsample2d_backward(s, scale_, dy.data<float>(), dx->data<float>(), nullptr);
}

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

HPMC_REGISTER_GPU(ReLU)
HPMC_REGISTER_GPU(MaxPool2d)
HPMC_REGISTER_GPU(UpSample2d)
HPMC_REGISTER_GPU(Flatten)

}  // namespace hpmc::gpu
