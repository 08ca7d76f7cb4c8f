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
// The 2×2, stride-2 window (every shipped config's) has its own loops
// (maxpool2d_*_2x2): the same rule in straight-line code that vectorises
// along the output row, giving the general loops' bits.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

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
void maxpool2d_forward_general(const T* x, T* y, int64_t planes, int h, int w, int kernel,
                               int stride) {
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
void maxpool2d_backward_general(const T* x, const T* dy, T* dx, int64_t planes, int h, int w,
                                int kernel, int stride) {
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

// The window (e0, e1 / e2, e3) in row-major order and maxpool2d_argmax's
// rule in straight-line form: t1, t2, t3 say whether e1, e2, e3 replace the
// pick so far (a NaN, or a larger value, while no NaN has been met), so the
// pick is the last that replaced it, or e0. Non-short-circuit & and | on
// x != x (NaN) keep the loops branch-free, for the vectoriser.
template <typename T>
struct Pick2x2 {
  bool t1, t2, t3;
  T value;
  Pick2x2(T e0, T e1, T e2, T e3) {
    bool nan = e0 != e0;
    T cur = e0;
    t1 = (!nan) & ((e1 != e1) | (e1 > cur));
    cur = t1 ? e1 : cur;
    nan = nan | (e1 != e1);
    t2 = (!nan) & ((e2 != e2) | (e2 > cur));
    cur = t2 ? e2 : cur;
    nan = nan | (e2 != e2);
    t3 = (!nan) & ((e3 != e3) | (e3 > cur));
    value = t3 ? e3 : cur;
  }
};

template <typename T>
void maxpool2d_forward_2x2(const T* x, T* y, int64_t planes, int h, int w) {
  const int oh = h / 2, ow = w / 2;
  const size_t in_plane = size_t(h) * w, out_plane = size_t(oh) * ow;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p)
    for (int i = 0; i < oh; ++i) {
      const T* r0 = x + size_t(p) * in_plane + size_t(2 * i) * w;
      const T* r1 = r0 + w;
      T* out = y + size_t(p) * out_plane + size_t(i) * ow;
      for (int j = 0; j < ow; ++j)
        out[j] = Pick2x2<T>(r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]).value;
    }
}

template <typename T>
void maxpool2d_backward_2x2(const T* x, const T* dy, T* dx, int64_t planes, int h, int w) {
  const int oh = h / 2, ow = w / 2;
  const size_t in_plane = size_t(h) * w, out_plane = size_t(oh) * ow;
#pragma omp parallel
  {
    // Per output row: the four gradients of each window side by side, then
    // interleaved into the two input rows; both loops branch-free, so that
    // they vectorise.
    std::vector<T> q(4 * static_cast<size_t>(ow));
#pragma omp for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      const T* xp = x + size_t(p) * in_plane;
      T* dxp = dx + size_t(p) * in_plane;
      T* q0 = q.data();
      T* q1 = q0 + ow;
      T* q2 = q1 + ow;
      T* q3 = q2 + ow;
      for (int i = 0; i < oh; ++i) {
        const T* r0 = xp + size_t(2 * i) * w;
        const T* r1 = r0 + w;
        const T* g = dy + size_t(p) * out_plane + size_t(i) * ow;
        for (int j = 0; j < ow; ++j) {
          const Pick2x2<T> k(r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]);
          // 0 + dy, as the general loop's += onto a zeroed dx (−0 becomes +0).
          // The last replacement takes it; single-condition selects only.
          T v = T(0) + g[j];
          q3[j] = k.t3 ? v : T(0);
          v = k.t3 ? T(0) : v;
          q2[j] = k.t2 ? v : T(0);
          v = k.t2 ? T(0) : v;
          q1[j] = k.t1 ? v : T(0);
          q0[j] = k.t1 ? T(0) : v;
        }
        T* d0 = dxp + size_t(2 * i) * w;
        T* d1 = d0 + w;
        for (int j = 0; j < ow; ++j) {
          d0[2 * j] = q0[j];
          d0[2 * j + 1] = q1[j];
          d1[2 * j] = q2[j];
          d1[2 * j + 1] = q3[j];
        }
        if (w % 2) d0[w - 1] = d1[w - 1] = T(0);  // a last column no window covers
      }
      if (h % 2)  // a last row no window covers
        for (int j = 0; j < w; ++j) dxp[size_t(h - 1) * w + j] = T(0);
    }
  }
}

template <typename T>
void maxpool2d_forward(const T* x, T* y, int64_t planes, int h, int w, int kernel, int stride) {
  if (kernel == 2 && stride == 2)
    maxpool2d_forward_2x2(x, y, planes, h, w);
  else
    maxpool2d_forward_general(x, y, planes, h, w, kernel, stride);
}

template <typename T>
void maxpool2d_backward(const T* x, const T* dy, T* dx, int64_t planes, int h, int w, int kernel,
                        int stride) {
  if (kernel == 2 && stride == 2)
    maxpool2d_backward_2x2(x, dy, dx, planes, h, w);
  else
    maxpool2d_backward_general(x, dy, dx, planes, h, w, kernel, stride);
}

}  // namespace hpmc
