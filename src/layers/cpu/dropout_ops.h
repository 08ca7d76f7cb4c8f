// dropout_ops.h — inverted dropout in training mode, templated on the scalar
// so tests can run it in double for finite-difference checks; the CPU layer
// calls it with T = float. Eval mode is the identity and needs no op.
//
// Layout: any contiguous array of n elements; element i is the flat index in
// the N·C·H·W tensor, which is what the mask is drawn for (dropout_mask.h).
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

// out = keep ? in · scale : 0 over n elements: the forward (in = x) and the
// backward (in = dy) are the same map.
template <typename T>
void dropout_apply(const T* in, T* out, size_t n, const DropoutMask& mask, T scale) {
  const int64_t blocks = int64_t((n + 3) / 4);
#pragma omp parallel for schedule(static) if (n >= kDropoutParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const unsigned bits = mask.keep4(uint64_t(b));
    const size_t i0 = size_t(b) * 4;
    const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
    for (size_t i = i0; i < i1; ++i) out[i] = (bits >> (i - i0)) & 1u ? in[i] * scale : T(0);
  }
}

template <typename T>
void dropout_forward(const T* x, T* y, size_t n, double p, uint64_t seed, uint64_t stream,
                     uint64_t step) {
  dropout_apply(x, y, n, make_dropout_mask(p, seed, stream, step), dropout_scale<T>(p));
}

template <typename T>
void dropout_backward(const T* dy, T* dx, size_t n, double p, uint64_t seed, uint64_t stream,
                      uint64_t step) {
  dropout_apply(dy, dx, n, make_dropout_mask(p, seed, stream, step), dropout_scale<T>(p));
}

}  // namespace hpmc
