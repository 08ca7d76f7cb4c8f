// bf16_pack_avx512.h — float operands to bf16 pairs with AVX512_BF16: the
// packing primitives of the two bf16 GEMM kernels, bf16gemm_avx512.cpp's
// micro-panels and bf16gemm_amx.cpp's tiles (bf16gemm.h).
//
// A PAIR is the bf16 values of op(X) at k = 2p and 2p + 1 in one 32-bit word,
// k = 2p in the low half: the word vdpbf16ps and TDPBF16PS multiply. The
// conversion is vcvtne2ps2bf16, which rounds as bf16.h does (round to
// nearest even, denormals to zero; tests/test_bf16.cpp holds them together).
// pack_rows8 takes memory rows whose K runs along memory; pack_cols and
// pack_cols8 memory rows that run across K, two at a time. pack_rows8 and
// pack_cols read plain rows or a Bf16ShiftedB's (bf16gemm.h) through the
// same code.
//
// Include only from x86-64 GCC or Clang translation units: every function
// carries its own target attribute, so the build's -march does not matter.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/bf16gemm.h"
#include "core/gemm_avx512_common.h"

#define HPMC_BF16 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma")))
#define HPMC_BF16_INLINE HPMC_BF16 inline __attribute__((always_inline))

namespace hpmc::bf16_pack {

using gemm_avx512::transpose8x16;

inline __mmask16 low_mask16(int n) { return __mmask16((1u << std::clamp(n, 0, 16)) - 1); }

// Where the packs read memory row r (a row of the stored operand), 16
// values from position j under a mask: plain rows at src + r·lds, or a
// Bf16ShiftedB's rows (ShiftedRows). row(r) resolves a row, advance moves a
// resolved row to the next (without a division for ShiftedRows); load reads
// from it. Positions the mask leaves out read as zeros and are not touched.
struct PlainRows {
  const float* src;
  ptrdiff_t lds;
  struct Row {
    const float* p;
  };
  Row row(int r) const { return {src + r * lds}; }
  void advance(Row& row) const { row.p += lds; }
  HPMC_BF16_INLINE __m512 load(const Row& row, int j, __mmask16 m) const {
    return _mm512_maskz_loadu_ps(m, row.p + j);
  }
};

// Bits j .. j + 15 of a bitset (bit j of word j / 64 at j % 64; the word after
// j's is read when the 16 bits cross into it).
inline __mmask16 bits16(const uint64_t* bits, ptrdiff_t j) {
  const ptrdiff_t w = j >> 6;
  const int s = int(j & 63);
  uint64_t v = bits[w] >> s;
  if (s > 48) v |= bits[w + 1] << (64 - s);
  return __mmask16(v & 0xFFFF);
}

// Memory row r is stored row row0 + r of a Bf16ShiftedB, from column col0.
struct ShiftedRows {
  const Bf16ShiftedB* b;
  int row0;
  ptrdiff_t col0;
  struct Row {
    const float* p;     // the row's column col0 (masked positions never read)
    const uint64_t* m;  // the tap's mask
    int g, t;           // its group and tap
  };
  Row row(int r) const {
    const int i = row0 + r, g = i / b->group;
    return resolve(g, i - g * b->group);
  }
  void advance(Row& row) const {
    row = row.t + 1 < b->group ? resolve(row.g, row.t + 1) : resolve(row.g + 1, 0);
  }
  Row resolve(int g, int t) const {
    return {b->x + g * b->group_stride + b->offset[t] + col0,
            b->mask + ptrdiff_t(t) * b->mask_words, g, t};
  }
  HPMC_BF16_INLINE __m512 load(const Row& row, int j, __mmask16 m) const {
    return _mm512_maskz_loadu_ps(m & bits16(row.m, col0 + j), row.p + j);
  }
};

// dst[p·ldd + r] = pair p of memory row r, i.e. the values at k = 2p and
// 2p + 1 of the rows `src` reads, as bf16, for r < 8 and p < (kc + 1) / 2:
// eight rows whose K runs along memory, turned into pairs and transposed.
// Rows at and past `rows`, and k at and past kc, read as zeros.
template <class Rows>
HPMC_BF16_INLINE void pack_rows8(const Rows& src, int rows, int kc, uint32_t* dst, ptrdiff_t ldd) {
  typename Rows::Row row[8];
  if (rows > 0) row[0] = src.row(0);
  for (int i = 1; i < rows && i < 8; ++i) {
    row[i] = row[i - 1];
    src.advance(row[i]);
  }
  for (int k0 = 0; k0 < kc; k0 += 32) {
    const int left = std::min(32, kc - k0);
    const __mmask16 m0 = low_mask16(left), m1 = low_mask16(left - 16);
    __m512 r[8];
    for (int i = 0; i < 8; ++i) {
      if (i >= rows) {
        r[i] = _mm512_setzero_ps();
        continue;
      }
      const __m512bh w =
          _mm512_cvtne2ps_pbh(src.load(row[i], k0 + 16, m1), src.load(row[i], k0, m0));
      r[i] = _mm512_castsi512_ps((__m512i)w);
    }
    __m256 out[16];
    transpose8x16(r, out);
    const int pairs = (left + 1) / 2;
    for (int p = 0; p < pairs; ++p)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (k0 / 2 + p) * ldd),
                          _mm256_castps_si256(out[p]));
  }
}

