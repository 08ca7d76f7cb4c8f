// bf16.h — bfloat16 rounding: the one rule every bf16 path of hpmc uses.
//
// bfloat16 is the top half of an IEEE float32: sign, the same 8-bit exponent,
// 7 stored mantissa bits (unit roundoff u = 2^-8). A float32 becomes bf16 as
// AVX512_BF16's conversions (vcvtneps2bf16, vcvtne2ps2bf16) make it, so that
// the AVX512_BF16 GEMM and the portable path round operands alike:
//   * round to nearest, ties to even, on the 16 dropped bits; a value past the
//     largest bf16 rounds to infinity, infinities stay infinities;
//   * NaN stays NaN: its top 16 bits with the quiet bit set (payload cut);
//   * a float32 denormal (exponent field 0) becomes a zero of its sign, as
//     the instructions treat denormal inputs as zero. No normal float32
//     rounds to a bf16 denormal (the exponent ranges are equal).
// tests/test_bf16.cpp holds these against the instruction where the CPU has it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hpmc {

// The bf16 bit pattern of x.
inline uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // NaN: quiet it
  if ((u & 0x7f800000u) == 0) return uint16_t((u >> 16) & 0x8000u);         // zero, denormal
  // Ties to even: add 0x7fff plus the lowest kept bit, then drop 16 bits.
  // A carry out of the mantissa raises the exponent, up to infinity.
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// The float32 a bf16 bit pattern stands for (exact).
inline float bf16_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// x rounded to bf16, as a float32.
inline float round_bf16(float x) { return bf16_to_float(bf16_bits(x)); }

// dst[i] = round_bf16(src[i]) for i < n; dst may be src.
void round_bf16(const float* src, float* dst, size_t n);

}  // namespace hpmc
