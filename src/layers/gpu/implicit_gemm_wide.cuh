// implicit_gemm_wide.cuh — the warp-tiled FP32 GEMM main loop with large
// per-thread tiles (8×16 or 16×8 accumulators), for the big convolution GEMMs.
// Same loaders, epilogues and results as the engine in implicit_gemm_core.cuh
// (read that first); what differs is how threads share out the tile and how
// the shared-memory fragments are fed.
//
// Why: on Hopper every SM sub-partition issues one warp instruction per clock
// and owns 32 FP32 lanes, so an FFMA kernel runs at peak only if nearly every
// issued instruction is an FFMA, and shared memory delivers 128 bytes per
// clock per SM to the registers. A thread tile of TM×TN accumulators needs
// (TM + TN) floats from shared memory per TM·TN FFMAs: for 8×8 that is exactly
// the 32 floats per clock the SM can deliver at 128 FFMA lanes per clock, so
// the round-1 engine is bound by shared memory as much as by the FMA pipe.
// 8×16 needs 24 per clock (75%) and a quarter fewer shared-memory loads.
//
// Block tile BM×BN, BK = kBK = 8, NT threads in WGM × WGN warps; each warp
// owns a WT_M × WT_N sub-tile (64×64 for the 8×16 tiles), its 32 lanes in an
// LM × LN grid. Thread (lm, ln) of warp (wm, wn) owns rows
//   wm·WT_M + g·4·LM + lm·4 + i   (g < TM/4, i < 4)   and columns
//   wn·WT_N + h·4·LN + ln·4 + j   (h < TN/4, j < 4),
// so each fragment read is a float4, and the 8 lanes of a quarter warp read 8
// consecutive float4s of one operand (all 32 banks) and one float4 of the other
// (a broadcast). Lanes run along m (LM = 8, LN = 4) when C is contiguous along
// m (conv outputs: a column's 8 lanes store 128 consecutive bytes), else along
// n (LM = 4, LN = 8).
//
// Pipeline: STAGES shared-memory buffers (dynamic shared memory, set up by the
// host with wide_smem_bytes), tile i in stage i mod STAGES; the prologue issues
// tiles 0 … STAGES−1. Register fragments are double-buffered: the fragment of
// kk+1 is read while kk's FFMAs run. The one barrier per k-tile sits before
// the tile's last kk, whose fragment is already in registers:
//   wait until tile i+1 has landed (at most STAGES−2 groups pending), barrier;
//   issue tile i+STAGES into stage i mod STAGES (every thread has read it), commit;
//   read kk = 0 of tile i+1; FFMA kk = BK−1 of tile i.
// So the barrier's wait and the first fragment read of a tile overlap FFMAs.
// Each accumulator is still fma(a_k, b_k, acc) over k ascending from 0: the
// tile configuration changes no bit of the result.
#pragma once

#include <cuda_runtime.h>

#include "layers/gpu/implicit_gemm_core.cuh"

namespace hpmc::gpu::implicit_detail {

// BM×BN block tile, WGM×WGN warps, STAGES buffers, MINB blocks per SM asked of
// the register allocator.
// KU kk per unrolled loop body (kBK: the whole k-tile).
template <int BM_, int BN_, int WGM_, int WGN_, int MINB_, int STAGES_, int KU_ = kBK>
struct WideCfg {
  static constexpr bool kWide = true;
  static constexpr bool kTc = false;
  static constexpr int BM = BM_, BN = BN_, WGM = WGM_, WGN = WGN_, MINB = MINB_,
                       STAGES = STAGES_, KU = KU_;
  static_assert(KU % 2 == 0 && kBK % KU == 0, "whole, even parts of the k-tile");
  static constexpr int NT = 32 * WGM * WGN;
  static constexpr int WT_M = BM / WGM, WT_N = BN / WGN;  // one warp's sub-tile
  static constexpr int A_STAGE = kBK * (BM + kPad), B_STAGE = kBK * (BN + kPad);  // floats
  static constexpr size_t kSmemBytes = size_t(STAGES) * (A_STAGE + B_STAGE) * sizeof(float);
  static_assert(BM % WGM == 0 && BN % WGN == 0, "warps tile the block exactly");
  static_assert(WT_M % 32 == 0 && WT_N % 32 == 0, "each lane grid side is 4 or 8 lanes of 4");
  static_assert(STAGES >= 2, "at least double-buffered");
};

// The lane grid and thread tile of a configuration, lanes along m or along n.
template <class Cfg, bool LANES_M>
struct WideLayout {
  static constexpr int LM = LANES_M ? 8 : 4, LN = 32 / LM;
  static constexpr int TM = Cfg::WT_M / LM, TN = Cfg::WT_N / LN;
  static constexpr int GM = TM / 4, GN = TN / 4;
  static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are float4 groups");

