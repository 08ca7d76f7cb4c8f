// maxpool2d_ops.h — 2-d max pooling math, templated on the scalar so tests
// can run it in double for finite-difference checks; MaxPool2dCPU calls it
// with T = float.
//
// Layout: `planes` = N·C contiguous H×W planes in, N·C OH×OW planes out.
// No padding; OH = floor((H − k) / s) + 1 (PyTorch's default, ceil_mode off),
// likewise OW; the caller guarantees k ≤ H and k ≤ W.
// Forward:  y[p,i,j] = max over the window x[p, i·s .. i·s+k−1, j·s .. j·s+k−1].
//           A window holding a NaN outputs NaN (as in PyTorch).
// Backward: each dy[p,i,j] goes to the FIRST maximum of its window in
//           row-major order; dx is zeroed and then accumulated with +=,
//           because with s < k windows overlap and one input can be the
//           maximum of several. The argmax is recomputed from x rather than
//           stored, so the layer keeps no state between forward and backward.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "layers/pool_spec.h"  // maxpool2d_out_size

namespace hpmc {

// Offset (within the plane) of the window's first maximum, or of its first
// NaN if it holds one — so forward outputs NaN and backward routes there.
template <typename T>
size_t maxpool2d_argmax(const T* plane, int w, int row0, int col0, int kernel) {
  size_t best = size_t(row0) * w + col0;
  T bv = plane[best];
  if (std::isnan(bv)) return best;
  for (int a = 0; a < kernel; ++a) {
    const size_t row = size_t(row0 + a) * w;
    for (int b = 0; b < kernel; ++b) {
      const size_t idx = row + col0 + b;
      const T v = plane[idx];
      if (std::isnan(v)) return idx;
      // Strict > keeps the first of equal maxima.
      if (v > bv) {
        bv = v;
        best = idx;
      }
    }
  }
  return best;
}

template <typename T>
void maxpool2d_forward(const T* x, T* y, int64_t planes, int h, int w, int kernel, int stride) {
  const int oh = maxpool2d_out_size(h, kernel, stride);
  const int ow = maxpool2d_out_size(w, kernel, stride);
  const size_t in_plane = size_t(h) * w, out_plane = size_t(oh) * ow;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + size_t(p) * in_plane;
    T* yp = y + size_t(p) * out_plane;
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j)
        yp[size_t(i) * ow + j] = xp[maxpool2d_argmax(xp, w, i * stride, j * stride, kernel)];
  }
}

template <typename T>
void maxpool2d_backward(const T* x, const T* dy, T* dx, int64_t planes, int h, int w, int kernel,
                        int stride) {
  const int oh = maxpool2d_out_size(h, kernel, stride);
  const int ow = maxpool2d_out_size(w, kernel, stride);
  const size_t in_plane = size_t(h) * w, out_plane = size_t(oh) * ow;
  // One plane per iteration: windows never cross planes, so the += below
  // never races between threads.
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + size_t(p) * in_plane;
    const T* dyp = dy + size_t(p) * out_plane;
    T* dxp = dx + size_t(p) * in_plane;
    for (size_t e = 0; e < in_plane; ++e) dxp[e] = T(0);
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j)
        dxp[maxpool2d_argmax(xp, w, i * stride, j * stride, kernel)] += dyp[size_t(i) * ow + j];
  }
}

}  // namespace hpmc
