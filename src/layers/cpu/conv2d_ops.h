// conv2d_ops.h — CPU 2-d convolution kernels, templated on the scalar type.
//
// Layouts: x is NCHW, w is KCRS, b is K, y is NKPQ (see conv_shape.h).
// Two variants of every operation:
//   * direct: the textbook seven nested loops, summed in double. Slow and
//     plainly right — the oracle the tests hold the fast path (and later the
//     GPU kernels) against. The input gradient is written as a gather, not as
//     the transpose of im2col, so it checks col2im independently.
//   * gemm: per image, im2col then one hpmc::gemm; OpenMP over the images of
//     the batch, each thread with its own column buffer. A 1x1, stride-1,
//     unpadded kernel skips im2col: the image already is its column matrix.
//     In bf16 on the amx and avx512_bf16 paths, the forward and
//     input-gradient passes pack the weights (their products' A operand)
//     once per call, not once per image (bf16gemm.h, Bf16PackedA): the same
//     bits, fewer packs. On the avx512_bf16 path, a stride-1 kernel whose
//     output is as wide as its input (Q == W: "same" padding) has no column
//     matrix in the forward and weight-gradient passes: the product reads
//     each of its rows straight from the image, as one shifted plane with
//     holes (bf16gemm.h, Bf16ShiftedB): the same bits, without im2col.
//   * thin (conv2d_thin.h): direct, vectorised, no column matrix, for layers
//     with few output channels, where the gemm has too few rows to pay for
//     im2col. conv2d_forward / _backward_data / _backward_params at the end
//     of this file choose between thin and gemm by shape and precision;
//     layers call those.
// Precision (core/precision.h): the gemm and thin passes take the model's,
// fp32 or (float only) bf16, in which every product's operands are rounded
// to bf16 (the gemm's by bf16gemm.h, the thin kernels' in their copies) and
// summed in FP32. im2col, col2im and the bias stay FP32.
// Both are templates so that the tests run the same code in double and
// compare it with finite differences.
//
// Gradient convention (layer.h): the weight and bias gradients ACCUMULATE
// (+=) into dw/db; the input gradient dx is OVERWRITTEN.
//
// Determinism: the gemm path gives each thread a static share of the images
// and a private partial weight/bias gradient; the partials are then summed in
// thread order, so a fixed thread count gives bit-identical results.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/blas.h"
#include "core/threads.h"
#include "layers/conv_shape.h"
#include "layers/cpu/conv2d_thin.h"

