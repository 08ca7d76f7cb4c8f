// implicit_fastdiv.h — division by a run-time invariant divisor through one
// multiply-high, add and shift, for the implicit-GEMM index arithmetic
// (k → (c, r, s), m → (n, p, q) once per element and tile).
//
// Granlund & Montgomery's round-up method ("Division by invariant integers
// using multiplication", 1994, §4): for a divisor 1 ≤ d < 2^31 let
// l = ceil(log2 d) and mul = floor(2^32·(2^l − d)/d) + 1 (< 2^32, see below);
// then for every 0 ≤ x < 2^31
//     x / d == (umulhi(x, mul) + x) >> l.
// The sum umulhi(x, mul) + x stays below 2^32 because umulhi(x, mul) ≤ x <
// 2^31, so 32-bit unsigned arithmetic suffices. mul < 2^32: 2^l < 2d gives
// 2^32·(2^l − d)/d < 2^32, and equality of the floor with 2^32 − 1 would need
// the integer 2d − 2^l to lie in (0, 1). d = 1 gives l = 0, mul = 1: x.
//
// Dividends must be in [0, 2^31); the callers clamp negative values first and
// the host code rejects problems whose indices do not fit an int.
// Plain data, usable on the host (tests check it against '/') and the device.
#pragma once

#include <cstdint>

#include "layers/conv_shape.h"  // HPMC_HOST_DEVICE

namespace hpmc::gpu::implicit_detail {

struct FastDiv {
  uint32_t d = 1;    // the divisor
  uint32_t mul = 1;  // the magic multiplier
  uint32_t shift = 0;

  FastDiv() = default;
  // d must be in [1, 2^31); the host callers guarantee it.
  explicit FastDiv(int divisor) {
    d = uint32_t(divisor < 1 ? 1 : divisor);
    uint32_t l = 0;
    while ((uint64_t(1) << l) < d) ++l;  // l = ceil(log2 d), ≤ 31
    shift = l;
    mul = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << l) - d)) / d + 1);
  }

  HPMC_HOST_DEVICE uint32_t div(uint32_t x) const {
#if defined(__CUDA_ARCH__)
    uint32_t hi = __umulhi(x, mul);
#else
    uint32_t hi = uint32_t((uint64_t(x) * mul) >> 32);
#endif
    return (hi + x) >> shift;
  }
  // q = x / d and r = x − q·d.
  HPMC_HOST_DEVICE void divmod(int x, int& q, int& r) const {
    q = int(div(uint32_t(x)));
    r = x - q * int(d);
  }
};

}  // namespace hpmc::gpu::implicit_detail