  // The thread's first row and column inside the block tile.
  __device__ __forceinline__ static void coords(int tid, int& row, int& col) {
    const int warp = tid / 32, lane = tid % 32;
    const int wm = warp % Cfg::WGM, wn = warp / Cfg::WGM;
    const int lm = LANES_M ? lane % LM : lane / LN;
    const int ln = LANES_M ? lane / LM : lane % LN;
    row = wm * Cfg::WT_M + lm * 4;
    col = wn * Cfg::WT_N + ln * 4;
  }
};

template <class L>
__device__ __forceinline__ void wide_frag(const float* as, const float* bs, int row, int col,
                                          float (&a)[L::TM], float (&b)[L::TN]) {
#pragma unroll
  for (int g = 0; g < L::GM; ++g) {
    const float4 t = *reinterpret_cast<const float4*>(as + row + g * 4 * L::LM);
    a[g * 4 + 0] = t.x;
    a[g * 4 + 1] = t.y;
    a[g * 4 + 2] = t.z;
    a[g * 4 + 3] = t.w;
  }
#pragma unroll
  for (int h = 0; h < L::GN; ++h) {
    const float4 t = *reinterpret_cast<const float4*>(bs + col + h * 4 * L::LN);
    b[h * 4 + 0] = t.x;
    b[h * 4 + 1] = t.y;
    b[h * 4 + 2] = t.z;
    b[h * 4 + 3] = t.w;
  }
}

template <class L>
__device__ __forceinline__ void wide_fma(const float (&a)[L::TM], const float (&b)[L::TN],
                                         float (&acc)[L::TM][L::TN]) {
#pragma unroll
  for (int i = 0; i < L::TM; ++i)
#pragma unroll
    for (int j = 0; j < L::TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
}

// acc = Σ over k-tiles [kt0, kt1) of A-tile · B-tile (0 for an empty range).
// smem: Cfg::kSmemBytes of dynamic shared memory, 16-byte aligned.
template <class Cfg, class L, class AL, class BL>
__device__ __forceinline__ void wide_mainloop(AL& al, BL& bl, float* smem, int kt0, int kt1,
                                              int row, int col, float (&acc)[L::TM][L::TN]) {
  constexpr int S = Cfg::STAGES;
  using AS = float(*)[Cfg::BM + kPad];
  using BS = float(*)[Cfg::BN + kPad];
  float* const sa = smem;
  float* const sb = smem + S * Cfg::A_STAGE;
#pragma unroll
  for (int i = 0; i < L::TM; ++i)
#pragma unroll
    for (int j = 0; j < L::TN; ++j) acc[i][j] = 0.f;
  const int nt = kt1 - kt0;
  if (nt <= 0) return;  // block-uniform

  al.start(kt0);
  bl.start(kt0);
#pragma unroll
  for (int st = 0; st < S; ++st) {
    if (st < nt) {
      al.issue(reinterpret_cast<AS>(sa + st * Cfg::A_STAGE));
      bl.issue(reinterpret_cast<BS>(sb + st * Cfg::B_STAGE));
    }
    copy_commit();
  }
  copy_wait<S - 1>();  // tile 0 has landed (this thread's copies) …
  __syncthreads();     // … and every thread's

  float a[2][L::TM], b[2][L::TN];
  int cur = 0;  // the stage of tile i
  wide_frag<L>(sa, sb, row, col, a[0], b[0]);
  for (int i = 0; i < nt; ++i) {
    const float* as = sa + cur * Cfg::A_STAGE;
    const float* bs = sb + cur * Cfg::B_STAGE;
    // The k-tile in parts of KU kk (KU even, so kk's fragment buffer is j & 1):
    // an 8×16 thread tile unrolled over all of BK would be a loop body of 1024
    // FFMAs (16 KB), more than an SM sub-partition's instruction cache keeps.
#pragma unroll 1
    for (int k0 = 0; k0 < kBK; k0 += Cfg::KU) {
#pragma unroll
      for (int j = 0; j < Cfg::KU; ++j) {
        const int kk = k0 + j;
        if (j + 1 < Cfg::KU || k0 + Cfg::KU < kBK) {
          wide_frag<L>(as + (kk + 1) * (Cfg::BM + kPad), bs + (kk + 1) * (Cfg::BN + kPad), row,
                       col, a[(j + 1) & 1], b[(j + 1) & 1]);
        } else {
          // Groups committed so far: S + i (tiles 0 … S+i−1, empty ones past the
          // end); tile i+1 is group i+1, so at most S−2 may still be pending.
          copy_wait<S - 2>();
          __syncthreads();
          if (i + S < nt) {  // block-uniform; stage cur is free: all have read tile i
            al.issue(reinterpret_cast<AS>(sa + cur * Cfg::A_STAGE));
            bl.issue(reinterpret_cast<BS>(sb + cur * Cfg::B_STAGE));
          }
          copy_commit();
          cur = cur + 1 == S ? 0 : cur + 1;
          if (i + 1 < nt)  // block-uniform
            wide_frag<L>(sa + cur * Cfg::A_STAGE, sb + cur * Cfg::B_STAGE, row, col, a[0], b[0]);
        }
        wide_fma<L>(a[j & 1], b[j & 1], acc);
      }
    }
  }
}

// The block's GEMM tile, start to end: layout, main loop, and the accumulators
// handed to the epilogue in groups of four consecutive outputs along its
// contiguous axis.
template <class Cfg, class AL, class BL, class Epi>
__device__ __forceinline__ void wide_tile(AL& al, BL& bl, int kt0, int kt1, const Epi& epi,
                                          int m0, int n0) {
  using L = WideLayout<Cfg, Epi::kAlongM>;
  extern __shared__ __align__(16) float wide_smem[];
  int row, col;
  L::coords(threadIdx.x, row, col);
  float acc[L::TM][L::TN];
  wide_mainloop<Cfg, L>(al, bl, wide_smem, kt0, kt1, row, col, acc);
  if constexpr (Epi::kAlongM) {
#pragma unroll
    for (int g = 0; g < L::GM; ++g)
#pragma unroll
      for (int h = 0; h < L::GN; ++h)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float v[4] = {acc[g * 4 + 0][h * 4 + j], acc[g * 4 + 1][h * 4 + j],
                              acc[g * 4 + 2][h * 4 + j], acc[g * 4 + 3][h * 4 + j]};
          epi.store_mcol(m0 + row + g * 4 * L::LM, n0 + col + h * 4 * L::LN + j, v);
        }
  } else {
#pragma unroll
    for (int g = 0; g < L::GM; ++g)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int h = 0; h < L::GN; ++h) {
          const float v[4] = {acc[g * 4 + i][h * 4 + 0], acc[g * 4 + i][h * 4 + 1],
                              acc[g * 4 + i][h * 4 + 2], acc[g * 4 + i][h * 4 + 3]};
          epi.store_nrow(m0 + row + g * 4 * L::LM + i, n0 + col + h * 4 * L::LN, v);
        }
  }
}

}  // namespace hpmc::gpu::implicit_detail
