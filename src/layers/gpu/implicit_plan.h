// implicit_plan.h — the host-side choices of the implicit-GEMM family, as pure
// functions (no CUDA) so that tests can check them on any machine: which tile
// configuration a GEMM of M×N outputs runs with, and how backward_params
// splits its long reduction (split-K). conv2d_implicit_gemm.cu describes the
// tile configurations and the scheme.
#pragma once

#include <algorithm>

namespace hpmc::gpu::implicit_detail {

enum class Tile { kL, kS, kThinN, kThinM };  // 128×128, 64×64, 128×16, 16×128

inline long long tiles(long long extent, int tile) { return (extent + tile - 1) / tile; }

// GEMM_N ≤ 16 → ThinN; else GEMM_M ≤ 16 → ThinM; else the 128×128 tiles when
// their padding wastes at most 25% (padded M·N ≤ 1.25·M·N) and their blocks,
// times the split-K slices, give every one of the num_sms SMs at least one;
// else 64×64. The choice changes the speed only: every configuration adds
// each output's products in the same order, so the bits are the same.
inline Tile choose_tile(long long M, long long N, int slices, int num_sms) {
  if (N <= 16) return Tile::kThinN;
  if (M <= 16) return Tile::kThinM;
  const long long padded = tiles(M, 128) * 128 * tiles(N, 128) * 128;
  const long long blocks = tiles(M, 128) * tiles(N, 128) * slices;
  if (padded * 4 <= M * N * 5 && blocks >= num_sms) return Tile::kL;
  return Tile::kS;
}

// Split-K for backward_params, from the shape alone (never the device, so the
// bits are the same on any GPU): aim at kSplitTarget blocks counted in 64×64
// tiles, give every slice at least kMinTilesPerSplit k-tiles (of 8) unless
// there are fewer in all, at most kMaxSplits slices. Slice z covers k-tiles
// [z·tps, min((z+1)·tps, ktiles)); none is empty: (splits−1)·tps < ktiles.
constexpr long long kSplitTarget = 528;  // ≈ 4 blocks of 64×64 on each of 132 SMs
constexpr int kMaxSplits = 64;
constexpr int kMinTilesPerSplit = 8;

inline void choose_splits(long long M, long long N, int ktiles, int& splits, int& tps) {
  ktiles = std::max(ktiles, 1);
  const long long ref_blocks = std::max(1ll, tiles(M, 64) * tiles(N, 64));
  long long want = (kSplitTarget + ref_blocks - 1) / ref_blocks;
  const long long by_k = std::max(1, ktiles / kMinTilesPerSplit);
  want = std::max(1ll, std::min({want, (long long)kMaxSplits, by_k}));
  tps = int((ktiles + want - 1) / want);
  splits = int((ktiles + tps - 1) / tps);
}

}  // namespace hpmc::gpu::implicit_detail