// The same for plain rows: pairs of src[r·lds + 2p], src[r·lds + 2p + 1].
HPMC_BF16_INLINE void pack_rows8(const float* src, ptrdiff_t lds, int rows, int kc, uint32_t* dst,
                                 ptrdiff_t ldd) {
  pack_rows8(PlainRows{src, lds}, rows, kc, dst, ldd);
}

// dst[p·ldd + j] = pair p of column j, i.e. memory rows 2p and 2p + 1 of
// `src` at j as bf16, for j < 16·NV and p < (kc + 1) / 2: memory rows that
// run across K, two at a time, their halves interleaved. Columns at and past
// `cols`, and the row after an odd kc, read as zeros.
template <int NV, class Rows>
HPMC_BF16_INLINE void pack_cols(const Rows& src, int cols, int kc, uint32_t* dst, ptrdiff_t ldd) {
  // Word 2j of the result is word j of the even row, word 2j + 1 word j of
  // the odd one (at 16 + j in cvtne2ps2bf16's output).
  const __m512i interleave = _mm512_set_epi16(
      31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19,
      3, 18, 2, 17, 1, 16, 0);
  __mmask16 mask[NV];
  for (int v = 0; v < NV; ++v) mask[v] = low_mask16(cols - 16 * v);
  typename Rows::Row next = src.row(0);
  for (int p = 0; 2 * p < kc; ++p) {
    const typename Rows::Row even = next;
    const bool has_odd = 2 * p + 1 < kc;
    typename Rows::Row odd = even;
    if (has_odd) src.advance(odd);
    next = odd;
    if (2 * p + 2 < kc) src.advance(next);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __m512 lo = src.load(even, 16 * v, mask[v]);
      const __m512 hi = has_odd ? src.load(odd, 16 * v, mask[v]) : _mm512_setzero_ps();
      const __m512i w = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
      _mm512_storeu_si512(dst + p * ldd + 16 * v, _mm512_permutexvar_epi16(interleave, w));
    }
  }
}

// The same for plain rows: pairs of src[2p·lds + j], src[(2p + 1)·lds + j].
template <int NV>
HPMC_BF16_INLINE void pack_cols(const float* src, ptrdiff_t lds, int cols, int kc, uint32_t* dst,
                                ptrdiff_t ldd) {
  pack_cols<NV>(PlainRows{src, lds}, cols, kc, dst, ldd);
}

// The 8-column form of pack_cols, for the micro-panels of a transposed A.
HPMC_BF16_INLINE void pack_cols8(const float* src, ptrdiff_t lds, int cols, int kc, uint32_t* dst,
                                 ptrdiff_t ldd) {
  const __m256i interleave =
      _mm256_set_epi16(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
  const __mmask8 mask = __mmask8((1u << cols) - 1);
  for (int p = 0; 2 * p < kc; ++p) {
    const float* even = src + 2 * p * lds;
    const __m256 lo = _mm256_maskz_loadu_ps(mask, even);
    const __m256 hi =
        2 * p + 1 < kc ? _mm256_maskz_loadu_ps(mask, even + lds) : _mm256_setzero_ps();
    const __m256i w = (__m256i)_mm256_cvtne2ps_pbh(hi, lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + p * ldd),
                        _mm256_permutexvar_epi16(interleave, w));
  }
}

}  // namespace hpmc::bf16_pack
