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

// ---- thin convolutions: K ≤ 4 output channels (conv2d_thin.cu) ------------------------
//
// A convolution with few output channels (an autoencoder's last layer, 256 → 3)
// is a GEMM with GEMM_N = K ≤ 4 in forward and GEMM_M = K in backward_params:
// the tiled engine wastes most of its 16-wide thin tile and its per-k-tile
// barriers on it. Such layers get their own kernels instead:
//   kFast3x3  3×3, stride 1, pad 1, W % 4 == 0 and the pass's tensors 16-byte
//             aligned: register windows fed by float4 loads along W, the K
//             channels' weights broadcast from shared memory;
//   kGeneric  any other R, S, stride, pad, W (R·S ≤ kThinMaxTaps: the weights of
//             one channel fit the kernels' shared-memory staging);
//   kNone     K > 4 (or R·S too large): the implicit GEMM.
// Each pass asks with the alignment of its own tensors (forward: x, y;
// backward_data: dy, dx; backward_params: x, dy).
enum class ThinPath { kNone, kGeneric, kFast3x3 };
constexpr int kThinMaxK = 4;
constexpr int kThinMaxTaps = 64;

inline ThinPath choose_thin(int K, int R, int S, int stride, int pad, int W, bool aligned16) {
  if (K < 1 || K > kThinMaxK || R < 1 || S < 1 || (long long)R * S > kThinMaxTaps)
    return ThinPath::kNone;
  if (R == 3 && S == 3 && stride == 1 && pad == 1 && W % 4 == 0 && aligned16)
    return ThinPath::kFast3x3;
  return ThinPath::kGeneric;
}

// Split of the thin weight gradient's reduction: `items` units of work (warp
// tiles or pixels) over slices of `per` consecutive units, next to `gx` blocks
// per slice. Aims at kSplitTarget blocks in all, at most kMaxSplits slices, at
// least `min_items` units per slice unless there are fewer in all; no slice is
// empty: (splits − 1)·per < items ≤ splits·per. A function of the shape only,
// so the bits of dw do not depend on the device.
inline void choose_thin_splits(long long gx, long long items, long long min_items, int& splits,
                               long long& per) {
  items = std::max(items, 1ll);
  gx = std::max(gx, 1ll);
  long long want = (kSplitTarget + gx - 1) / gx;
  const long long by_items = std::max(1ll, items / std::max(min_items, 1ll));
  want = std::max(1ll, std::min({want, (long long)kMaxSplits, by_items}));
  per = (items + want - 1) / want;
  splits = int((items + per - 1) / per);
}

}  // namespace hpmc::gpu::implicit_detail
