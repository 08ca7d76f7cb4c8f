// counter_rng.h — a counter-based random generator: Philox-4x32-10 (Salmon et
// al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), written from the
// published algorithm and checked against its known-answer vectors
// (tests/test_bn_dropout.cpp).
//
// A counter-based generator is a keyed bijection of a 128-bit counter: the
// random word for (key, counter) is a pure function of the two, so any element
// of any step can be drawn in any order, by any thread, on the CPU or the GPU,
// with the same result and no state to save in a checkpoint. Dropout draws its
// mask this way (layers/cpu/dropout_ops.h): key = counter_key(seed, stream),
// counter = (element index / 4, step), word = element index mod 4.
//
// Every function is HPMC_HOST_DEVICE and uses only 32/64-bit integer
// arithmetic, so the CPU and the GPU produce identical bits.
#pragma once

#include <cstdint>

#ifndef HPMC_HOST_DEVICE
#if defined(__CUDACC__)
#define HPMC_HOST_DEVICE __host__ __device__
#else
#define HPMC_HOST_DEVICE
#endif
#endif

namespace hpmc {

struct Philox4x32 {
  uint32_t v[4];
};

// Philox-4x32 with R rounds (R = 10 is the standard, "Crush-resistant"
// choice). Round: (c0, c1, c2, c3) → (hi(M1·c2) ^ c1 ^ k0, lo(M1·c2),
// hi(M0·c0) ^ c3 ^ k1, lo(M0·c0)); the key is bumped by the Weyl constants
// (W0, W1) between rounds.
HPMC_HOST_DEVICE inline Philox4x32 philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                              uint32_t k0, uint32_t k1, int rounds = 10) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = uint64_t(kM0) * c0, p1 = uint64_t(kM1) * c2;
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return Philox4x32{{c0, c1, c2, c3}};
}

// SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
HPMC_HOST_DEVICE inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The 64-bit Philox key of one random stream (e.g. one dropout layer) of a
// run's seed. Streams of one seed get unrelated keys; a different seed with
// some stream colliding on the same key needs a 64-bit hash collision.
HPMC_HOST_DEVICE inline uint64_t counter_key(uint64_t seed, uint64_t stream) {
  return splitmix64_mix(seed ^ splitmix64_mix(stream + 0x9E3779B97F4A7C15ull));
}

// The 32-bit random word of element `index` at step `step` under `key`:
// word (index mod 4) of Philox(counter = (index / 4 as two 32-bit halves,
// step as two halves), key). Four consecutive elements share one Philox call,
// which a caller may exploit by calling counter_block once per four elements.
HPMC_HOST_DEVICE inline Philox4x32 counter_block(uint64_t key, uint64_t step, uint64_t block) {
  return philox4x32(uint32_t(block), uint32_t(block >> 32), uint32_t(step), uint32_t(step >> 32),
                    uint32_t(key), uint32_t(key >> 32));
}
HPMC_HOST_DEVICE inline uint32_t counter_u32(uint64_t key, uint64_t step, uint64_t index) {
  return counter_block(key, step, index >> 2).v[index & 3];
}

// Bernoulli keep/drop against a threshold on the 32-bit word: a word below
// `threshold` means "drop", so P(drop) = threshold / 2^32 exactly.
// threshold = round(p · 2^32), a uint64 in [0, 2^32] (2^32: always drop).
HPMC_HOST_DEVICE inline uint64_t drop_threshold(double p) {
  if (!(p > 0.0)) return 0;
  if (p >= 1.0) return uint64_t(1) << 32;
  return uint64_t(p * 4294967296.0 + 0.5);
}
HPMC_HOST_DEVICE inline bool counter_keep(uint32_t word, uint64_t threshold) {
  return uint64_t(word) >= threshold;
}

}  // namespace hpmc
