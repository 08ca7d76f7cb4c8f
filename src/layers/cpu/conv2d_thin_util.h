// conv2d_thin_util.h — what the thin convolutions' FP32 kernels
// (conv2d_thin.cpp) and bf16 kernels (conv2d_thin_bf16.cpp) share: sizes,
// buffers, the chunk and image-group rules, and the thread-ordered sum of
// the weight gradient's partials.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "layers/conv_shape.h"
#include "layers/cpu/conv2d_thin.h"

namespace hpmc::cpu::thin_detail {

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
inline int round_up(int a, int b) { return ceil_div(a, b) * b; }

// Channels per register tile: at most 4, as even as possible (K = 6 is two
// tiles of 3, not 4 + 2 with two ghost channels).
inline int channel_block(int channels) { return ceil_div(channels, ceil_div(channels, 4)); }

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// As grow, but the n values start on a 64-byte boundary: with rows padded to
// whole vectors, the input vectors of the unshifted taps do not straddle two
// cache lines.
template <typename T>
T* grow_aligned(std::vector<T>& v, size_t n) {
  constexpr size_t kAlign = 64;
  T* p = grow(v, n + kAlign / sizeof(T));
  const size_t mis = reinterpret_cast<uintptr_t>(p) % kAlign;
  return mis ? p + (kAlign - mis) / sizeof(T) : p;
}

// A chunk of channels is copied and then consumed by every tile of the image
// before the next chunk is copied, so the copy is still in L2 when read
// (Zen 5: 1 MiB per core; a 256-channel 34x34 copy would be 1.2 MiB).
constexpr size_t kChunkBytes = 256 << 10;

// Images summed at a time by the weight gradient: small output planes a
// group at a time, so that an accumulator takes 64 vectors or more before
// its lanes are reduced (an 8x8 plane alone gives it 8); at most the images
// a thread gets, so that the groups still spread over the threads.
// `vectors`: an output row's vectors.
inline int wgrad_group(int N, int P, int vectors, int threads) {
  constexpr int kWgradVectors = 64;
  return std::clamp(ceil_div(kWgradVectors, std::max(P * vectors, 1)), 1,
                    std::max(1, ceil_div(N, std::max(threads, 1))));
}

// dw += Σ_t ws.dw[t], db += Σ_t ws.db[t] (db may be null) over the threads
// that hold a partial, in thread order: the rounding does not depend on
// which thread finished first.
template <typename T>
void add_partials(const Conv2dThinWorkspace<T>& ws, size_t wcount, int K, T* dw, T* db) {
  const size_t nt = ws.used.size();
  for (size_t i = 0; i < wcount; ++i) {
    double acc = 0;
    for (size_t t = 0; t < nt; ++t)
      if (ws.used[t]) acc += ws.dw[t][i];
    dw[i] = T(double(dw[i]) + acc);
  }
  if (db)
    for (int k = 0; k < K; ++k) {
      double acc = 0;
      for (size_t t = 0; t < nt; ++t)
        if (ws.used[t]) acc += ws.db[t][k];
      db[k] = T(double(db[k]) + acc);
    }
}

}  // namespace hpmc::cpu::thin_detail