namespace hpmc::cpu {

// ---- direct (oracle) --------------------------------------------------------

namespace conv_detail {

inline size_t at4(int a, int b, int c, int d, int nb, int nc, int nd) {
  return ((size_t(a) * nb + b) * nc + c) * nd + d;
}

}  // namespace conv_detail

// y = conv(x, w) + b; b may be null. Overwrites y.
template <typename T>
void conv2d_direct_forward(const Conv2dShape& sh, const T* x, const T* w, const T* b, T* y) {
  using conv_detail::at4;
  for (int n = 0; n < sh.N; ++n)
    for (int k = 0; k < sh.K; ++k)
      for (int p = 0; p < sh.P; ++p)
        for (int q = 0; q < sh.Q; ++q) {
          double acc = b ? double(b[k]) : 0.0;
          for (int c = 0; c < sh.C; ++c)
            for (int r = 0; r < sh.R; ++r) {
              int ih = p * sh.stride - sh.pad + r;
              if (ih < 0 || ih >= sh.H) continue;
              for (int s = 0; s < sh.S; ++s) {
                int iw = q * sh.stride - sh.pad + s;
                if (iw < 0 || iw >= sh.W) continue;
                acc += double(x[at4(n, c, ih, iw, sh.C, sh.H, sh.W)]) *
                       double(w[at4(k, c, r, s, sh.C, sh.R, sh.S)]);
              }
            }
          y[at4(n, k, p, q, sh.K, sh.P, sh.Q)] = T(acc);
        }
}

// dx = dL/dx for dy = dL/dy. Overwrites dx.
template <typename T>
void conv2d_direct_backward_data(const Conv2dShape& sh, const T* dy, const T* w, T* dx) {
  using conv_detail::at4;
  for (int n = 0; n < sh.N; ++n)
    for (int c = 0; c < sh.C; ++c)
      for (int ih = 0; ih < sh.H; ++ih)
        for (int iw = 0; iw < sh.W; ++iw) {
          // Output (p, q) saw this pixel through kernel tap (r, s) exactly
          // when p·stride - pad + r == ih (and likewise for the width).
          double acc = 0;
          for (int k = 0; k < sh.K; ++k)
            for (int r = 0; r < sh.R; ++r) {
              int ph = ih + sh.pad - r;
              if (ph < 0 || ph % sh.stride != 0 || ph / sh.stride >= sh.P) continue;
              int p = ph / sh.stride;
              for (int s = 0; s < sh.S; ++s) {
                int qw = iw + sh.pad - s;
                if (qw < 0 || qw % sh.stride != 0 || qw / sh.stride >= sh.Q) continue;
                int q = qw / sh.stride;
                acc += double(dy[at4(n, k, p, q, sh.K, sh.P, sh.Q)]) *
                       double(w[at4(k, c, r, s, sh.C, sh.R, sh.S)]);
              }
            }
          dx[at4(n, c, ih, iw, sh.C, sh.H, sh.W)] = T(acc);
        }
}

// dw += dL/dw.
template <typename T>
void conv2d_direct_backward_weight(const Conv2dShape& sh, const T* x, const T* dy, T* dw) {
  using conv_detail::at4;
  for (int k = 0; k < sh.K; ++k)
    for (int c = 0; c < sh.C; ++c)
      for (int r = 0; r < sh.R; ++r)
        for (int s = 0; s < sh.S; ++s) {
          double acc = 0;
          for (int n = 0; n < sh.N; ++n)
            for (int p = 0; p < sh.P; ++p) {
              int ih = p * sh.stride - sh.pad + r;
              if (ih < 0 || ih >= sh.H) continue;
              for (int q = 0; q < sh.Q; ++q) {
                int iw = q * sh.stride - sh.pad + s;
                if (iw < 0 || iw >= sh.W) continue;
                acc += double(dy[at4(n, k, p, q, sh.K, sh.P, sh.Q)]) *
                       double(x[at4(n, c, ih, iw, sh.C, sh.H, sh.W)]);
              }
            }
          T& g = dw[at4(k, c, r, s, sh.C, sh.R, sh.S)];
          g = T(double(g) + acc);
        }
}

// db += dL/db (the sum of dy over the batch and the output plane).
template <typename T>
void conv2d_direct_backward_bias(const Conv2dShape& sh, const T* dy, T* db) {
  const size_t plane = size_t(sh.P) * sh.Q;
  for (int k = 0; k < sh.K; ++k) {
    double acc = 0;
    for (int n = 0; n < sh.N; ++n) {
      const T* d = dy + (size_t(n) * sh.K + k) * plane;
      for (size_t i = 0; i < plane; ++i) acc += double(d[i]);
    }
    db[k] = T(double(db[k]) + acc);
  }
}

// ---- im2col / col2im ----------------------------------------------------------

namespace conv_detail {

// The outputs o in [lo, hi) of [0, count) whose input o·stride + offset lies
// in [0, limit): computed once per kernel tap so the copy loops have no
// per-element bounds test.
inline void valid_range(int offset, int stride, int limit, int count, int& lo, int& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int span = limit - offset;
  hi = span <= 0 ? 0 : (span + stride - 1) / stride;
  hi = std::min(hi, count);
  lo = std::min(lo, hi);
}

}  // namespace conv_detail

// One image x_img (C×H×W) to its column matrix col [C·R·S, P·Q]: row (c,r,s)
// holds the input pixel each output position sees through tap (r,s) of
// channel c, or 0 where that falls in the padding.
template <typename T>
void im2col(const Conv2dShape& sh, const T* x_img, T* col) {
  const int P = sh.P, Q = sh.Q;
  // Stride 1 with Q == W (a "same" convolution): output (p, q) reads pixel
  // (p + r - pad)·W + q + s - pad of the plane, so the rows of a tap that see
  // the image are one shifted copy of the plane; what the copy carries across
  // a row end lands in the padding columns and is zeroed after.
  const bool shifted_copy = sh.stride == 1 && Q == sh.W;
  for (int c = 0; c < sh.C; ++c)
    for (int r = 0; r < sh.R; ++r)
      for (int s = 0; s < sh.S; ++s) {
        T* row = col + size_t((c * sh.R + r) * sh.S + s) * P * Q;
        const T* plane = x_img + size_t(c) * sh.H * sh.W;
        int lo, hi, plo, phi;
        conv_detail::valid_range(s - sh.pad, sh.stride, sh.W, Q, lo, hi);
        conv_detail::valid_range(r - sh.pad, sh.stride, sh.H, P, plo, phi);
        // Plain loops rather than std::fill/std::copy: the runs are short
        // (one output row), and library calls per run cost more than the run.
        if (shifted_copy && plo < phi && lo < hi) {
          const ptrdiff_t shift = ptrdiff_t(r - sh.pad) * sh.W + (s - sh.pad);
          const ptrdiff_t begin = ptrdiff_t(plo) * Q + lo, end = ptrdiff_t(phi - 1) * Q + hi;
          for (ptrdiff_t i = 0; i < begin; ++i) row[i] = T(0);
          for (ptrdiff_t i = begin; i < end; ++i) row[i] = plane[i + shift];
          for (ptrdiff_t i = end; i < ptrdiff_t(P) * Q; ++i) row[i] = T(0);
          if (lo > 0 || hi < Q)
            for (int p = plo; p < phi; ++p) {
              T* out = row + size_t(p) * Q;
              for (int q = 0; q < lo; ++q) out[q] = T(0);
              for (int q = hi; q < Q; ++q) out[q] = T(0);
            }
          continue;
        }
        for (int p = 0; p < P; ++p) {
          T* out = row + size_t(p) * Q;
          if (p < plo || p >= phi) {
            for (int q = 0; q < Q; ++q) out[q] = T(0);
            continue;
          }
          const T* in = plane + size_t(p * sh.stride - sh.pad + r) * sh.W + (s - sh.pad);
          int q = 0;
          for (; q < lo; ++q) out[q] = T(0);
          for (; q < hi; ++q) out[q] = in[q * sh.stride];
          for (; q < Q; ++q) out[q] = T(0);
        }
      }
}

// The transpose of im2col: ADDS each column entry back onto the pixel it was
// taken from (overlapping taps sum). The caller zeroes dx_img first. `col` is
// scratch: its entries that fall in the padding (which col2im drops) may be
// overwritten with zeros.
template <typename T>
void col2im(const Conv2dShape& sh, T* col, T* dx_img) {
  const int P = sh.P, Q = sh.Q;
  // As in im2col, a stride-1 "same" convolution maps a tap's valid rows onto
  // the plane by one shift. Zeroing the entries that would wrap across a row
  // end makes the whole block one run of adds: adding +0 leaves any pixel as
  // it was (dx is never -0: it starts at +0). Each pixel still gets its taps
  // in (r, s) order, so the sums round as before.
  const bool shifted_add = sh.stride == 1 && Q == sh.W;
  for (int c = 0; c < sh.C; ++c)
    for (int r = 0; r < sh.R; ++r)
      for (int s = 0; s < sh.S; ++s) {
        T* row = col + size_t((c * sh.R + r) * sh.S + s) * P * Q;
        T* plane = dx_img + size_t(c) * sh.H * sh.W;
        int lo, hi, plo, phi;
        conv_detail::valid_range(s - sh.pad, sh.stride, sh.W, Q, lo, hi);
        conv_detail::valid_range(r - sh.pad, sh.stride, sh.H, P, plo, phi);
        if (shifted_add && plo < phi && lo < hi) {
          if (lo > 0 || hi < Q)
            for (int p = plo; p < phi; ++p) {
              T* in = row + size_t(p) * Q;
              for (int q = 0; q < lo; ++q) in[q] = T(0);
              for (int q = hi; q < Q; ++q) in[q] = T(0);
            }
          const ptrdiff_t shift = ptrdiff_t(r - sh.pad) * sh.W + (s - sh.pad);
          const ptrdiff_t begin = ptrdiff_t(plo) * Q + lo, end = ptrdiff_t(phi - 1) * Q + hi;
          for (ptrdiff_t i = begin; i < end; ++i) plane[i + shift] += row[i];
          continue;
        }
        for (int p = plo; p < phi; ++p) {
          const T* in = row + size_t(p) * Q;
          T* out = plane + size_t(p * sh.stride - sh.pad + r) * sh.W + (s - sh.pad);
          for (int q = lo; q < hi; ++q) out[q * sh.stride] += in[q];
        }
      }
}

// ---- im2col + gemm (the fast path) ---------------------------------------------

// Scratch memory of the gemm path, per thread, grown on demand and kept
// between calls (a layer owns one). Not shareable between concurrent calls.
template <typename T>
struct Conv2dWorkspace {
  std::vector<std::vector<T>> col;     // one image's column matrix
  std::vector<std::vector<T>> dw, db;  // partial parameter gradients
  std::vector<char> used;              // which threads hold a partial
  Conv2dThinWorkspace<T> thin;         // the thin path's own buffers
  Bf16PackedA w_packed;                // bf16: the weights packed once per call

