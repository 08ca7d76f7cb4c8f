// upsample2d_ops.h — 2-d up-sampling math by an integer scale s, nearest and
// bilinear, templated on the scalar so tests can run it in double for
// finite-difference checks; UpSample2dCPU calls it with T = float.
//
// Layout: `planes` = N·C contiguous H×W planes in, N·C (H·s)×(W·s) planes out.
// Nearest (PyTorch's Upsample(mode="nearest")):
//   Forward:  y[p, i, j] = x[p, i / s, j / s]  (integer division), i.e. each
//             input pixel becomes an s×s block.
//   Backward: dx[p, i, j] = sum over the s×s block of dy[p, i·s + a, j·s + b],
//             from 0, a then b ascending; dx is overwritten.
//   Scale 2 (every shipped config's) has its own loops (upsample2d_*_x2): the
//   same copies and the same sums in the same order, in code that vectorises.
// Bilinear (PyTorch's Upsample(mode="bilinear", align_corners=False)):
//   Forward:  with the row tap (i0, i1, a0, a1) of output row i and the column
//             tap (j0, j1, b0, b1) of output column j (bilinear_tap in
//             layers/resample_index.h: PyTorch's source index, clamped at 0),
//             y = a0·(b0·x[i0,j0] + b1·x[i0,j1]) + a1·(b0·x[i1,j0] + b1·x[i1,j1]),
//             each product and sum rounded in that order.
//   Backward: a gather: dx[p, r, c] = Σ over output rows i (ascending) that
//             read row r, and output columns j (ascending) that read column c,
//             of wr(i)·(wc(j)·dy[p, i, j]), from 0, where wr, wc are the
//             weights with which they read it (bilinear_weight; zero weights
//             are skipped). Each dx element is written once (overwritten), so
//             the GPU kernels run the same operations in the same order and
//             give the same bits, with no atomics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/fp_exact.h"
#include "layers/resample_index.h"

namespace hpmc {

template <typename T>
void upsample2d_forward_general(const T* x, T* y, int64_t planes, int h, int w, int scale) {
  const int oh = h * scale, ow = w * scale;
  const size_t in_plane = size_t(h) * w, out_plane = size_t(oh) * ow;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + size_t(p) * in_plane;
    T* yp = y + size_t(p) * out_plane;
    for (int i = 0; i < oh; ++i) {
      const T* xrow = xp + size_t(i / scale) * w;
      T* yrow = yp + size_t(i) * ow;
      for (int j = 0; j < ow; ++j) yrow[j] = xrow[j / scale];
    }
  }
}

template <typename T>
void upsample2d_backward_general(const T* dy, T* dx, int64_t planes, int h, int w, int scale) {
  const int ow = w * scale;
  const size_t in_plane = size_t(h) * w, out_plane = size_t(h) * scale * ow;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T* dyp = dy + size_t(p) * out_plane;
    T* dxp = dx + size_t(p) * in_plane;
    for (int i = 0; i < h; ++i)
      for (int j = 0; j < w; ++j) {
        T sum = T(0);
        for (int a = 0; a < scale; ++a) {
          const T* dyrow = dyp + size_t(i * scale + a) * ow + size_t(j) * scale;
          for (int b = 0; b < scale; ++b) sum += dyrow[b];
        }
        dxp[size_t(i) * w + j] = sum;
      }
  }
}

template <typename T>
void upsample2d_forward_x2(const T* x, T* y, int64_t planes, int h, int w) {
  const int ow = 2 * w;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p)
    for (int i = 0; i < h; ++i) {
      const T* in = x + (size_t(p) * h + i) * w;
      T* out = y + (size_t(p) * h + i) * 2 * ow;
      for (int j = 0; j < w; ++j) out[2 * j] = out[2 * j + 1] = in[j];
      for (int j = 0; j < ow; ++j) out[ow + j] = out[j];
    }
}

