// upsample2d_ops.h — nearest-neighbour 2-d up-sampling math, templated on
// the scalar so tests can run it in double for finite-difference checks;
// UpSample2dCPU calls it with T = float.
//
// Layout: `planes` = N·C contiguous H×W planes in, N·C (H·s)×(W·s) planes out.
// Forward:  y[p, i, j] = x[p, i / s, j / s]  (integer division), i.e. each
//           input pixel becomes an s×s block — PyTorch's Upsample(mode="nearest")
//           with an integer scale factor.
// Backward: dx[p, i, j] = sum over the s×s block of dy[p, i·s + a, j·s + b];
//           dx is overwritten.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpmc {

template <typename T>
void upsample2d_forward(const T* x, T* y, int64_t planes, int h, int w, int scale) {
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
void upsample2d_backward(const T* dy, T* dx, int64_t planes, int h, int w, int scale) {
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

}  // namespace hpmc