  // Room for `threads` threads; called outside parallel regions only, since
  // the outer vectors must not move while threads use their slots.
  void prepare(int threads) {
    size_t n = size_t(std::max(threads, 1));
    if (col.size() < n) {
      col.resize(n);
      dw.resize(n);
      db.resize(n);
    }
    used.assign(n, 0);
  }
};

namespace conv_detail {

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// out[i] += Σ_t parts[t][i] over the threads that took part, in thread
// order, so the rounding does not depend on which thread finished first.
template <typename T>
void reduce_in_thread_order(const std::vector<std::vector<T>>& parts, const std::vector<char>& used,
                            size_t n, T* out) {
  const int nt = int(used.size());
#pragma omp parallel for schedule(static) if (n >= 4096)
  for (ptrdiff_t i = 0; i < ptrdiff_t(n); ++i) {
    T acc = 0;
    for (int t = 0; t < nt; ++t)
      if (used[t]) acc += parts[t][i];
    out[i] += acc;
  }
}

// Σ d[0..n) in double. A whole output plane (1024 values at 32x32) summed in
// float would lose ~1e-5. One running double sum is a chain of dependent adds
// (4 cycles each), which costs more than the gemm where the layer is wide
// and shallow (256 channels from 3), so eight interleaved partial sums run
// side by side (and vectorise), then combine in a fixed order.
template <typename T>
double sum_in_double(const T* d, int n) {
  double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += double(d[i + j]);
  for (int j = 0; i < n; ++i, ++j) part[j] += double(d[i]);
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

// The weights as every image's product in a pass takes them (op(W) m × k,
// W with leading dimension ldw), packed once into ws.w_packed where that
// product runs on a bf16gemm path that takes a packed A (float, bf16, a CPU
// with AMX or AVX512_BF16: bf16gemm_packs_a()); null elsewhere, where each
// image calls gemm with W as before.
// Called outside parallel regions: the threads then only read the words.
template <typename T>
const Bf16PackedA* pack_weights(Precision prec, bool trans, int m, int k, const T* w, int ldw,
                                Conv2dWorkspace<T>& ws) {
  if constexpr (std::is_same_v<T, float>) {
    if (prec == Precision::kBf16 && bf16gemm_packs_a()) {
      bf16gemm_pack_a(trans, m, k, w, ldw, ws.w_packed);
      return &ws.w_packed;
    }
  }
  return nullptr;
}

// C = op(W) · B + beta · C in `prec`: from the packed weights where
// pack_weights packed them, else gemm with W (trans, m, k, ldw as packed).
template <typename T>
void weights_gemm(const Bf16PackedA* wp, Precision prec, bool trans, int m, int n, int k,
                  const T* w, int ldw, const T* b, int ldb, T beta, T* c, int ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (wp) {
      bf16gemm_packed_a(*wp, false, n, 1.f, b, ldb, beta, c, ldc);
      return;
    }
  }
  gemm(prec, trans, false, m, n, k, T(1), w, ldw, b, ldb, beta, c, ldc);
}

// Whether the bf16 products of `sh` in `prec` read the column matrix
// straight from the image (ShiftedColumns) instead of from im2col's copy:
// float, bf16, stride 1 with Q == W (each row of the column matrix a shifted
// plane, as im2col's shifted copy), a kernel that has a column matrix, and a
// bf16gemm path that reads a Bf16ShiftedB (avx512_bf16).
template <typename T>
bool reads_image_directly(const Conv2dShape& sh, Precision prec) {
  if constexpr (std::is_same_v<T, float>)
    return prec == Precision::kBf16 && sh.stride == 1 && sh.Q == sh.W && !sh.is_pointwise() &&
           bf16gemm_takes_shifted_b();
  return false;
}

// The column matrix of such a shape as a Bf16ShiftedB: row (c, r, s) is
// plane c shifted by (r - pad)·W + (s - pad), with the positions im2col
// zeroes (the padding) masked off — one shift and one mask per tap, made
// once per pass and shared by the images and threads.
class ShiftedColumns {
 public:
  explicit ShiftedColumns(const Conv2dShape& sh) : sh_(sh) {
    const int taps = sh.R * sh.S, cols = sh.col_cols();
    words_ = (cols + 63) / 64 + 2;  // the packs read up to 47 bits past the last column
    offset_.resize(size_t(taps));
    mask_.assign(size_t(taps) * size_t(words_), 0);
    for (int r = 0; r < sh.R; ++r)
      for (int s = 0; s < sh.S; ++s) {
        const int t = r * sh.S + s;
        offset_[size_t(t)] = ptrdiff_t(r - sh.pad) * sh.W + (s - sh.pad);
        int lo, hi, plo, phi;
        valid_range(s - sh.pad, 1, sh.W, sh.Q, lo, hi);
        valid_range(r - sh.pad, 1, sh.H, sh.P, plo, phi);
        uint64_t* m = mask_.data() + size_t(t) * size_t(words_);
        for (int p = plo; p < phi; ++p)
          for (int q = lo; q < hi; ++q) {
            const int j = p * sh.Q + q;
            m[j / 64] |= uint64_t(1) << (j % 64);
          }
      }
  }
  // One image's column matrix.
  Bf16ShiftedB of(const float* x_img) const {
    return {x_img, sh_.R * sh_.S, ptrdiff_t(sh_.H) * sh_.W, offset_.data(), mask_.data(), words_};
  }

