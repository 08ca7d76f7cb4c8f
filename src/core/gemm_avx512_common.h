// gemm_avx512_common.h — what hpmc's two AVX-512 GEMM kernels share: the
// float SGEMM (sgemm_avx512.cpp) and the bf16 GEMM (bf16gemm_avx512.cpp).
//
// Both are BLIS loops around a register-blocked micro-kernel whose C tile is
// kMR rows × NR = 16·NV columns held in kMR·NV zmm accumulators: the same
// tile shapes (choose_nv), the same K cut (kblocks_for: near-equal blocks
// decided by K alone, for the determinism sgemm.h and bf16gemm.h state),
// the same C store (alpha · acc + beta · C, C unread when beta == 0), the
// same grow-only pack buffers and the same 32-bit register transposes (a bf16
// operand is packed as 32-bit pairs of K neighbours, so its packs transpose
// the same way as floats).
//
// Include only from x86-64 GCC or Clang translation units: every function
// carries its own target attribute, so the build's -march does not matter.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>

#define HPMC_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#define HPMC_AVX512_INLINE HPMC_AVX512 inline __attribute__((always_inline))

namespace hpmc::gemm_avx512 {

constexpr int kMR = 8;  // rows of a C tile (broadcasts of A per k)

// A 64-byte aligned, grow-only scratch buffer of T; one per thread for each
// pack (thread_local in each kernel's file).
template <typename T>
class PackBuffer {
 public:
  PackBuffer() = default;
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;
  ~PackBuffer() { std::free(data_); }

  T* get(size_t count) {
    if (count > capacity_) {
      std::free(data_);
      data_ = nullptr;
      capacity_ = 0;
      size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
      data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
      if (!data_) throw std::bad_alloc();
      capacity_ = count;
    }
    return data_;
  }

