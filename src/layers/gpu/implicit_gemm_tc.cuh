// implicit_gemm_tc.cuh — the tensor-core main loop of the implicit-GEMM family,
// for training.precision tf32 and bf16 (core/precision.h).
//
// Same loaders, shared-memory stages, pipeline and epilogues as the FP32
// engine (implicit_gemm_core.cuh: read that first); what differs is the
// product of a stage. Each warp owns a WM×WN sub-tile of the block's BM×BN
// tile as (WM/16)×(WN/8) mma tiles of 16×8, and per k-tile (kBK = 8 values
// of k) issues one mma.sync per mma tile:
//   tf32  mma.m16n8k8 .tf32, operands rounded with cvt.rna.tf32.f32 (ties
//         away from zero, unit roundoff 2^-11);
//   bf16  mma.m16n8k8 .bf16, operands rounded with cvt.rn.bf16x2.f32 (to
//         nearest even, 2^-8).
// Each FP32 value is rounded as it is read from shared memory into a
// fragment; products of rounded operands are exact and the tensor cores
// sum them in FP32. Master weights and activations stay FP32 in memory.
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k8"), g = lane/4,
// t = lane%4, shared memory k-major (as[k][m], bs[k][n], row stride BM+4 or
// BN+4 floats, ≡ 4 or 20 mod 32):
//   bf16  a0 = (m g,   k 2t, 2t+1)   a1 = (m g+8, k 2t, 2t+1)   b0 = (k 2t, 2t+1; n g)
//   tf32  a0 = (g, k t)  a1 = (g+8, t)  a2 = (g, t+4)  a3 = (g+8, t+4)  b0 = (t; g)  b1 = (t+4; g)
// For tf32 the fragment's k = t is read from shared-memory row 2t and k = t+4
// from row 2t+1, in A and B alike: the mma's sum over its 8 values of k is
// the same sum in another order, and both formats then read rows 2t and
// 2t+1, at banks 8t + g (+4): conflict-free for a warp.
//   C (FP32)  c0, c1 = (m g, n 2t, 2t+1)   c2, c3 = (m g+8, n 2t, 2t+1)
//
// Epilogue: the FP32 epilogues take 4 consecutive outputs along their
// contiguous axis. Along n (MatOut, TapWOut) lanes t and t^1 swap two
// values (shfl.xor 1), so that even t hold n 2t..2t+3 of row g and odd t
// n 2t−2..2t+1 of row g+8. Along m (ConvOut, FoldOut) the four lanes g =
// 4q..4q+3 of one t transpose their 4×4 values (three shuffles), so that lane
// g = 4q+i holds rows 4q..4q+3 (+8 for i ≥ 2) of column 2t + (i & 1).
//
// A TcCfg has the BM, BN and thread count of the FP32 configuration it
// stands for (TcOf, implicit_conv_kernels.cuh; picked by
// conv2d_implicit_gemm.cu's with_precision), so the plans (tile,
// split-K, grid, workspace) and the loaders' thread mappings are unchanged.
// The summation order depends on the configuration and the split, not on the
// launch: repeated runs give the same bits. Compute capability 8.0 and up
// (mma.cuh; conv2d_implicit_gemm.cu's check_tensor_cores refuses older GPUs).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "layers/gpu/implicit_gemm_core.cuh"
#include "layers/gpu/mma.cuh"