 private:
  Conv2dShape sh_;
  int words_ = 0;
  std::vector<ptrdiff_t> offset_;
  std::vector<uint64_t> mask_;
};

// Fill each output plane of one image with its bias, so the gemm can add
// onto it (beta = 1) instead of making a second pass.
template <typename T>
void fill_bias(const Conv2dShape& sh, const T* b, T* y_img) {
  const size_t plane = size_t(sh.P) * sh.Q;
  for (int k = 0; k < sh.K; ++k) std::fill(y_img + k * plane, y_img + (k + 1) * plane, b[k]);
}

}  // namespace conv_detail

// y = conv(x, w) + b; b may be null. Overwrites y.
template <typename T>
void conv2d_gemm_forward(const Conv2dShape& sh, const T* x, const T* w, const T* b, T* y,
                         Conv2dWorkspace<T>& ws, Precision prec = Precision::kFp32) {
  ws.prepare(num_threads());
  const int rows = sh.col_rows(), cols = sh.col_cols();
  const Bf16PackedA* wp = conv_detail::pack_weights(prec, false, sh.K, rows, w, rows, ws);
  // Where the product reads the image directly (then wp is non-null).
  std::optional<conv_detail::ShiftedColumns> shifted;
  if (conv_detail::reads_image_directly<T>(sh, prec)) shifted.emplace(sh);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < sh.N; ++n) {
    const T* xn = x + n * sh.in_sample();
    T* yn = y + n * sh.out_sample();
    if constexpr (std::is_same_v<T, float>) {
      if (shifted) {
        if (b) conv_detail::fill_bias(sh, b, yn);
        bf16gemm_packed_a_shifted_b(*wp, false, cols, 1.f, shifted->of(xn), b ? 1.f : 0.f, yn,
                                    cols);
        continue;
      }
    }
    const T* col = xn;
    if (!sh.is_pointwise()) {
      T* buf = conv_detail::grow(ws.col[thread_index()], size_t(rows) * cols);
      im2col(sh, xn, buf);
      col = buf;
    }
    if (b) conv_detail::fill_bias(sh, b, yn);
    // y_n [K, PQ] = W [K, CRS] · col [CRS, PQ] (+ bias already in y_n)
    conv_detail::weights_gemm(wp, prec, false, sh.K, cols, rows, w, rows, col, cols, T(b ? 1 : 0),
                              yn, cols);
  }
}

