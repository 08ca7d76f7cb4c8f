// dropout_mask.h — which elements dropout keeps, as one host-and-device
// description shared by the CPU ops (layers/cpu/dropout_ops.h) and the GPU
// kernels (layers/gpu/dropout_kernels.cu), so both draw the identical mask.
//
// The mask of a training step is a pure function of (seed, stream, step,
// element index) through the counter-based generator of core/counter_rng.h:
// element i (its flat index in the N·C·H·W tensor) is kept iff word i of
// Philox(key = counter_key(seed, stream), counter = (i / 4, step)) is at least
// round(p · 2^32). Nothing is stored: backward and a resumed run recompute
// the same mask from the same counters.
//
// Inverted dropout, as PyTorch's nn.Dropout in training mode:
//   y = keep ? x · scale : 0,   dx = keep ? dy · scale : 0,
// scale = 1 / (1 − p) rounded once to the scalar type (PyTorch multiplies by
// the float 1/(1 − p) too). p = 1 drops everything (y = 0), p = 0 keeps all.
#pragma once

#include <cstdint>

#include "core/counter_rng.h"

namespace hpmc {

struct DropoutMask {
  uint64_t key = 0;        // counter_key(seed, stream)
  uint64_t step = 0;       // the training step (the optimizer's step count)
  uint64_t threshold = 0;  // drop_threshold(p)

  // Keep bits of elements 4·block .. 4·block + 3 (bit k for element 4·block + k).
  HPMC_HOST_DEVICE unsigned keep4(uint64_t block) const {
    const Philox4x32 r = counter_block(key, step, block);
    unsigned bits = 0;
    for (int k = 0; k < 4; ++k) bits |= counter_keep(r.v[k], threshold) ? 1u << k : 0u;
    return bits;
  }
  HPMC_HOST_DEVICE bool keep(uint64_t index) const {
    return counter_keep(counter_u32(key, step, index), threshold);
  }
};

inline DropoutMask make_dropout_mask(double p, uint64_t seed, uint64_t stream, uint64_t step) {
  return DropoutMask{counter_key(seed, stream), step, drop_threshold(p)};
}

// 1 / (1 − p) in the scalar type; 0 for p = 1 (every element is dropped, so
// the value is never used).
template <typename T>
T dropout_scale(double p) {
  return p >= 1.0 ? T(0) : T(1.0 / (1.0 - p));
}

}  // namespace hpmc