namespace hpmc::gpu::implicit_detail {

// The operand formats (mma.cuh): frag_a/frag_b build a fragment from the
// shared-memory values at rows 2t (lo) and 2t+1 (hi) of the k-tile.
struct OpTf32 {
  // (m g, lo), (m g+8, lo), (m g, hi), (m g+8, hi)
  __device__ __forceinline__ static void frag_a(float lo0, float lo8, float hi0, float hi8,
                                                uint32_t (&a)[4]) {
    a[0] = gpu::mma::tf32(lo0), a[1] = gpu::mma::tf32(lo8);
    a[2] = gpu::mma::tf32(hi0), a[3] = gpu::mma::tf32(hi8);
  }
  __device__ __forceinline__ static void frag_b(float lo, float hi, uint32_t (&b)[2]) {
    b[0] = gpu::mma::tf32(lo), b[1] = gpu::mma::tf32(hi);
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    gpu::mma::tf32_m16n8k8(d, a, b);
  }
};

struct OpBf16 {
  // a[0] = (m g; lo, hi), a[1] = (m g+8; lo, hi); a[2], a[3] unused
  __device__ __forceinline__ static void frag_a(float lo0, float lo8, float hi0, float hi8,
                                                uint32_t (&a)[4]) {
    a[0] = gpu::mma::bf16x2(lo0, hi0), a[1] = gpu::mma::bf16x2(lo8, hi8);
  }
  __device__ __forceinline__ static void frag_b(float lo, float hi, uint32_t (&b)[2]) {
    b[0] = gpu::mma::bf16x2(lo, hi);
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    const uint32_t a2[2] = {a[0], a[1]};
    gpu::mma::bf16_m16n8k8(d, a2, b[0]);
  }
};

// BM×BN block tile of WGM×WGN warps (NT = 32·WGM·WGN threads), MINB blocks
// per SM asked of the register allocator, STAGES shared-memory buffers
// (Smem<TcCfg>, static: STAGES·8·(BM+BN+8)·4 bytes ≤ 48 KB), operands Op.
template <int BM_, int BN_, int WGM_, int WGN_, int MINB_, int STAGES_, class Op_>
struct TcCfg {
  static constexpr bool kWide = false, kTc = true;
  static constexpr int BM = BM_, BN = BN_, WGM = WGM_, WGN = WGN_, MINB = MINB_,
                       STAGES = STAGES_;
  static constexpr int NT = 32 * WGM * WGN;
  static constexpr int WM = BM / WGM, WN = BN / WGN;  // one warp's sub-tile
  static constexpr int MI = WM / 16, NI = WN / 8;     // its mma tiles
  using Op = Op_;
  static_assert(BM % WGM == 0 && BN % WGN == 0, "warps tile the block exactly");
  static_assert(WM % 16 == 0 && WN % 8 == 0, "whole mma tiles");
  static_assert(BM % 16 == 0 && BN % 8 == 0, "conflict-free fragment rows");
  static_assert(STAGES >= 2, "at least double-buffered");
  static_assert(size_t(STAGES) * kBK * (BM + BN + 2 * kPad) * 4 <= 48 * 1024,
                "static shared memory");
};

// acc += one stage's product for the warp at (wm0, wn0) of the block tile.
template <class Cfg>
__device__ __forceinline__ void tc_stage(const float (*as)[Cfg::BM + kPad],
                                         const float (*bs)[Cfg::BN + kPad], int wm0, int wn0,
                                         int g, int t, float (&acc)[Cfg::MI][Cfg::NI][4]) {
  using Op = typename Cfg::Op;
  const float* alo = as[2 * t];
  const float* ahi = as[2 * t + 1];
  const float* blo = bs[2 * t];
  const float* bhi = bs[2 * t + 1];
  uint32_t a[Cfg::MI][4], b[Cfg::NI][2];
#pragma unroll
  for (int i = 0; i < Cfg::MI; ++i) {
    const int m = wm0 + i * 16 + g;
    Op::frag_a(alo[m], alo[m + 8], ahi[m], ahi[m + 8], a[i]);
  }
#pragma unroll
  for (int j = 0; j < Cfg::NI; ++j) {
    const int n = wn0 + j * 8 + g;
    Op::frag_b(blo[n], bhi[n], b[j]);
  }
#pragma unroll
  for (int i = 0; i < Cfg::MI; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::NI; ++j) Op::mma(acc[i][j], a[i], b[j]);
}

// v[k] = c[k] for a run-time k < 4 (selects, not local memory).
__device__ __forceinline__ float pick4(const float (&c)[4], int k) {
  return k == 0 ? c[0] : k == 1 ? c[1] : k == 2 ? c[2] : c[3];
}

// One mma tile's accumulators (rows mt.., columns nt..) to the epilogue.
template <class Epi>
__device__ __forceinline__ void tc_store(const Epi& epi, const float (&c)[4], int mt, int nt,
                                         int lane) {
  const int g = lane >> 2, t = lane & 3;
  if constexpr (Epi::kAlongM) {
    // Lanes g = 4q + i (i < 4) of one t: lane i ends with element i of each
    // of the four lanes' accumulators, i.e. column 2t + (i & 1), rows
    // 4q..4q+3 (+8 for i ≥ 2). Round r: send c[(i + r) & 3], receive from
    // lane i − r the element meant for lane i.
    // Every array index below is a compile-time constant or goes through
    // pick4's selects: an index that depends on the lane would put the
    // arrays (and the accumulators behind c) in local memory.
    const int i = g & 3, q = g >> 2;
    float got[4];  // got[r]: the value from lane i − r (r = 0: this lane's own)
    got[0] = pick4(c, i);
#pragma unroll
    for (int r = 1; r < 4; ++r) {
      const int src_lane = (lane & ~12) | (((i - r) & 3) << 2);
      got[r] = __shfl_sync(0xffffffffu, pick4(c, (i + r) & 3), src_lane);
    }
    float v[4];  // v[k]: row 4q + k's value, which came in round (i − k) mod 4
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = pick4(got, (i - k) & 3);
    epi.store_mcol(mt + 4 * q + (i >= 2 ? 8 : 0), nt + 2 * t + (i & 1), v);
  } else {
    const bool odd = t & 1;
    const float s0 = __shfl_xor_sync(0xffffffffu, odd ? c[0] : c[2], 1);
    const float s1 = __shfl_xor_sync(0xffffffffu, odd ? c[1] : c[3], 1);
    const float v[4] = {odd ? s0 : c[0], odd ? s1 : c[1], odd ? c[2] : s0, odd ? c[3] : s1};
    epi.store_nrow(mt + g + (odd ? 8 : 0), nt + 2 * (t & ~1), v);
  }
}

// The block's GEMM tile on the tensor cores, start to end.
template <class Cfg, class AL, class BL, class Epi>
__device__ __forceinline__ void tc_tile(AL& al, BL& bl, int kt0, int kt1, const Epi& epi, int m0,
                                        int n0) {
  __shared__ __align__(16) Smem<Cfg> sm;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm0 = (warp % Cfg::WGM) * Cfg::WM, wn0 = (warp / Cfg::WGM) * Cfg::WN;
  const int g = lane >> 2, t = lane & 3;
  float acc[Cfg::MI][Cfg::NI][4];
#pragma unroll
  for (int i = 0; i < Cfg::MI; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
  pipeline<Cfg>(al, bl, sm, kt0, kt1,
                [&](int rd) { tc_stage<Cfg>(sm.a[rd], sm.b[rd], wm0, wn0, g, t, acc); });
#pragma unroll
  for (int i = 0; i < Cfg::MI; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::NI; ++j)
      tc_store(epi, acc[i][j], m0 + wm0 + i * 16, n0 + wn0 + j * 8, lane);
}

}  // namespace hpmc::gpu::implicit_detail
