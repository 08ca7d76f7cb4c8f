#include "core/rng.h"

#include <cmath>
#include <numeric>

namespace hpmc {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed, uint64_t stream) {
  uint64_t x = seed;
  uint64_t mixed = splitmix64(x) ^ (stream * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull);
  reseed(mixed);
}

void Rng::reseed(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float Rng::uniform01() { return float(next_u64() >> 40) * (1.0f / 16777216.0f); }

uint64_t Rng::below(uint64_t bound) {
  if (bound <= 1) return 0;
  // Lemire's rejection method on 64-bit words (128-bit product).
  uint64_t x = next_u64();
  __uint128_t m = __uint128_t(x) * bound;
  uint64_t l = uint64_t(m);
  if (l < bound) {
    uint64_t t = (0 - bound) % bound;
    while (l < t) {
      x = next_u64();
      m = __uint128_t(x) * bound;
      l = uint64_t(m);
    }
  }
  return uint64_t(m >> 64);
}

double Rng::normal() {
  double u1 = (double(next_u64() >> 11) + 1.0) * (1.0 / 9007199254740993.0);  // (0, 1]
  double u2 = double(next_u64() >> 11) * (1.0 / 9007199254740992.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

void Rng::get_state(uint64_t out[4]) const {
  for (int i = 0; i < 4; ++i) out[i] = s_[i];
}
void Rng::set_state(const uint64_t in[4]) {
  for (int i = 0; i < 4; ++i) s_[i] = in[i];
}

std::vector<int32_t> random_permutation(int32_t n, Rng& rng) {
  std::vector<int32_t> p(size_t(n > 0 ? n : 0));
  std::iota(p.begin(), p.end(), 0);
  for (int32_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng.below(uint64_t(i) + 1)]);
  return p;
}

}  // namespace hpmc