template <typename T>
void upsample2d_backward_x2(const T* dy, T* dx, int64_t planes, int h, int w) {
  const int ow = 2 * w;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p)
    for (int i = 0; i < h; ++i) {
      const T* g0 = dy + (size_t(p) * h + i) * 2 * ow;
      const T* g1 = g0 + ow;
      T* out = dx + (size_t(p) * h + i) * w;
      for (int j = 0; j < w; ++j)
        out[j] = (((T(0) + g0[2 * j]) + g0[2 * j + 1]) + g1[2 * j]) + g1[2 * j + 1];
    }
}

template <typename T>
void upsample2d_forward(const T* x, T* y, int64_t planes, int h, int w, int scale) {
  if (scale == 2)
    upsample2d_forward_x2(x, y, planes, h, w);
  else
    upsample2d_forward_general(x, y, planes, h, w, scale);
}

template <typename T>
void upsample2d_backward(const T* dy, T* dx, int64_t planes, int h, int w, int scale) {
  if (scale == 2)
    upsample2d_backward_x2(dy, dx, planes, h, w);
  else
    upsample2d_backward_general(dy, dx, planes, h, w, scale);
}

// The taps of the `out` positions of one axis of `in` positions.
template <typename T>
std::vector<BilinearTap<T>> bilinear_taps(int in, int scale) {
  const T ratio = T(1.0 / scale);
  std::vector<BilinearTap<T>> taps(size_t(in) * scale);
  for (int d = 0; d < int(taps.size()); ++d) taps[size_t(d)] = bilinear_tap(ratio, d, in, scale);
  return taps;
}

template <typename T>
void upsample2d_bilinear_forward(const T* x, T* y, int64_t planes, int h, int w, int scale) {
  const int oh = h * scale, ow = w * scale;
  const size_t in_plane = size_t(h) * w, out_plane = size_t(oh) * ow;
  const std::vector<BilinearTap<T>> rows = bilinear_taps<T>(h, scale);
  const std::vector<BilinearTap<T>> cols = bilinear_taps<T>(w, scale);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + size_t(p) * in_plane;
    T* yp = y + size_t(p) * out_plane;
    for (int i = 0; i < oh; ++i) {
      const BilinearTap<T>& a = rows[size_t(i)];
      const T* x0 = xp + size_t(a.i0) * w;
      const T* x1 = xp + size_t(a.i1) * w;
      for (int j = 0; j < ow; ++j) {
        const BilinearTap<T>& b = cols[size_t(j)];
        const T top = add_rn(mul_rn(b.l0, x0[b.i0]), mul_rn(b.l1, x0[b.i1]));
        const T bottom = add_rn(mul_rn(b.l0, x1[b.i0]), mul_rn(b.l1, x1[b.i1]));
        yp[size_t(i) * ow + j] = add_rn(mul_rn(a.l0, top), mul_rn(a.l1, bottom));
      }
    }
  }
}

template <typename T>
void upsample2d_bilinear_backward(const T* dy, T* dx, int64_t planes, int h, int w, int scale) {
  const int oh = h * scale, ow = w * scale;
  const size_t in_plane = size_t(h) * w, out_plane = size_t(oh) * ow;
  const std::vector<BilinearTap<T>> rows = bilinear_taps<T>(h, scale);
  const std::vector<BilinearTap<T>> cols = bilinear_taps<T>(w, scale);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T* dyp = dy + size_t(p) * out_plane;
    T* dxp = dx + size_t(p) * in_plane;
    for (int r = 0; r < h; ++r) {
      int i_lo, i_hi;
      bilinear_outputs_reading(r, scale, oh, i_lo, i_hi);
      for (int c = 0; c < w; ++c) {
        int j_lo, j_hi;
        bilinear_outputs_reading(c, scale, ow, j_lo, j_hi);
        T sum = T(0);
        for (int i = i_lo; i <= i_hi; ++i) {
          const T wr = bilinear_weight(rows[size_t(i)], r);
          if (wr == T(0)) continue;
          const T* dyrow = dyp + size_t(i) * ow;
          for (int j = j_lo; j <= j_hi; ++j) {
            const T wc = bilinear_weight(cols[size_t(j)], c);
            if (wc == T(0)) continue;
            sum = add_rn(sum, mul_rn(wr, mul_rn(wc, dyrow[j])));
          }
        }
        dxp[size_t(r) * w + c] = sum;
      }
    }
  }
}

}  // namespace hpmc
