// bf16.cpp — the array form of bf16 rounding (bf16.h): vcvtneps2bf16 where
// the CPU has AVX512_BF16 (the same rule, tests/test_bf16.cpp holds them
// together), else bf16.h's rule on the bits, written to vectorise.
#include "core/bf16.h"

#include "core/bf16gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined (GCC bug 105593, fixed in
// GCC 13). Quieted for this file only, as in sgemm_avx512.cpp.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace hpmc {

namespace {

void round_portable(const float* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, sizeof u);
    const uint32_t mag = u & 0x7fffffffu;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    const uint32_t nan = (u | 0x00400000u) & 0xffff0000u;
    const uint32_t zero = u & 0x80000000u;
    const uint32_t r = mag > 0x7f800000u ? nan : (u & 0x7f800000u) == 0 ? zero : rounded;
    std::memcpy(dst + i, &r, sizeof r);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// 16 floats at a time: to bf16 and back (a bf16 is the top half of its
// float), the tail under a mask.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void round_avx512bf16(const float* src,
                                                                              float* dst,
                                                                              size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i b = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    const __m256i b = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
    _mm512_mask_storeu_epi32(dst + i, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
}
#endif

}  // namespace

void round_bf16(const float* src, float* dst, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (bf16gemm_avx512_supported()) {
    round_avx512bf16(src, dst, n);
    return;
  }
#endif
  round_portable(src, dst, n);
}

}  // namespace hpmc