// dx = dL/dx for dy = dL/dy. Overwrites dx.
template <typename T>
void conv2d_gemm_backward_data(const Conv2dShape& sh, const T* dy, const T* w, T* dx,
                               Conv2dWorkspace<T>& ws, Precision prec = Precision::kFp32) {
  ws.prepare(num_threads());
  const int rows = sh.col_rows(), cols = sh.col_cols();
  const Bf16PackedA* wp = conv_detail::pack_weights(prec, true, rows, sh.K, w, rows, ws);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < sh.N; ++n) {
    const T* dyn = dy + n * sh.out_sample();
    T* dxn = dx + n * sh.in_sample();
    // dcol [CRS, PQ] = W^T · dy_n; for a pointwise kernel dcol is dx_n itself.
    if (sh.is_pointwise()) {
      conv_detail::weights_gemm(wp, prec, true, rows, cols, sh.K, w, rows, dyn, cols, T(0), dxn,
                                cols);
      continue;
    }
    T* buf = conv_detail::grow(ws.col[thread_index()], size_t(rows) * cols);
    conv_detail::weights_gemm(wp, prec, true, rows, cols, sh.K, w, rows, dyn, cols, T(0), buf,
                              cols);
    std::fill(dxn, dxn + sh.in_sample(), T(0));
    col2im(sh, buf, dxn);
  }
}

