// augment_ops.h — the per-sample and per-element draws of training-time input
// transforms, shared by the CPU loops (data/augment.cpp) and the GPU kernels
// (layers/gpu/augment_kernels.cu). Every function is HPMC_HOST_DEVICE and a
// pure function of (key, step, index), with key = counter_key(training.seed,
// stream) (core/counter_rng.h): the CPU and the GPU draw the same decisions,
// and a resumed run draws what the uninterrupted run would have, with no
// generator state to save.
//
// Augmentation (data.augment), per sample of an NCHW batch, decided from
// (global step, position i in the batch): Philox block i of the step gives
// four words; word 0's top bit is the flip (P = 1/2 exactly), words 1 and 2
// pick the crop offsets dy, dx in [−p, p] (⌊w·(2p+1)/2³²⌋ − p: each offset's
// probability is within 2⁻³² of 1/(2p+1)). The output is torchvision's
// RandomCrop(size = (H, W), padding = p) — zero padding, top = dy + p,
// left = dx + p — followed by RandomHorizontalFlip:
//   y[i, ch, r, c] = x[i, ch, r + dy, c' + dx], c' = flip ? W−1−c : c,
// and 0 where r + dy or c' + dx falls outside the image.
//
// Input noise (training.input_noise), per element t = i·C·H·W + e of the
// batch, decided from (global step, t):
//   mask:     y = x, or 0 where counter_u32(key, step, t) < round(p·2³²)
//             (P(zero) = round(p·2³²)/2³², bit-identical on CPU and GPU);
//   gaussian: y = fma(std, z, x), z = √(−2 ln u₁)·cos(2π u₂) (Box–Muller),
//             with u₁ = (w₁ + 1)/2³² ∈ (0, 1], u₂ = w₂/2³² ∈ [0, 1) from words
//             2(t mod 2) and 2(t mod 2) + 1 of Philox block ⌊t/2⌋; |z| ≤ 6.67.
//             z is computed in double and rounded to float once; the CPU's and
//             the GPU's libm may differ in the last bit of a double log or cos,
//             which changes the float z only when it lies within a few double
//             ulps of a float rounding boundary (about one value in 10⁸), so
//             CPU and GPU agree bit for bit in practice and to 1 float ulp of z
//             always. The fma (one rounding) is explicit so that no compiler
//             contraction choice can differ between the two.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/counter_rng.h"

namespace hpmc {

// The counter streams of the input transforms: far from the layer indices
// that the layers' own streams use (Model::set_mode).
constexpr uint64_t kAugmentStream = 0x6175676d656e7400ull;     // "augment"
constexpr uint64_t kInputNoiseStream = 0x696e6e6f69736500ull;  // "innoise"

struct AugmentDraw {
  bool flip = false;
  int dy = 0, dx = 0;  // the crop's offset from the centre, each in [−pad, pad]
};

// ⌊word · n / 2³²⌋: a value in [0, n) from one 32-bit word.
HPMC_HOST_DEVICE inline uint32_t counter_below(uint32_t word, uint32_t n) {
  return uint32_t((uint64_t(word) * n) >> 32);
}

// The augmentation of batch position `sample` at `step`.
HPMC_HOST_DEVICE inline AugmentDraw augment_draw(uint64_t key, uint64_t step, uint64_t sample,
                                                 bool hflip, int pad) {
  const Philox4x32 b = counter_block(key, step, sample);
  AugmentDraw d;
  d.flip = hflip && (b.v[0] >> 31) != 0;
  if (pad > 0) {
    const uint32_t span = uint32_t(2 * pad + 1);
    d.dy = int(counter_below(b.v[1], span)) - pad;
    d.dx = int(counter_below(b.v[2], span)) - pad;
  }
  return d;
}

// The source offset (within one H×W plane) of output pixel (r, c) under `d`,
// or −1 where it falls in the zero padding.
HPMC_HOST_DEVICE inline long augment_source(const AugmentDraw& d, int r, int c, int h, int w) {
  const int sr = r + d.dy;
  const int sc = (d.flip ? w - 1 - c : c) + d.dx;
  if (sr < 0 || sr >= h || sc < 0 || sc >= w) return -1;
  return long(sr) * w + sc;
}

// Box–Muller's cosine branch from two 32-bit words (see above).
HPMC_HOST_DEVICE inline float gaussian_from_words(uint32_t w1, uint32_t w2) {
  const double u1 = (double(w1) + 1.0) * (1.0 / 4294967296.0);
  const double u2 = double(w2) * (1.0 / 4294967296.0);
  const double r = sqrt(-2.0 * log(u1));
  const double theta = 6.283185307179586 * u2;
  return float(r * cos(theta));
}

// The standard normal of element t at `step`: words 2(t mod 2), 2(t mod 2) + 1
// of Philox block ⌊t/2⌋ (a loop may draw the block once for both elements).
HPMC_HOST_DEVICE inline float gaussian_draw(uint64_t key, uint64_t step, uint64_t t) {
  const Philox4x32 b = counter_block(key, step, t >> 1);
  const int k = int(t & 1) * 2;
  return gaussian_from_words(b.v[k], b.v[k + 1]);
}

// The masking decision of element t at `step`: true keeps the value.
HPMC_HOST_DEVICE inline bool mask_keep(uint64_t key, uint64_t step, uint64_t t,
                                       uint64_t threshold) {
  return counter_keep(counter_u32(key, step, t), threshold);
}

}  // namespace hpmc
