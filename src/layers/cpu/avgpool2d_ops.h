// avgpool2d_ops.h — 2-d average pooling math, templated on the scalar so tests
// can run it in double for finite-difference checks; the CPU layer calls it
// with T = float.
//
// Layout: `planes` = N·C contiguous H×W planes in, N·C OH×OW planes out.
// No padding (so PyTorch's count_include_pad does not arise) and ceil_mode
// off: OH = floor((H − k) / s) + 1, likewise OW; the caller guarantees
// k ≤ H and k ≤ W.
// Forward:  y[p,i,j] = (Σ over the k×k window, row-major from 0) / (k·k) —
//           PyTorch's AvgPool2d: the sum, then one division.
// Backward: dx[p,r,c] = Σ over the windows (i, j) containing (r, c), i then j
//           ascending, from 0, of dy[p,i,j] / (k·k) — a gather, each dx
//           element written once (dx is overwritten), so the GPU kernels
//           (layers/gpu/resample_kernels.cu) run the same additions in the same
//           order and give the same bits with no atomics, overlapping windows
//           (s < k) included. Positions no window covers get 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "layers/resample_index.h"

namespace hpmc {

template <typename T>
void avgpool2d_forward(const T* x, T* y, int64_t planes, int h, int w, int kernel, int stride) {
  const int oh = pool_out_size(h, kernel, stride), ow = pool_out_size(w, kernel, stride);
  const size_t in_plane = size_t(h) * w, out_plane = size_t(oh) * ow;
  const T area = T(kernel * kernel);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + size_t(p) * in_plane;
    T* yp = y + size_t(p) * out_plane;
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j) {
        T sum = T(0);
        for (int a = 0; a < kernel; ++a) {
          const T* row = xp + size_t(i * stride + a) * w + size_t(j) * stride;
          for (int b = 0; b < kernel; ++b) sum += row[b];
        }
        yp[size_t(i) * ow + j] = sum / area;
      }
  }
}

template <typename T>
void avgpool2d_backward(const T* dy, T* dx, int64_t planes, int h, int w, int kernel,
                        int stride) {
  const int oh = pool_out_size(h, kernel, stride), ow = pool_out_size(w, kernel, stride);
  const size_t in_plane = size_t(h) * w, out_plane = size_t(oh) * ow;
  const T area = T(kernel * kernel);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T* dyp = dy + size_t(p) * out_plane;
    T* dxp = dx + size_t(p) * in_plane;
    for (int r = 0; r < h; ++r) {
      int i_lo, i_hi;
      pool_windows_containing(r, kernel, stride, oh, i_lo, i_hi);
      for (int c = 0; c < w; ++c) {
        int j_lo, j_hi;
        pool_windows_containing(c, kernel, stride, ow, j_lo, j_hi);
        T sum = T(0);
        for (int i = i_lo; i <= i_hi; ++i)
          for (int j = j_lo; j <= j_hi; ++j) sum += dyp[size_t(i) * ow + j] / area;
        dxp[size_t(r) * w + c] = sum;
      }
    }
  }
}

}  // namespace hpmc