 private:
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

// The number of K blocks for a reduction of `k` steps (floats, or bf16
// pairs) in blocks of at most `kc`: the cut depends on k alone.
inline int kblocks_for(int k, int kc) { return (k + kc - 1) / kc; }

// The tile width that pads N the least, counting a narrower tile's lower
// FMA-to-load ratio (0.94: a rough figure, not tuned).
inline int choose_nv(int n) {
  if (n <= 16) return 1;
  const double cost2 = double((n + 31) / 32 * 32) / 0.94;
  const double cost3 = double((n + 47) / 48 * 48);
  return cost2 < cost3 ? 2 : 3;
}

// C = beta · C, for the products with nothing to sum (k == 0 or alpha == 0).
inline void scale_c(int m, int n, float beta, float* c, ptrdiff_t ldc) {
  for (int i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.f)
      std::fill(row, row + n, 0.f);
    else if (beta != 1.f)
      for (int j = 0; j < n; ++j) row[j] *= beta;
  }
}

// dst[c·ldd + r] = src[r·lds + c] for r < 8, c < cols (1..8): eight rows of
// eight floats turned into eight columns. Source rows at and past `rows` read
// as zeros (and are never touched).
HPMC_AVX512_INLINE void transpose8x8(const float* src, ptrdiff_t lds, int rows, int cols,
                                     float* dst, ptrdiff_t ldd) {
  const __mmask8 mask = __mmask8((1u << cols) - 1);
  __m256 r[8];
  for (int i = 0; i < 8; ++i)
    r[i] = i < rows ? _mm256_maskz_loadu_ps(mask, src + i * lds) : _mm256_setzero_ps();
  // Interleave pairs of rows, then pairs of pairs, then swap 128-bit halves.
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  __m256 out[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                   _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                   _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                   _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
  for (int c = 0; c < cols; ++c) _mm256_storeu_ps(dst + c * ldd, out[c]);
}

// out[c][r] = r[r][c] for r < 8, c < 16: eight rows of sixteen floats turned
// into sixteen rows of eight, in registers.
HPMC_AVX512_INLINE void transpose8x16(const __m512 r[8], __m256 out[16]) {
  // In each 128-bit lane L: t pairs rows at columns 4L.., u gathers rows
  // 0-3 (u[q]) and 4-7 (u[4 + q]) of column 4L + q.
  __m512 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {
    u[h + 0] = _mm512_shuffle_ps(t[h], t[h + 2], 0x44);
    u[h + 1] = _mm512_shuffle_ps(t[h], t[h + 2], 0xEE);
    u[h + 2] = _mm512_shuffle_ps(t[h + 1], t[h + 3], 0x44);
    u[h + 3] = _mm512_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
  }
  // Join the halves of a column: lanes 0, 1 → columns q, 4 + q; lanes 2, 3 →
  // columns 8 + q, 12 + q, one per 256-bit half.
  const __m512i lanes01 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i lanes23 =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int q = 0; q < 4; ++q) {
    const __m512 w0 = _mm512_permutex2var_ps(u[q], lanes01, u[4 + q]);
    const __m512 w1 = _mm512_permutex2var_ps(u[q], lanes23, u[4 + q]);
    out[q] = _mm512_castps512_ps256(w0);
    out[4 + q] = _mm512_extractf32x8_ps(w0, 1);
    out[8 + q] = _mm512_castps512_ps256(w1);
    out[12 + q] = _mm512_extractf32x8_ps(w1, 1);
  }
}

// dst[c·ldd + r] = src[r·lds + c] for r < 8, c < 16: the full-size case of
// the packs' transposes (whole cache lines in), about twice as fast per
// float as 8×8.
HPMC_AVX512_INLINE void transpose8x16(const float* src, ptrdiff_t lds, float* dst, ptrdiff_t ldd) {
  __m512 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  __m256 out[16];
  transpose8x16(r, out);
  for (int c = 0; c < 16; ++c) _mm256_storeu_ps(dst + c * ldd, out[c]);
}

// dst[c·ldd + r] = src[r·lds + c] for c < cols (a K run), r < 8 (source rows
// at and past `rows` read as zeros).
HPMC_AVX512_INLINE void transpose_rows8(const float* src, ptrdiff_t lds, int rows, int cols,
                                        float* dst, ptrdiff_t ldd) {
  int c = 0;
  if (rows == 8)
    for (; c + 16 <= cols; c += 16) transpose8x16(src + c, lds, dst + c * ldd, ldd);
  for (; c < cols; c += 8)
    transpose8x8(src + c, lds, rows, std::min(8, cols - c), dst + c * ldd, ldd);
}

// The store of a kMR × NR tile: C(i, 16v + t) = alpha · acc[i][v][t] +
// beta · C (C not read when beta == 0), for the mr ≤ kMR rows and nr ≤ NR
// columns that lie inside C.
template <int NV>
HPMC_AVX512_INLINE void store_tile(const __m512 (&acc)[kMR][NV], float* c, ptrdiff_t ldc, int mr,
                                   int nr, float alpha, float beta) {
  constexpr int NR = 16 * NV;
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  if (mr == kMR && nr == NR) {
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        float* cp = c + i * ldc + 16 * v;
        __m512 r = beta == 0.f
                       ? _mm512_mul_ps(va, acc[i][v])
                       : _mm512_fmadd_ps(va, acc[i][v], _mm512_mul_ps(vb, _mm512_loadu_ps(cp)));
        _mm512_storeu_ps(cp, r);
      }
    return;
  }
  __mmask16 mask[NV];
  for (int v = 0; v < NV; ++v) {
    int left = std::clamp(nr - 16 * v, 0, 16);
    mask[v] = __mmask16((1u << left) - 1);
  }
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
    if (i >= mr) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* cp = c + i * ldc + 16 * v;
      __m512 r = beta == 0.f
                     ? _mm512_mul_ps(va, acc[i][v])
                     : _mm512_fmadd_ps(va, acc[i][v],
                                       _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(mask[v], cp)));
      _mm512_mask_storeu_ps(cp, mask[v], r);
    }
  }
}

// The store of a tile of C^T: acc[i][v] holds C^T(i, 16v..16v+15), that is
// C(16v + t, i); each C row gets kMR neighbours (mr of them valid), written
// as alpha · acc + beta · C with C not read when beta == 0.
template <int NV>
HPMC_AVX512_INLINE void store_transposed(const __m512 (&acc)[kMR][NV], float* c, ptrdiff_t ldc,
                                         int mr, int nr, float alpha, float beta) {
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  const __mmask8 mask = __mmask8((1u << mr) - 1);
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    const int rows = std::min(16, nr - 16 * v);
    if (rows <= 0) break;
    __m512 r[8];
    for (int i = 0; i < kMR; ++i) r[i] = acc[i][v];
    __m256 out[16];
    transpose8x16(r, out);
    for (int t = 0; t < rows; ++t) {
      float* cp = c + (16 * v + t) * ldc;
      __m256 x = beta == 0.f ? _mm256_mul_ps(va, out[t])
                             : _mm256_fmadd_ps(va, out[t],
                                               _mm256_mul_ps(vb, _mm256_maskz_loadu_ps(mask, cp)));
      _mm256_mask_storeu_ps(cp, mask, x);
    }
  }
}

}  // namespace hpmc::gemm_avx512
