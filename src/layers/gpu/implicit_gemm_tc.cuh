// implicit_gemm_tc.cuh — the tensor-core main loop of the implicit-GEMM family,
// for training.precision tf32 and bf16 (core/precision.h).
//
// Same loaders, shared-memory stages and epilogues as the FP32 engine
// (implicit_gemm_core.cuh: read that first); what differs is the product of
// a stage and the pipeline. Each warp owns a WM×WN sub-tile of the block's
// BM×BN tile as (WM/16)×(WN/8) mma tiles of 16×8:
//   tf32  mma.m16n8k8 .tf32 per k-tile (kBK = 8 values of k), operands
//         rounded with cvt.rna.tf32.f32 (ties away from zero, unit roundoff
//         2^-11);
//   bf16  mma.m16n8k16 .bf16 per pair of k-tiles (m16n8k8 for an odd last
//         one), operands rounded with cvt.rn.bf16x2.f32 (to nearest even,
//         2^-8).
// Each FP32 value is rounded as it is read from shared memory into a
// fragment; products of rounded operands are exact and the tensor cores
// sum them in FP32. Master weights and activations stay FP32 in memory.
//
// Pipeline: with 4 stages or more (TcCfg::kPairs) the k-tiles go in pairs,
// one barrier a pair (pipeline_pairs); else one by one (implicit_gemm_core's
// pipeline).
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k8 / m16n8k16"),
// g = lane/4, t = lane%4, shared memory k-major (as[k][m], bs[k][n], row
// stride BM+4 or BN+4 floats, ≡ 4 mod 32 words):
//   bf16  a0 = (m g,   k 2t, 2t+1)   a1 = (m g+8, k 2t, 2t+1)   b0 = (k 2t, 2t+1; n g)
//         (m16n8k16: a2, a3, b1 the same at k + 8, from the pair's second stage)
//   tf32  a0 = (g, k t)  a1 = (g+8, t)  a2 = (g, t+4)  a3 = (g+8, t+4)  b0 = (t; g)  b1 = (t+4; g)
// For tf32 the fragment's k = t is read from shared-memory row 2t and k = t+4
// from row 2t+1, in A and B alike: the mma's sum over its 8 values of k is
// the same sum in another order, and both formats then read rows 2t and 2t+1.
//   C (FP32)  c0, c1 = (m g, n 2t, 2t+1)   c2, c3 = (m g+8, n 2t, 2t+1)
// Which rows and columns of the sub-tile an mma tile's "m g" and "n g" are
// is ours to choose (run_pos): a lane's 2·MI rows of A and NI columns of B
// lie in runs of 4 (2 for MI = 1 or NI = 2), so that one row of a stage is
// one 16-byte load per run, conflict-free, instead of one 4-byte load per
// value; C's rows and columns follow, and a lane's accumulators are then
// runs of consecutive outputs along m and n alike.
//
// Epilogue: the FP32 epilogues take 4 consecutive outputs along their
// contiguous axis, which a lane has in its accumulators (tc_store), except
// along m with MI = 1, where lanes g and g^1 swap two values.
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
// shared-memory values at rows 2t (lo) and 2t+1 (hi) of the k-tile; mma2
// multiplies a pair of k-tiles (two stages) at once where the format has a
// k = 16 instruction.
struct OpTf32 {
  static constexpr bool kK16 = false;  // two m16n8k8 per pair of k-tiles
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
  static constexpr bool kK16 = true;  // one m16n8k16 per pair of k-tiles
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
// With 4 stages or more the main loop takes the k-tiles in pairs (one
// barrier and, in bf16, one m16n8k16 per pair: pipeline_pairs below).
template <int BM_, int BN_, int WGM_, int WGN_, int MINB_, int STAGES_, class Op_>
struct TcCfg {
  static constexpr bool kWide = false, kTc = true;
  static constexpr int BM = BM_, BN = BN_, WGM = WGM_, WGN = WGN_, MINB = MINB_,
                       STAGES = STAGES_;
  static constexpr int NT = 32 * WGM * WGN;
  static constexpr int WM = BM / WGM, WN = BN / WGN;  // one warp's sub-tile
  static constexpr int MI = WM / 16, NI = WN / 8;     // its mma tiles
  static constexpr bool kPairs = STAGES >= 4;
  using Op = Op_;
  static_assert(BM % WGM == 0 && BN % WGN == 0, "warps tile the block exactly");
  static_assert(WM % 16 == 0 && WN % 8 == 0, "whole mma tiles");
  static_assert(MI == 1 || MI % 2 == 0, "a lane's 2·MI rows: a run of 2, or runs of 4");
  static_assert(NI == 2 || NI % 4 == 0, "a lane's NI columns: a run of 2, or runs of 4");
  static_assert(STAGES >= 2, "at least double-buffered");
  static_assert(size_t(STAGES) * kBK * (BM + BN + 2 * kPad) * 4 <= 48 * 1024,
                "static shared memory");
};

// Where a lane's fragment values lie in the warp's sub-tile. A lane of group
// g reads Q values of a shared-memory row (Q = 2·MI rows of A: q = 2i + h for
// row g + 8h of mma tile i; Q = NI columns of B: q = j for column g of mma
// tile j) and they lie in runs: Q = 2 at 2g, 2g+1; else in runs of 4 at
// 32·(q/4) + 4g + q%4. A run is one 8- or 16-byte load; the 8 lanes of a
// quarter warp (g < 2, t < 4: rows 2t and 2t+1, row strides ≡ 4 mod 32
// words) read 32 distinct banks. The mma does not care which physical rows
// and columns it multiplies, so long as the accumulators go back to the same
// ones (tc_store).
template <int Q>
__device__ __forceinline__ constexpr int run_pos(int q, int g) {
  return Q == 2 ? 2 * g + q : 32 * (q / 4) + 4 * g + q % 4;
}
template <int Q>
__device__ __forceinline__ void load_runs(const float* row, int g, float (&v)[Q]) {
  if constexpr (Q == 2) {
    const float2 x = *reinterpret_cast<const float2*>(row + 2 * g);
    v[0] = x.x, v[1] = x.y;
  } else {
#pragma unroll
    for (int r = 0; r < Q / 4; ++r) {
      const float4 x = *reinterpret_cast<const float4*>(row + 32 * r + 4 * g);
      v[4 * r] = x.x, v[4 * r + 1] = x.y, v[4 * r + 2] = x.z, v[4 * r + 3] = x.w;
    }
  }
}

// One stage's fragments for the warp at (wm0, wn0): rows 2t (lo) and 2t+1 (hi).
template <class Cfg>
__device__ __forceinline__ void tc_frags(const float (*as)[Cfg::BM + kPad],
                                         const float (*bs)[Cfg::BN + kPad], int wm0, int wn0,
                                         int g, int t, uint32_t (&a)[Cfg::MI][4],
                                         uint32_t (&b)[Cfg::NI][2]) {
  using Op = typename Cfg::Op;
  float alo[2 * Cfg::MI], ahi[2 * Cfg::MI], blo[Cfg::NI], bhi[Cfg::NI];
  load_runs<2 * Cfg::MI>(as[2 * t] + wm0, g, alo);
  load_runs<2 * Cfg::MI>(as[2 * t + 1] + wm0, g, ahi);
  load_runs<Cfg::NI>(bs[2 * t] + wn0, g, blo);
  load_runs<Cfg::NI>(bs[2 * t + 1] + wn0, g, bhi);
#pragma unroll
  for (int i = 0; i < Cfg::MI; ++i)
    Op::frag_a(alo[2 * i], alo[2 * i + 1], ahi[2 * i], ahi[2 * i + 1], a[i]);
#pragma unroll
  for (int j = 0; j < Cfg::NI; ++j) Op::frag_b(blo[j], bhi[j], b[j]);
}

// acc += one stage's product for the warp at (wm0, wn0) of the block tile.
template <class Cfg>
__device__ __forceinline__ void tc_stage(const float (*as)[Cfg::BM + kPad],
                                         const float (*bs)[Cfg::BN + kPad], int wm0, int wn0,
                                         int g, int t, float (&acc)[Cfg::MI][Cfg::NI][4]) {
  uint32_t a[Cfg::MI][4], b[Cfg::NI][2];
  tc_frags<Cfg>(as, bs, wm0, wn0, g, t, a, b);
#pragma unroll
  for (int i = 0; i < Cfg::MI; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::NI; ++j) Cfg::Op::mma(acc[i][j], a[i], b[j]);
}

// acc += the product of two consecutive stages (k-tiles): in bf16 one
// m16n8k16 per mma tile, whose fragments hold k 0..7 (a[0], a[1], b[0]) and
// 8..15 (a[2], a[3], b[1]): the first stage's and the second's.
template <class Cfg>
__device__ __forceinline__ void tc_stage_pair(const float (*as0)[Cfg::BM + kPad],
                                              const float (*bs0)[Cfg::BN + kPad],
                                              const float (*as1)[Cfg::BM + kPad],
                                              const float (*bs1)[Cfg::BN + kPad], int wm0,
                                              int wn0, int g, int t,
                                              float (&acc)[Cfg::MI][Cfg::NI][4]) {
  if constexpr (Cfg::Op::kK16) {
    uint32_t a[Cfg::MI][4], b[Cfg::NI][2], a1[Cfg::MI][4], b1[Cfg::NI][2];
    tc_frags<Cfg>(as0, bs0, wm0, wn0, g, t, a, b);
    tc_frags<Cfg>(as1, bs1, wm0, wn0, g, t, a1, b1);
#pragma unroll
    for (int i = 0; i < Cfg::MI; ++i) a[i][2] = a1[i][0], a[i][3] = a1[i][1];
#pragma unroll
    for (int j = 0; j < Cfg::NI; ++j) b[j][1] = b1[j][0];
#pragma unroll
    for (int i = 0; i < Cfg::MI; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::NI; ++j) gpu::mma::bf16_m16n8k16(acc[i][j], a[i], b[j]);
  } else {
    tc_stage<Cfg>(as0, bs0, wm0, wn0, g, t, acc);
    tc_stage<Cfg>(as1, bs1, wm0, wn0, g, t, acc);
  }
}

// The pipeline over k-tiles [kt0, kt1) taken in pairs (S = STAGES ≥ 4, tile
// i in stage i mod S, one commit group per tile):
//   prologue: issue tiles 0 … S−3
//   pair i, i+1 (i even): wait until at most S−4 groups are pending (tiles
//             ≤ i+1 have landed), barrier; issue tiles i+S−2 and i+S−1 into
//             the stages of tiles i−2 and i−1, commit each; compute2 on the
//             stages of tiles i and i+1
//   an odd last tile: wait for every group, barrier, compute1 on its stage.
// The barrier of pair i follows every thread's reads of tiles i−2 and i−1
// (pair i−2's compute), whose stages it then overwrites; S ≥ 4 keeps them
// apart from the stages being read. Every branch on i is block-uniform.
template <class Cfg, class AL, class BL, class Compute2, class Compute1>
__device__ __forceinline__ void pipeline_pairs(AL& al, BL& bl, Smem<Cfg>& sm, int kt0, int kt1,
                                               Compute2&& compute2, Compute1&& compute1) {
  constexpr int S = Cfg::STAGES;
  static_assert(S >= 4, "two stages read, two written per barrier");
  const int nt = kt1 - kt0;
  if (nt <= 0) return;  // block-uniform

  al.start(kt0);
  bl.start(kt0);
#pragma unroll
  for (int st = 0; st < S - 2; ++st) {
    if (st < nt) {
      al.issue(sm.a[st]);
      bl.issue(sm.b[st]);
    }
    copy_commit();
  }
  const auto next = [](int s) { return s + 1 == S ? 0 : s + 1; };
  int rd = 0, wr = S - 2;
  int i = 0;
  for (; i + 1 < nt; i += 2) {
    copy_wait<S - 4>();
    __syncthreads();
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (i + S - 2 + u < nt) {  // block-uniform
        al.issue(sm.a[wr]);
        bl.issue(sm.b[wr]);
      }
      copy_commit();
      wr = next(wr);
    }
    compute2(rd, next(rd));
    rd = next(next(rd));
  }
  if (i < nt) {
    copy_wait<0>();
    __syncthreads();
    compute1(rd);
  }
}

