// linear_ops.h — CPU fully connected kernels, templated on the scalar type
// (float for the layer, double for the finite-difference tests).
//
// Layouts: x is [N, in] (a flat NCHW tensor (N, in, 1, 1)), w is [out, in]
// (PyTorch's layout), b is [out], y is [N, out].
//   forward:  y  = x · W^T + b
//   backward: dW += dY^T · X,  db += Σ_n dY,  dX = dY · W
// Parameter gradients ACCUMULATE, dx is OVERWRITTEN (layer.h).
// `prec` is the model's precision (core/precision.h): fp32, or for float
// bf16, where the three products round their operands to bf16 and sum in
// FP32 (bf16gemm.h); the bias and its gradient stay FP32.
//
// Threads split the FEATURE axis, not the batch: every output element is
// computed by exactly one gemm call (so there is no reduction and results
// are deterministic for a fixed thread count), and a batch of 1 — where the
// cost is reading W — is spread over the threads too.
#pragma once

#include <algorithm>
#include <cstddef>

#include "core/blas.h"
#include "core/threads.h"

namespace hpmc::cpu {

namespace linear_detail {

// Piece `i` of [0, n) cut into `parts` contiguous pieces whose lengths are
// multiples of `align` (except the last), so gemm sees SIMD-friendly widths.
inline void split_range(int n, int parts, int i, int align, int& lo, int& hi) {
  int chunk = (n + parts - 1) / parts;
  chunk = (chunk + align - 1) / align * align;
  lo = std::min(n, i * chunk);
  hi = std::min(n, lo + chunk);
}

// Below this many multiply-adds, starting a thread team costs more than it saves.
constexpr double kParallelWork = 1 << 15;

inline int parts_for(int batch, int in, int out) {
  return double(batch) * in * out < kParallelWork ? 1 : num_threads();
}

constexpr int kAlign = 16;

}  // namespace linear_detail

// y = x · W^T + b; b may be null. Overwrites y.
template <typename T>
void linear_forward(int batch, int in, int out, const T* x, const T* w, const T* b, T* y,
                    Precision prec = Precision::kFp32) {
  const int parts = linear_detail::parts_for(batch, in, out);
#pragma omp parallel for schedule(static) if (parts > 1)
  for (int part = 0; part < parts; ++part) {
    int o0, o1;
    linear_detail::split_range(out, parts, part, linear_detail::kAlign, o0, o1);
    if (o0 >= o1) continue;
    if (b)
      for (int n = 0; n < batch; ++n) std::copy(b + o0, b + o1, y + size_t(n) * out + o0);
    // y[:, o0:o1] = x · W[o0:o1, :]^T (+ the bias already there)
    gemm(prec, false, true, batch, o1 - o0, in, T(1), x, in, w + size_t(o0) * in, in,
         T(b ? 1 : 0), y + o0, out);
  }
}

// dx = dy · W. Overwrites dx.
template <typename T>
void linear_backward_data(int batch, int in, int out, const T* dy, const T* w, T* dx,
                          Precision prec = Precision::kFp32) {
  const int parts = linear_detail::parts_for(batch, in, out);
#pragma omp parallel for schedule(static) if (parts > 1)
  for (int part = 0; part < parts; ++part) {
    int i0, i1;
    linear_detail::split_range(in, parts, part, linear_detail::kAlign, i0, i1);
    if (i0 >= i1) continue;
    gemm(prec, false, false, batch, i1 - i0, out, T(1), dy, out, w + i0, in, T(0), dx + i0, in);
  }
}

// dw += dy^T · x and, if db is non-null, db += Σ_n dy.
template <typename T>
void linear_backward_params(int batch, int in, int out, const T* x, const T* dy, T* dw, T* db,
                            Precision prec = Precision::kFp32) {
  const int parts = linear_detail::parts_for(batch, in, out);
#pragma omp parallel for schedule(static) if (parts > 1)
  for (int part = 0; part < parts; ++part) {
    int o0, o1;
    // Rows of dW: split at 1 so that small `out` still spreads over threads.
    linear_detail::split_range(out, parts, part, 1, o0, o1);
    if (o0 >= o1) continue;
    gemm(prec, true, false, o1 - o0, in, batch, T(1), dy + o0, out, x, in, T(1),
         dw + size_t(o0) * in, in);
    if (db)  // column sums of dy: for each o the n-sum runs in order, as a
             // plain loop would, but o is innermost so the adds vectorise
      for (int ob = o0; ob < o1; ob += 64) {
        const int oe = std::min(o1, ob + 64);
        T acc[64] = {};
        for (int n = 0; n < batch; ++n) {
          const T* row = dy + size_t(n) * out;
          for (int o = ob; o < oe; ++o) acc[o - ob] += row[o];
        }
        for (int o = ob; o < oe; ++o) db[o] += acc[o - ob];
      }
  }
}

}  // namespace hpmc::cpu