// dw += dL/dw and, if db is non-null, db += dL/db.
template <typename T>
void conv2d_gemm_backward_params(const Conv2dShape& sh, const T* x, const T* dy, T* dw, T* db,
                                 Conv2dWorkspace<T>& ws, Precision prec = Precision::kFp32) {
  ws.prepare(num_threads());
  const int rows = sh.col_rows(), cols = sh.col_cols();
  const size_t wcount = sh.weight_count();
  std::optional<conv_detail::ShiftedColumns> shifted;
  if (conv_detail::reads_image_directly<T>(sh, prec)) shifted.emplace(sh);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < sh.N; ++n) {
    const int t = thread_index();
    T* pdw = conv_detail::grow(ws.dw[t], wcount);
    T* pdb = db ? conv_detail::grow(ws.db[t], size_t(sh.K)) : nullptr;
    if (!ws.used[t]) {  // this thread's first image: start its partials at 0
      ws.used[t] = 1;
      std::fill(pdw, pdw + wcount, T(0));
      if (pdb) std::fill(pdb, pdb + sh.K, T(0));
    }
    const T* xn = x + n * sh.in_sample();
    const T* dyn = dy + n * sh.out_sample();
    // partial dW [K, CRS] += dy_n [K, PQ] · col^T [PQ, CRS]
    bool done = false;
    if constexpr (std::is_same_v<T, float>) {
      if (shifted) {  // the same product, col read from the image
        bf16gemm_shifted_b(false, true, sh.K, rows, cols, 1.f, dyn, cols, shifted->of(xn), 1.f,
                           pdw, rows);
        done = true;
      }
    }
    if (!done) {
      const T* col = xn;
      if (!sh.is_pointwise()) {
        T* buf = conv_detail::grow(ws.col[t], size_t(rows) * cols);
        im2col(sh, xn, buf);
        col = buf;
      }
      gemm(prec, false, true, sh.K, rows, cols, T(1), dyn, cols, col, cols, T(1), pdw, rows);
    }
    if (pdb)
      for (int k = 0; k < sh.K; ++k)
        pdb[k] += T(conv_detail::sum_in_double(dyn + size_t(k) * cols, cols));
  }
  conv_detail::reduce_in_thread_order(ws.dw, ws.used, wcount, dw);
  if (db) conv_detail::reduce_in_thread_order(ws.db, ws.used, size_t(sh.K), db);
}

