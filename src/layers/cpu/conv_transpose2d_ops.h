// conv_transpose2d_ops.h — CPU 2-d transposed convolution, templated on the
// scalar type (float for the layer, double for the finite-difference tests).
//
// Layouts: x is N×in×H×W, w is [in, out, k, k], b is [out], y is
// N×out×H_out×W_out (conv_transpose2d_spec.h states PyTorch's definition).
// Every function takes `eq`, the EQUIVALENT CONVOLUTION of the layer for its
// input (conv_transpose2d_equivalent_conv: C = out, H × W = H_out × W_out,
// K = in, P × Q = H × W), and runs the Conv2D operations of conv2d_ops.h on
// it — the direct thin kernels or im2col + gemm, as conv2d_thin_applies
// picks for eq:
//   forward          y  = conv2d_backward_data(eq, dy := x, w), then y += b per channel
//   backward_data    dx = conv2d_forward(eq, x := dy, w, no bias)
//   backward_params  dw += conv2d_backward_params(eq, x := dy, dy := x), weight only;
//                    db += Σ_{n,h,w} dy[n][o][h][w], summed here in double
// The tests hold these against the scatter definition written out directly
// and against finite differences (tests/test_conv_transpose.cpp).
//
// Gradient convention (layer.h): dw/db ACCUMULATE (+=), dx is OVERWRITTEN.
// Precision: conv2d_ops.h's, passed through (`prec`); the bias passes are FP32.
// Determinism: conv2d_ops.h's (bit-identical for a fixed thread count); the
// bias passes give each channel to one thread, in a fixed order.
#pragma once

#include <cstddef>

#include "layers/conv_shape.h"
#include "layers/cpu/conv2d_ops.h"

namespace hpmc::cpu {

// y = conv_transpose(x, w) + b; b may be null. Overwrites y.
template <typename T>
void conv_transpose2d_forward(const Conv2dShape& eq, const T* x, const T* w, const T* b, T* y,
                              Conv2dWorkspace<T>& ws, Precision prec = Precision::kFp32) {
  conv2d_backward_data(eq, x, w, y, ws, prec);
  if (!b) return;
  const size_t plane = size_t(eq.H) * eq.W;
  const ptrdiff_t planes = ptrdiff_t(eq.N) * eq.C;
#pragma omp parallel for schedule(static) if (size_t(planes) * plane >= 16384)
  for (ptrdiff_t i = 0; i < planes; ++i) {
    const T bias = b[i % eq.C];
    T* out = y + size_t(i) * plane;
    for (size_t j = 0; j < plane; ++j) out[j] += bias;
  }
}

// dx = dL/dx for dy = dL/dy. Overwrites dx.
template <typename T>
void conv_transpose2d_backward_data(const Conv2dShape& eq, const T* dy, const T* w, T* dx,
                                    Conv2dWorkspace<T>& ws, Precision prec = Precision::kFp32) {
  conv2d_forward(eq, dy, w, static_cast<const T*>(nullptr), dx, ws, prec);
}

// db += Σ dy over the batch and the output plane, per output channel.
template <typename T>
void conv_transpose2d_backward_bias(const Conv2dShape& eq, const T* dy, T* db) {
  const size_t plane = size_t(eq.H) * eq.W;
#pragma omp parallel for schedule(static) if (size_t(eq.N) * eq.C * plane >= 16384)
  for (int o = 0; o < eq.C; ++o) {
    double acc = 0;
    for (int n = 0; n < eq.N; ++n)
      acc += conv_detail::sum_in_double(dy + (size_t(n) * eq.C + o) * plane, int(plane));
    db[o] = T(double(db[o]) + acc);
  }
}

// dw += dL/dw and, if db is non-null, db += dL/db.
template <typename T>
void conv_transpose2d_backward_params(const Conv2dShape& eq, const T* x, const T* dy, T* dw,
                                      T* db, Conv2dWorkspace<T>& ws,
                                      Precision prec = Precision::kFp32) {
  // In eq's terms the output gradient dy is the input and x the output
  // gradient: dw[c][o][r][s] = Σ x[n][c][p][q] · dy[n][o][p·st−pad+r][q·st−pad+s].
  conv2d_backward_params(eq, dy, x, dw, static_cast<T*>(nullptr), ws, prec);
  if (db) conv_transpose2d_backward_bias(eq, dy, db);
}

}  // namespace hpmc::cpu
