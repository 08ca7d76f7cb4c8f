// implicit_plan.h — the host-side choices of the implicit-GEMM family, as pure
// functions (no CUDA) so that tests can check them on any machine: which tile
// configuration a GEMM of M×N outputs runs with, how the passes split their
// reduction (split-K), which GEMM_K order forward and backward_data use, and
// the thin-convolution routing. conv2d_implicit_gemm.cu describes the tile
// configurations and the schemes.
#pragma once

#include <algorithm>

#include "layers/conv_shape.h"

namespace hpmc::gpu::implicit_detail {

// 128×128, 128×64, 64×64, 128×16, 16×128 on the engine of implicit_gemm_core.cuh;
// 128×256, 256×128, 128×128 (4 warps), 128×128 (8 warps) on the wide engine
// (implicit_gemm_wide.cuh). conv2d_implicit_gemm.cu describes them.
enum class Tile { kL, kM, kS, kThinN, kThinM, kWN, kWM, kWQ, kWL };

// The block tile's extent along GEMM_M and GEMM_N.
constexpr int tile_bm(Tile t) {
  switch (t) {
    case Tile::kL: case Tile::kM: case Tile::kThinN: case Tile::kWN: case Tile::kWQ:
    case Tile::kWL: return 128;
    case Tile::kS: return 64;
    case Tile::kThinM: return 16;
    case Tile::kWM: return 256;
  }
  return 128;
}
constexpr int tile_bn(Tile t) {
  switch (t) {
    case Tile::kL: case Tile::kThinM: case Tile::kWM: case Tile::kWQ: case Tile::kWL: return 128;
    case Tile::kM: case Tile::kS: return 64;
    case Tile::kThinN: return 16;
    case Tile::kWN: return 256;
  }
  return 128;
}

inline long long tiles(long long extent, int tile) { return (extent + tile - 1) / tile; }

// The split-K plans aim at this many SMs, whatever the device: a split changes
// the bits of the result, so it must depend on the shape alone (the H100's
// count). The tile choice changes no bit and uses the device's own count.
constexpr int kPlanSMs = 132;

// GEMM_N ≤ 16 → ThinN; else GEMM_M ≤ 16 → ThinM; else GEMM_N ≤ 32 → ThinN
// (two column tiles waste less than one of 64); else GEMM_M ≤ 32 → ThinM;
// else whichever of L (128×128), M (128×64), S (64×64) costs least, the cost of
// a tile being the busiest SM's share of it,
//   ⌈blocks · slices / num_sms⌉ · BM · BN / rate,
// with the rates measured on the H100 (round 1: conv2's forward at batch 64,
// each tile alone on the GPU): L 1, M 0.9, S 0.72. An SM runs its blocks at
// about the same rate one or two at a time (L at one block per SM beat M at two
// on conv2's forward, 0.245 against 0.270 ms), so the cost counts the blocks
// an SM gets, not the waves of two. Ties go to the larger tile. The choice
// changes the speed only: every configuration adds each output's products in
// the same order.
inline Tile choose_tile(long long M, long long N, int slices, int num_sms) {
  if (N <= 16) return Tile::kThinN;
  if (M <= 16) return Tile::kThinM;
  if (N <= 32) return Tile::kThinN;
  if (M <= 32) return Tile::kThinM;
  struct Option {
    Tile t;
    int bm, bn;
    double rate;
  };
  const Option options[] = {{Tile::kL, 128, 128, 1.0}, {Tile::kM, 128, 64, 0.9},
                            {Tile::kS, 64, 64, 0.72}};
  Tile best = Tile::kS;
  double best_cost = 0;
  for (const Option& o : options) {
    const long long blocks = tiles(M, o.bm) * tiles(N, o.bn) * std::max(slices, 1);
    const double cost =
        double((blocks + num_sms - 1) / num_sms) * double(o.bm) * double(o.bn) / o.rate;
    if (o.t == Tile::kL || cost < best_cost * 0.999) best = o.t, best_cost = cost;
  }
  return best;
}

// The tile for a convolution pass (GEMM_M × GEMM_N, `slices` split-K slices
// of `tps` k-tiles). A large product — one for which WN (128×256) or WM
// (256×128) would qualify:
//   * a long reduction: tps ≥ kWideMinTiles (the pipeline's start and the
//     epilogue are paid once per block);
//   * at most 1/8 of the work wasted on padding;
//   * full waves: blocks × slices over ⌈that / num_sms⌉·num_sms ≥ 0.85;
// runs WL (128×128 on the wide engine, 8×8 outputs a thread) for forward and
// backward-data (col_group = 0). The weight gradient (col_group = C) always
// takes choose_tile's pick (L at these sizes). WN and WM remain benchmark variants: on the H100 at batch 64
// (hpmc_conv_bench, 2026-11-21) WL beat them on all four large forward and
// backward-data passes (conv2 fwd 0.243 against WM's 0.254 ms, dgrad 0.227
// against WN's 0.248; conv4 fwd 0.229 against 0.249, dgrad 0.237 against
// 0.249) and L beat them on both large weight gradients (0.283 against 0.296
// and 0.282 against 0.298). Anything else: choose_tile's. Like choose_tile,
// the choice changes no bit of any result.
constexpr int kWideMinTiles = 32;

inline Tile choose_conv_tile(long long M, long long N, int slices, int tps, int num_sms,
                             long long col_group) {
  if (col_group == 0 && tps >= kWideMinTiles && M > 32 && N > 32) {
    for (Tile t : {Tile::kWN, Tile::kWM}) {
      const int bm = tile_bm(t), bn = tile_bn(t);
      const long long padded = tiles(M, bm) * bm * tiles(N, bn) * bn;
      const long long blocks = tiles(M, bm) * tiles(N, bn) * slices;
      const long long waves = (blocks + num_sms - 1) / num_sms;
      if (padded * 8 <= M * N * 9 && blocks * 20 >= waves * num_sms * 17) return Tile::kWL;
    }
  }
  return choose_tile(M, N, slices, num_sms);
}

// Split-K for backward_params (GEMM_M = K, GEMM_N = C·R·S, GEMM_K = N·P·Q),
// from the shape alone: as many slices as fit one wave of 128×128 blocks at
// two per SM on kPlanSMs SMs (⌊2·kPlanSMs / blocks⌋, at least 1), every slice
// at least kMinTilesPerSplit k-tiles (of 8) unless there are fewer in all, at
// most kMaxSplits slices. Slice z covers k-tiles [z·tps, min((z+1)·tps,
// ktiles)); none is empty: (splits−1)·tps < ktiles.
constexpr long long kWgradSplitTarget = 2 * kPlanSMs;  // 128×128 blocks: two per SM
constexpr int kMaxSplits = 64;
constexpr int kMinTilesPerSplit = 8;

inline void split_plan(long long want, int ktiles, int min_tiles, int max_splits, int& splits,
                       int& tps) {
  ktiles = std::max(ktiles, 1);
  const long long by_k = std::max(1, ktiles / min_tiles);
  want = std::max(1ll, std::min({want, (long long)max_splits, by_k}));
  tps = int((ktiles + want - 1) / want);
  splits = int((ktiles + tps - 1) / tps);
}

inline void choose_splits(long long M, long long N, int ktiles, int& splits, int& tps) {
  const long long blocks = std::max(1ll, tiles(M, 128) * tiles(N, 128));
  split_plan(kWgradSplitTarget / blocks, ktiles, kMinTilesPerSplit, kMaxSplits, splits, tps);
}

// Split-K for forward and backward_data (GEMM_M = N·P·Q or N·H·W, GEMM_N = K
// or C), from the shape alone. When the 128×64 tiles give fewer blocks than
// kPlanSMs (a small output): ⌊2·kPlanSMs / blocks⌋ slices of at least
// kMinTilesPerOutSplit k-tiles. Otherwise the output is large enough for the
// wide tiles, one block per SM: when GEMM_M ≥ 256, GEMM_N ≥ 128 and its wide
// blocks (M·N / (128·256), rounded up) fill less than 3/4 of kPlanSMs,
// ⌊kPlanSMs / wide blocks⌋ slices of at least kWideMinTiles k-tiles (conv2's
// forward at batch 64: 64 blocks of 256×128, 2 slices), else none. At most
// kMaxOutSplits. The slices' partial outputs are summed, with the bias, by a
// second pass.
constexpr int kMaxOutSplits = 8;
constexpr int kMinTilesPerOutSplit = 16;

inline void choose_out_splits(long long M, long long N, int ktiles, int& splits, int& tps) {
  const long long blocks = std::max(1ll, tiles(M, 128) * tiles(N, 64));
  if (blocks < kPlanSMs) {
    split_plan(2 * kPlanSMs / blocks, ktiles, kMinTilesPerOutSplit, kMaxOutSplits, splits, tps);
    return;
  }
  long long want = 1;
  if (M >= 256 && N >= 128) {  // the wide tiles' shapes (thin GEMM_N goes elsewhere)
    const long long wide = tiles(M * N, 128 * 256);
    if (wide * 4 < kPlanSMs * 3) want = kPlanSMs / wide;
  }
  split_plan(want, ktiles, kWideMinTiles, kMaxOutSplits, splits, tps);
}

// Split-K for the plain GEMM (implicit::gemm: the Linear layer's products
// below the large engine's rule), from the shape alone: when the tiles of
// choose_tile's pick (bm × bn) give fewer blocks than kPlanSMs — a small
// output over a long reduction, such as a 10-class layer's weight gradient at
// batch 4096 or a batch-16 forward — ⌊2·kPlanSMs / blocks⌋ slices of at least
// kMinTilesPerSplit k-tiles, at most kMaxGemmSplits; the slices' partial
// products are summed in double by a second pass. Otherwise none.
constexpr int kMaxGemmSplits = 16;

inline void choose_gemm_splits(long long M, long long N, int ktiles, int bm, int bn, int& splits,
                               int& tps) {
  const long long blocks = std::max(1ll, tiles(M, bm) * tiles(N, bn));
  const long long want = blocks < kPlanSMs ? 2 * kPlanSMs / blocks : 1;
  split_plan(want, ktiles, kMinTilesPerSplit, kMaxGemmSplits, splits, tps);
}

// The tap-major mappings (GEMM_K = (r, s, channel), the channel fastest; see
// conv2d_implicit_gemm.cu): forward when C % 8 == 0 (each k-tile of 8 lies in
// one tap) and K % 4 == 0 (the re-laid-out weights are read 16 bytes at a
// time); backward_data when the stride is 1, K % 8 == 0 and C % 4 == 0. Shape
// only, so the summation order (and the bits) depend on the shape alone.
inline bool tap_major_forward(int C, int K) { return C % 8 == 0 && K % 4 == 0 && C > 0 && K > 0; }
inline bool tap_major_backward_data(int stride, int C, int K) {
  return stride == 1 && K % 8 == 0 && C % 4 == 0 && C > 0 && K > 0;
}
// The bf16 channels-last kernels (implicit_nhwc_kernels.cuh) take a tap-major
// forward whose C is a multiple of 32 and a tap-major backward_data whose K
// is (k-tiles of 32 channels inside one tap; 16-byte rows of bf16 weights),
// and a weight gradient with C % 128 == 0 (a block's 128 columns in one tap)
// and K % 32 == 0.
inline bool nhwc_forward(int C, int K) { return tap_major_forward(C, K) && C % 32 == 0; }
inline bool nhwc_backward_data(int stride, int C, int K) {
  return tap_major_backward_data(stride, C, K) && K % 32 == 0;
}
inline bool nhwc_weight_grad(int C, int K) {
  return C > 0 && K > 0 && C % 128 == 0 && K % 32 == 0;
}

// backward_params' tap-major columns (GEMM_N = (r, s, c), WgradTapBLoader):
// when the tile's BN divides C, so that every block's columns lie in one tap.
// The same sums as the channel-major columns, permuted: the same bits.
inline bool tap_major_weight_grad(int C, Tile t) { return C > 0 && C % tile_bn(t) == 0; }

// The thin weight gradient's block target (choose_thin_splits below): about 4
// blocks of its tiles on each of kPlanSMs SMs.
constexpr long long kSplitTarget = 4 * kPlanSMs;

// ---- thin convolutions: K ≤ 4 output channels (conv2d_thin.cu) ------------------------
//
// A convolution with few output channels (an autoencoder's last layer, 256 → 3)
// is a GEMM with GEMM_N = K ≤ 4 in forward and GEMM_M = K in backward_params:
// the tiled engine wastes most of its 16-wide thin tile and its per-k-tile
// barriers on it. Such layers get their own kernels instead:
//   kFast3x3  3×3, stride 1, pad 1, W % 4 == 0 and the pass's tensors 16-byte
//             aligned: register windows fed by float4 loads along W, the K
//             channels' weights broadcast from shared memory;
//   kFast5x5  the same kernels for 5×5, stride 1, pad 2 (a 5×5 autoencoder's
//             last layer);
//   kGeneric  any other R, S, stride, pad, W (R·S ≤ kThinMaxTaps: the weights of
//             one channel fit the kernels' shared-memory staging);
//   kNone     K > 4 (or R·S too large): the implicit GEMM.
// Each pass asks with the alignment of its own tensors (forward: x, y;
// backward_data: dy, dx; backward_params: x, dy).
enum class ThinPath { kNone, kGeneric, kFast3x3, kFast5x5 };
constexpr int kThinMaxK = 4;
constexpr int kThinMaxTaps = 64;

inline ThinPath choose_thin(int K, int R, int S, int stride, int pad, int W, bool aligned16) {
  if (K < 1 || K > kThinMaxK || R < 1 || S < 1 || (long long)R * S > kThinMaxTaps)
    return ThinPath::kNone;
  if (R == S && (R == 3 || R == 5) && stride == 1 && pad == R / 2 && W % 4 == 0 && aligned16)
    return R == 3 ? ThinPath::kFast3x3 : ThinPath::kFast5x5;
  return ThinPath::kGeneric;
}

// Few input channels: a 3×3, stride-1, pad-1 convolution with 1 ≤ C ≤
// kThinInputMaxC and K > kThinMaxK (an image model's first layer) runs its
// forward (with the 2×2 max pool after it, optionally) and its weight
// gradient on the kernels of implicit_thin_input_kernels.cuh; its
// backward_data stays on the GEMM. In bf16 (`bf16`: the tensor-core kernels)
// a 5×5, pad-2 one too; the FP32 kernels (fp32, tf32) hold a 3×3 window's
// sums in registers, and 5×5 keeps the GEMM there.
constexpr int kThinInputMaxC = 4;

inline bool thin_input_applies(int C, int K, int R, int S, int stride, int pad, bool bf16) {
  return C >= 1 && C <= kThinInputMaxC && K > kThinMaxK && R == S && stride == 1 &&
         pad == R / 2 && (R == 3 || (R == 5 && bf16));
}

// Split of the thin weight gradient's reduction: `items` units of work (warp
// tiles or pixels) over slices of `per` consecutive units, next to `gx` blocks
// per slice. Aims at `target` blocks in all (at least), at most kMaxSplits
// slices, at least `min_items` units per slice unless there are fewer in all;
// no slice is empty: (splits − 1)·per < items ≤ splits·per. A function of the
// shape only, so the bits of dw do not depend on the device.
inline void choose_thin_splits(long long gx, long long items, long long min_items, int& splits,
                               long long& per, long long target = kSplitTarget) {
  items = std::max(items, 1ll);
  gx = std::max(gx, 1ll);
  long long want = (target + gx - 1) / gx;
  const long long by_items = std::max(1ll, items / std::max(min_items, 1ll));
  want = std::max(1ll, std::min({want, (long long)kMaxSplits, by_items}));
  per = (items + want - 1) / want;
  splits = int((items + per - 1) / per);
}

// The fast thin weight gradient (kFast3x3, kFast5x5): blocks of 128 threads,
// three an SM, or two where R·R·K sums a thread would spill at three (5×5 with
// K ≥ 2; its __launch_bounds__). Its block target is the most whole slices of
// gx blocks in two waves of those blocks on kPlanSMs SMs: 64 channel groups
// (C = 256) get 12 slices (768 blocks) at three an SM, 8 (512) at two, where
// kSplitTarget's 9 slices (576 blocks) left a last wave 45% or 18% full.
constexpr int thin_fast_wgrad_blocks_per_sm(int R, int K) { return R * R * K >= 50 ? 2 : 3; }
inline long long thin_fast_wgrad_target(long long gx, int R, int K) {
  gx = std::max(gx, 1ll);
  const long long two_waves = 2ll * thin_fast_wgrad_blocks_per_sm(R, K) * kPlanSMs;
  return std::max(gx, two_waves / gx * gx);
}

// ---- the upsample fold (implicit::upconv_*, conv2d_kernels.h) ----------------------
// The shape of an R×R (R = 3 or 5), pad-R/2, stride-1 convolution of a ×2
// upsampled map.
inline bool upconv_shape(const Conv2dShape& s) {
  return (s.R == 3 || s.R == 5) && s.S == s.R && s.stride == 1 && s.pad == s.R / 2 && s.H > 0 &&
         s.W > 0 && s.H % 2 == 0 && s.W % 2 == 0 && s.P == s.H && s.Q == s.W && s.N >= 0 &&
         s.C > 0;
}
// The GEMM fold: 3×3, the tap-major loaders' channel counts, and not thin.
inline bool upconv_gemm_applies(const Conv2dShape& s) {
  return upconv_shape(s) && s.R == 3 && s.C % 8 == 0 && s.K % 8 == 0 && s.K > kThinMaxK;
}
// The thin fold (upconv_thin_* kernels): 3×3 or 5×5, 1 ≤ K ≤ 4, any C.
inline bool upconv_thin_applies(const Conv2dShape& s) {
  return upconv_shape(s) && s.K >= 1 && s.K <= kThinMaxK;
}
// bf16's channels-last fold (implicit_upconv_nhwc_kernels.cuh), per pass: the
// GEMM fold with whole k-tiles of 32 channels inside a tap — forward C % 32
// == 0, backward_data K % 32 == 0 — and, as nhwc_weight_grad, a weight
// gradient with C % 128 == 0 (a block's columns in one tap) and K % 32 == 0.
inline bool upconv_nhwc_forward(const Conv2dShape& s) {
  return upconv_gemm_applies(s) && s.C % 32 == 0;
}
inline bool upconv_nhwc_backward_data(const Conv2dShape& s) {
  return upconv_gemm_applies(s) && s.K % 32 == 0;
}
inline bool upconv_nhwc_weight_grad(const Conv2dShape& s) {
  return upconv_gemm_applies(s) && s.C % 128 == 0 && s.K % 32 == 0;
}
// Whether either fold takes the convolution (implicit::upconv_applies): what
// the GPU rewrite (model/gpu_rewrite.h) asks before it folds an upsample.
inline bool upconv_fold_applies(const Conv2dShape& s) {
  return upconv_gemm_applies(s) || upconv_thin_applies(s);
}

}  // namespace hpmc::gpu::implicit_detail
