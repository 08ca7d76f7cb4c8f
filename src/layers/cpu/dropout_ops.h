// dropout_ops.h — inverted dropout in training mode, templated on the scalar
// so tests can run it in double for finite-difference checks; the CPU layer
// calls it with T = float. Eval mode is the identity and needs no op.
//
// Layout: any contiguous array of n elements; element i is the flat index in
// the N·C·H·W tensor, which is what the mask is drawn for (dropout_mask.h),
// counted from `base`: a shard of a larger batch (LayerMode::first) passes
// the flat index of its first element there, and draws the whole batch's mask.
// Forward:  y = keep(i) ? x · scale : 0, scale = T(1 / (1 − p)).
// Backward: dx = keep(i) ? dy · scale : 0 (the same mask, recomputed from the
//           counters); dx is overwritten.
// Each element is one multiply, so the GPU kernels give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "layers/dropout_mask.h"

namespace hpmc {

// Below this many elements a parallel region costs more than it saves.
constexpr size_t kDropoutParallelMin = size_t(1) << 14;

// out = keep ? in · scale : 0 over n elements, element i drawn as index
// base + i: the forward (in = x) and the backward (in = dy) are the same map.
template <typename T>
void dropout_apply(const T* in, T* out, size_t n, const DropoutMask& mask, T scale,
                   uint64_t base = 0) {
  // The Philox blocks of four that cover indices [base, base + n).
  const uint64_t first = base / 4;
  const int64_t blocks = int64_t((base + n + 3) / 4 - first);
#pragma omp parallel for schedule(static) if (n >= kDropoutParallelMin)
  for (int64_t k = 0; k < blocks; ++k) {
    const uint64_t b = first + uint64_t(k);
    const unsigned bits = mask.keep4(b);
    const uint64_t g0 = 4 * b < base ? base : 4 * b;
    const uint64_t g1 = 4 * b + 4 < base + n ? 4 * b + 4 : base + n;
    for (uint64_t g = g0; g < g1; ++g) {
      const size_t i = size_t(g - base);
      out[i] = (bits >> (g - 4 * b)) & 1u ? in[i] * scale : T(0);
    }
  }
}

template <typename T>
void dropout_forward(const T* x, T* y, size_t n, double p, uint64_t seed, uint64_t stream,
                     uint64_t step, uint64_t base = 0) {
  dropout_apply(x, y, n, make_dropout_mask(p, seed, stream, step), dropout_scale<T>(p), base);
}

template <typename T>
void dropout_backward(const T* dy, T* dx, size_t n, double p, uint64_t seed, uint64_t stream,
                      uint64_t step, uint64_t base = 0) {
  dropout_apply(dy, dx, n, make_dropout_mask(p, seed, stream, step), dropout_scale<T>(p), base);
}

}  // namespace hpmc