// One mma tile's accumulators c (tile i, j of the warp at (wm0, wn0) of the
// block at (m0, n0)) to the epilogue. c[e] is at row run_pos<2·MI>(2i + e/2,
// g) and column run_pos<NI>(j, 2t + e%2) of the warp's sub-tile (C's
// fragment: c0, c1 at row g, columns 2t, 2t+1; c2, c3 at row g+8), so that
// a lane holds runs of consecutive rows and columns: the epilogues' groups of
// four consecutive outputs come straight from its accumulators, except
// along m with MI = 1 (runs of 2 rows), where lanes g and g^1 swap halves.
template <class Cfg, class Epi>
__device__ __forceinline__ void tc_store(const Epi& epi, const float (&acc)[Cfg::MI][Cfg::NI][4],
                                         int mw, int nw, int lane) {
  constexpr int MI = Cfg::MI, NI = Cfg::NI;
  const int g = lane >> 2, t = lane & 3;
  if constexpr (Epi::kAlongM) {
    if constexpr (MI == 1) {
      // Rows 2g, 2g+1 here, 2(g^1), 2(g^1)+1 at lane^4: an even g keeps
      // column 2t (e%2 = 0) and takes its partner's, an odd g column 2t+1.
      const bool odd = g & 1;
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const float s0 = __shfl_xor_sync(0xffffffffu, odd ? acc[0][j][0] : acc[0][j][1], 4);
        const float s1 = __shfl_xor_sync(0xffffffffu, odd ? acc[0][j][2] : acc[0][j][3], 4);
        const float k0 = odd ? acc[0][j][1] : acc[0][j][0];
        const float k1 = odd ? acc[0][j][3] : acc[0][j][2];
        const float v[4] = {odd ? s0 : k0, odd ? s1 : k1, odd ? k0 : s0, odd ? k1 : s1};
        epi.store_mcol(mw + 2 * (g & ~1), nw + run_pos<NI>(j, 2 * t + (odd ? 1 : 0)), v);
      }
    } else {
#pragma unroll
      for (int r = 0; r < MI / 2; ++r)  // runs of 4 rows: q = 4r .. 4r+3
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              const int q = 4 * r + u;
              v[u] = acc[q >> 1][j][2 * (q & 1) + e];
            }
            epi.store_mcol(mw + run_pos<2 * MI>(4 * r, g), nw + run_pos<NI>(j, 2 * t + e), v);
          }
    }
  } else {
#pragma unroll
    for (int q = 0; q < 2 * MI; ++q) {  // row run_pos<2·MI>(q, g): tile q/2, half q%2
      const int i = q >> 1, h = q & 1;
      const int m = mw + run_pos<2 * MI>(q, g);
      if constexpr (NI == 2) {
        // columns 4t + 2e + j
        const float v[4] = {acc[i][0][2 * h], acc[i][1][2 * h], acc[i][0][2 * h + 1],
                            acc[i][1][2 * h + 1]};
        epi.store_nrow(m, nw + 4 * t, v);
      } else {
#pragma unroll
        for (int r = 0; r < NI / 4; ++r)  // columns 32r + 8t + 4e + (j mod 4)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float v[4] = {acc[i][4 * r][2 * h + e], acc[i][4 * r + 1][2 * h + e],
                                acc[i][4 * r + 2][2 * h + e], acc[i][4 * r + 3][2 * h + e]};
            epi.store_nrow(m, nw + 32 * r + 8 * t + 4 * e, v);
          }
      }
    }
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
  const auto one = [&](int rd) { tc_stage<Cfg>(sm.a[rd], sm.b[rd], wm0, wn0, g, t, acc); };
  if constexpr (Cfg::kPairs) {
    pipeline_pairs<Cfg>(
        al, bl, sm, kt0, kt1,
        [&](int r0, int r1) {
          tc_stage_pair<Cfg>(sm.a[r0], sm.b[r0], sm.a[r1], sm.b[r1], wm0, wn0, g, t, acc);
        },
        one);
  } else {
    pipeline<Cfg>(al, bl, sm, kt0, kt1, one);
  }
  tc_store<Cfg>(epi, acc, m0 + wm0, n0 + wn0, lane);
}

}  // namespace hpmc::gpu::implicit_detail
