// bf16.cpp — the array form of bf16 rounding (bf16.h).
#include "core/bf16.h"

namespace hpmc {

void round_bf16(const float* src, float* dst, size_t n) {
  // A branch-free copy of bf16_bits on the bits, so that the loop vectorises.
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

}  // namespace hpmc