// ---- the choice of path -----------------------------------------------------------

// The bytes the workspace's packed weights (Conv2dWorkspace::w_packed) hold
// after a layer's passes in `prec`: the larger of the forward's and the input
// gradient's pack where they take the gemm path in bf16 on a bf16gemm path
// that packs A (amx, avx512_bf16), else 0. For memory estimates
// (Layer::workspace_bytes).
inline size_t conv2d_packed_weights_bytes(const Conv2dShape& sh, Precision prec) {
  if (prec != Precision::kBf16 || !bf16gemm_packs_a() ||
      conv2d_thin_applies(sh, prec))
    return 0;
  return std::max(bf16gemm_packed_a_words(sh.K, sh.col_rows()),
                  bf16gemm_packed_a_words(sh.col_rows(), sh.K)) *
         sizeof(uint32_t);
}

// Where conv2d_thin_applies(sh, prec) (fp32: kernels larger than 1x1 with
// K ≤ 16 or outputs at least 8 wide; bf16: larger than 1x1 with K ≤ 16) the
// direct kernels of conv2d_thin.h run, elsewhere im2col + gemm. Same
// contracts as above; `prec` is the model's precision (fp32 or, for float,
// bf16: the products' operands rounded to bf16, sums in FP32).
template <typename T>
void conv2d_forward(const Conv2dShape& sh, const T* x, const T* w, const T* b, T* y,
                    Conv2dWorkspace<T>& ws, Precision prec = Precision::kFp32) {
  if (conv2d_thin_applies(sh, prec))
    conv2d_thin_forward(sh, x, w, b, y, ws.thin, best_simd_level(), prec);
  else
    conv2d_gemm_forward(sh, x, w, b, y, ws, prec);
}

template <typename T>
void conv2d_backward_data(const Conv2dShape& sh, const T* dy, const T* w, T* dx,
                          Conv2dWorkspace<T>& ws, Precision prec = Precision::kFp32) {
  if (conv2d_thin_applies(sh, prec))
    conv2d_thin_backward_data(sh, dy, w, dx, ws.thin, best_simd_level(), prec);
  else
    conv2d_gemm_backward_data(sh, dy, w, dx, ws, prec);
}

template <typename T>
void conv2d_backward_params(const Conv2dShape& sh, const T* x, const T* dy, T* dw, T* db,
                            Conv2dWorkspace<T>& ws, Precision prec = Precision::kFp32) {
  if (conv2d_thin_applies(sh, prec))
    conv2d_thin_backward_params(sh, x, dy, dw, db, ws.thin, best_simd_level(), prec);
  else
    conv2d_gemm_backward_params(sh, x, dy, dw, db, ws, prec);
}

}  // namespace hpmc::cpu
