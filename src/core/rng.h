// rng.h — hpmc's own deterministic random numbers.
//
// The standard library's distributions differ between implementations, so
// hpmc draws from SplitMix64-seeded xoshiro256** and turns bits into numbers
// itself: the same seed gives the same weights and the same data order on
// every platform and compiler.
#pragma once

#include <cstdint>
#include <vector>

namespace hpmc {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  // Seed from several values (e.g. seed, epoch) so streams do not overlap.
  Rng(uint64_t seed, uint64_t stream);

  void reseed(uint64_t seed);
  uint64_t next_u64();
  // Uniform in [0, 1) with 24 random bits (exactly representable in float).
  float uniform01();
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform01(); }
  // Uniform integer in [0, bound) without modulo bias.
  uint64_t below(uint64_t bound);
  // Standard normal (Box–Muller), for tests and synthetic data.
  double normal();

  // The full state, so a run can be checkpointed and resumed exactly.
  void get_state(uint64_t out[4]) const;
  void set_state(const uint64_t in[4]);

 private:
  uint64_t s_[4];
};

// A permutation of 0..n-1 (Fisher–Yates).
std::vector<int32_t> random_permutation(int32_t n, Rng& rng);

}  // namespace hpmc
