// implicit_nhwc_kernels.cuh — the bf16 tensor-core convolution on channels-last
// operands: the tap-major forward and backward_data of training.precision bf16
// when the reduction's channels come in whole k-tiles of 32 (nhwc_forward /
// nhwc_backward_data, implicit_plan.h), and the weight gradient (below). The
// upsample fold runs on the same main loops (implicit_upconv_nhwc_kernels.cuh).
// conv2d_implicit_gemm.cu is the only includer; read implicit_gemm_tc.cuh
// first (fragments, run_pos, tc_store).
//
// Why: the engine of implicit_gemm_tc.cuh keeps FP32 operands in shared memory
// and gathers NCHW activations four bytes at a time, so that a k-tile of 8
// costs a copy per value, and each value is read from shared memory as FP32
// and rounded per fragment: about 8 instructions per mma, at 4–10% of the
// tensor cores' peak. Here both operands arrive rounded to bf16 with the
// channel (the reduction) fastest:
//   A   the activation in NHWC bf16 (prep_kernel): row m of a k-tile
//       (tap r, s; channels c0 … c0+31) is 64 contiguous bytes of one pixel;
//   B   the weights as rows of k (KmajorWeightsBf16): forward
//       wb[ko][(r·S + s)·C + c], backward_data wb[c][(r·S + s)·K + ko].
// A stage is BM rows of A and BN rows of B, 64 bytes (32 k) each, written by
// 16-byte cp.async (4 pieces a row) and read by ldmatrix: one ldmatrix.x4
// gives a 16×16 A fragment or the 16×8 B fragments of two mma tiles, already
// in the mma's layout. The fragments of the next 16 k are read while the
// mmas of the current 16 run (two register sets).
//
// Shared memory: piece j of row r is stored at piece j ^ ((r >> 2) & 3) of
// its 64-byte row, so that the 8 rows an ldmatrix reads together (rows
// 4g + q, g < 8, run_pos's order) fall into 4 distinct 16-byte bank groups
// of each 128 bytes: two ways, where unswizzled rows would all share one
// (eight ways).
//
// The mma sequence of each output is implicit_gemm_tc.cuh's bf16 one — k
// ascending, 16 at a time, the same bf16 roundings of the same values — so
// with the same split the results are the same bits; the split's slices are
// k-tiles of 32 here (conv2d_implicit_gemm.cu: nhwc_tps).
//
// The tile: BM = BN = 128, 4 warps of 64×64 (tc_store's TcCfg<128, 128, 2,
// 2, …>), kStages stages of 16 KB in dynamic shared memory, 2 blocks an SM.
// CIFAR conv2's forward at batch 64 (H200, bf16, 2 slices, the kernel alone):
// 66 µs on the FP32-stage engine, 38 µs here; with its two conversion passes
// the region conv2+relu2+pool2 forward of `hpmc bench` went 0.091 → 0.069 ms
// (docs/PERFORMANCE.md). Producing the NHWC bf16 copy in the layer before
// (an epilogue's second output) would save the activation's pass.
//
// On an sm_90a build running on a Hopper GPU the forward and backward_data
// tiles (plain and folded) multiply on wgmma instead (nhwc_wg_tile below:
// the stages read by the tensor cores, no fragments in registers, six
// stages): the same products summed in the same order, and the same bits on
// the H200 (the tests compare both main loops with the engine). CIFAR conv2's
// forward at batch 64: 41.6 → 33.0 µs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "layers/gpu/cp_async.cuh"
#include "layers/gpu/implicit_conv_kernels.cuh"
#include "layers/gpu/mma.cuh"
#include "layers/gpu/wgmma.cuh"

namespace hpmc::gpu::implicit_detail::nhwc {

constexpr int kBM = 128, kBN = 128, kBKN = 32, kNT = 128, kStages = 4;
constexpr int kPieces = kBKN / 8;  // 16-byte pieces of a row
using Tc = TcCfg<128, 128, 2, 2, 2, 5, OpBf16>;  // the warp tiling, for tc_store
static_assert(Tc::BM == kBM && Tc::BN == kBN && Tc::NT == kNT, "one tiling");
constexpr int kMI = Tc::MI, kNI = Tc::NI;

struct Stage {
  uint4 a[kBM][kPieces];
  uint4 b[kBN][kPieces];
};
constexpr size_t kSmemBytes = sizeof(Stage) * kStages;
constexpr uint32_t kStageBytes = sizeof(Stage), kBOffset = sizeof(uint4) * kBM * kPieces;

__device__ __forceinline__ int swizzle(int row, int piece) { return piece ^ ((row >> 2) & 3); }

// Where a loader puts piece `piece` of row `row` (A: the tile's pixel m0 +
// row, B: its channel n0 + row) in a stage's operand: the index of a uint4 of
// its [128][kPieces].
//   MmaSlots  the ldmatrix kernels': rows in order, swizzle() above;
//   WgSlots   the wgmma kernels' (wgmma.cuh's 64-byte swizzle), rows placed
//             so that each lane's accumulators are runs of 4 pixels and of 4
//             channels (as tc_store's): pixel m = 32w + 4g + 2h + e at row
//             64h + 16w + 8e + g (instruction h's row 16w + 8e + g: warp w,
//             lane group g, accumulator half e), channel n = 32(j/4) + 8t +
//             4e + j%4 at column 8j + 2t + e (lane t's values of 8-column
//             group j).
struct MmaSlots {
  __device__ static int a(int row, int piece) { return row * kPieces + swizzle(row, piece); }
  __device__ static int b(int row, int piece) { return a(row, piece); }
};
struct WgSlots {
  __device__ static int at(int r, int piece) { return r * kPieces + (piece ^ ((r >> 1) & 3)); }
  __device__ static int a(int m, int piece) {
    const int q = m & 3;
    return at(64 * (q >> 1) + 16 * (m >> 5) + 8 * (q & 1) + ((m >> 2) & 7), piece);
  }
  __device__ static int b(int n, int piece) {
    const int j = 4 * (n >> 5) + (n & 3);
    return at(8 * j + 2 * ((n >> 3) & 3) + ((n >> 2) & 1), piece);
  }
};

// A: rows m = output pixels (forward: (n, p, q), backward_data: (n, h, w)),
// k = (r·S + s)·Cin + ch of the NHWC bf16 tensor `in` (forward x: Cin = C,
// H×W; backward_data dy: Cin = K, P×Q, stride 1). Thread t copies piece t % 4
// of rows t/4 + 32i, i < 4; a k-tile lies inside one tap (Cin % 32 == 0).
template <bool DGRAD>
struct ALoader {
  const ConvArgs& a;
  const uint16_t* in;
  int piece, row0;
  int pix[4];       // the row's pixel index (n·hin + u)·win + v at tap (0, 0)
  int us[4], vs[4];  // u, v: forward p·st − pad, q·st − pad; backward_data h + pad, w + pad
  unsigned rows_ok = 0;
  int r = 0, s = 0, c0 = 0;

  __device__ __forceinline__ int cin() const { return DGRAD ? a.K : a.C; }
  __device__ __forceinline__ int hin() const { return DGRAD ? a.P : a.H; }
  __device__ __forceinline__ int win() const { return DGRAD ? a.Q : a.W; }

  __device__ __forceinline__ ALoader(const ConvArgs& a_, const uint16_t* in_, int m0, int tid)
      : a(a_), in(in_), piece(tid % kPieces), row0(tid / kPieces) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + row0 + 32 * i;
      int img, rest, u, v;
      if constexpr (DGRAD) {
        const bool ok = m < a.NHW;
        a.fHW.divmod(ok ? m : 0, img, rest);
        a.fW.divmod(rest, u, v);
        u += a.pad, v += a.pad;
        if (ok) rows_ok |= 1u << i;
        pix[i] = (img * a.P + u) * a.Q + v;
      } else {
        const bool ok = m < a.NPQ;
        a.fPQ.divmod(ok ? m : 0, img, rest);
        a.fQ.divmod(rest, u, v);
        u = u * a.stride - a.pad, v = v * a.stride - a.pad;
        if (ok) rows_ok |= 1u << i;
        pix[i] = (img * a.H + u) * a.W + v;
      }
      us[i] = u, vs[i] = v;
    }
  }
  __device__ __forceinline__ void start(int kt) {
    const int k0 = kt * kBKN, tap = k0 / cin();
    c0 = k0 - tap * cin();
    r = tap / a.S;
    s = tap - r * a.S;
  }
  template <class L = MmaSlots>
  __device__ __forceinline__ void issue(uint4 (*st)[kPieces]) {
    const int dr = DGRAD ? -r : r, ds = DGRAD ? -s : s;
    const int tap = dr * win() + ds;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int u = us[i] + dr, v = vs[i] + ds;
      const bool ok = ((rows_ok >> i) & 1u) && (unsigned)u < (unsigned)hin() &&
                      (unsigned)v < (unsigned)win();
      const uint16_t* src =
          ok ? in + ((long long)(pix[i] + tap) * cin() + c0 + 8 * piece) : in;
      copy16(reinterpret_cast<float*>(&st[0][0] + L::a(row0 + 32 * i, piece)),
             reinterpret_cast<const float*>(src), ok);
    }
    c0 += kBKN;
    if (c0 == cin()) {  // block-uniform: the next tap
      c0 = 0;
      if (++s == a.S) s = 0, ++r;
    }
  }
};

// B: rows n (forward: ko, backward_data: c) of wb[n][k], kdim values each
// (kdim % 32 == 0). The same piece mapping as A.
struct BLoader {
  const uint16_t* w;
  int piece, row0, rows, kdim, n0, k0 = 0;

  __device__ __forceinline__ BLoader(const uint16_t* w_, int rows_, int kdim_, int n0_, int tid)
      : w(w_), piece(tid % kPieces), row0(tid / kPieces), rows(rows_), kdim(kdim_), n0(n0_) {}
  __device__ __forceinline__ void start(int kt) { k0 = kt * kBKN; }
  template <class L = MmaSlots>
  __device__ __forceinline__ void issue(uint4 (*st)[kPieces]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + 32 * i, n = n0 + row;
      const bool ok = n < rows;
      const uint16_t* src = ok ? w + ((long long)n * kdim + k0 + 8 * piece) : w;
      copy16(reinterpret_cast<float*>(&st[0][0] + L::b(row, piece)),
             reinterpret_cast<const float*>(src), ok);
    }
    k0 += kBKN;
  }
};

// The pipeline over nt k-tiles of 32 (S = kStages, tile i in stage i mod S,
// one commit group a tile): issue tiles 0 … S−2; wait for tile 0, barrier,
// read the fragments of its first 16 k. Tile i: read its second 16 k, mma the
// first; wait for tile i+1 (at most S−3 groups pending), barrier — every warp
// is done with tile i−1's stage — issue tile i+S−1 into it; read tile i+1's
// first 16 k, mma tile i's second. issue(i, stage) is called for i ascending;
// read(stage, half, buf) fills fragment set buf, mma(buf) multiplies it.
template <class Issue, class Read, class Mma>
__device__ __forceinline__ void nhwc_pipeline(int nt, Issue&& issue, Read&& read, Mma&& mma) {
  constexpr int S = kStages;
  if (nt <= 0) return;  // block-uniform
#pragma unroll
  for (int st = 0; st < S - 1; ++st) {
    if (st < nt) issue(st, st);
    copy_commit();
  }
  copy_wait<S - 2>();
  __syncthreads();
  read(0, 0, 0);
  int rd = 0, wr = S - 1;
  for (int i = 0; i < nt; ++i) {
    read(rd, 1, 1);
    mma(0);
    copy_wait<S - 3>();
    __syncthreads();
    if (i + S - 1 < nt) issue(i + S - 1, wr);  // block-uniform
    copy_commit();
    rd = rd + 1 == S ? 0 : rd + 1;
    wr = wr + 1 == S ? 0 : wr + 1;
    if (i + 1 < nt) read(rd, 0, 0);
    mma(1);
  }
}

// acc += the fragment set's products: a[i] (16 rows × 16 k) by the b pairs
// of mma tiles 2jp, 2jp+1.
__device__ __forceinline__ void nhwc_mma(const uint32_t (&a)[kMI][4],
                                         const uint32_t (&b)[kNI / 2][4],
                                         float (&acc)[kMI][kNI][4]) {
#pragma unroll
  for (int i = 0; i < kMI; ++i)
#pragma unroll
    for (int j = 0; j < kNI; ++j) {
      const uint32_t bj[2] = {b[j >> 1][2 * (j & 1)], b[j >> 1][2 * (j & 1) + 1]};
      gpu::mma::bf16_m16n8k16(acc[i][j], a[i], bj);
    }
}

__device__ __forceinline__ void zero(float (&acc)[kMI][kNI][4]) {
#pragma unroll
  for (int i = 0; i < kMI; ++i)
#pragma unroll
    for (int j = 0; j < kNI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
}

// The forward / backward_data tile's products over k-tiles [kt0, kt1) of 32
// into acc (tc_store's layout).
template <class AL>
__device__ __forceinline__ void nhwc_tile(AL& al, BLoader& bl, int kt0, int kt1,
                                          float (&acc)[kMI][kNI][4]) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Stage* const sm = reinterpret_cast<Stage*>(smem_raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm0 = (warp % Tc::WGM) * Tc::WM, wn0 = (warp / Tc::WGM) * Tc::WN;
  zero(acc);

  // Each lane's ldmatrix row address in a stage, for the first 16 k (the
  // second: pieces 2, 3, the byte offset ^ 32). Matrix mat = lane / 8, its
  // row lane % 8: A tile i takes matrices (rows g, k 0–7), (g+8, 0–7),
  // (g, 8–15), (g+8, 8–15) = a0…a3; B tiles 2jp, 2jp+1 take (n g, k 0–7),
  // (g, 8–15) of each = b0, b1 of both.
  const int mat = lane >> 3, rr = lane & 7;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(sm));
  uint32_t aoff[kMI], boff[kNI / 2];
#pragma unroll
  for (int i = 0; i < kMI; ++i) {
    const int row = wm0 + run_pos<2 * kMI>(2 * i + (mat & 1), rr);
    aoff[i] = uint32_t(row * kPieces + swizzle(row, mat >> 1)) * 16u;
  }
#pragma unroll
  for (int jp = 0; jp < kNI / 2; ++jp) {
    const int row = wn0 + run_pos<kNI>(2 * jp + (mat >> 1), rr);
    boff[jp] = kBOffset + uint32_t(row * kPieces + swizzle(row, mat & 1)) * 16u;
  }
  uint32_t af[2][kMI][4], bf[2][kNI / 2][4];
  al.start(kt0);
  bl.start(kt0);
  nhwc_pipeline(
      kt1 - kt0,
      [&](int, int st) {
        al.issue(sm[st].a);
        bl.issue(sm[st].b);
      },
      [&](int st, int half, int buf) {
        const uint32_t sb = base + uint32_t(st) * kStageBytes, x = half ? 32u : 0u;
#pragma unroll
        for (int i = 0; i < kMI; ++i) gpu::mma::ldmatrix_x4(af[buf][i], sb + (aoff[i] ^ x));
#pragma unroll
        for (int jp = 0; jp < kNI / 2; ++jp)
          gpu::mma::ldmatrix_x4(bf[buf][jp], sb + (boff[jp] ^ x));
      },
      [&](int buf) { nhwc_mma(af[buf], bf[buf], acc); });
}

// acc through the epilogue (tc_store: each lane stores its runs of 4 rows).
template <class Epi>
__device__ __forceinline__ void nhwc_store(const Epi& epi, const float (&acc)[kMI][kNI][4],
                                           int m0, int n0) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm0 = (warp % Tc::WGM) * Tc::WM, wn0 = (warp / Tc::WGM) * Tc::WN;
  tc_store<Tc>(epi, acc, m0 + wm0, n0 + wn0, lane);
}

// ---- the same tiles on wgmma (sm_90a) ----------------------------------------
//
// The block (one warpgroup) multiplies its 128×128 tile as two wgmma
// m64n128k16 a 16 k (rows 0–63 and 64–127 of the stage, WgSlots' order),
// both operands read from the stage by the tensor cores: no ldmatrix, no
// fragments in registers, the 128 accumulators a thread as the ldmatrix
// kernel's. kWgStages stages, tile i + kWgStages − 2 issued into the stage
// of tile i − 2 once every warp has waited for tile i − 2's products (the
// barrier after the wait for tile i), so one wgmma group is in flight while
// the next tile's copies land. The products and their order per output are
// the ldmatrix kernel's (k ascending, 16 at a time, the same bf16 values).
constexpr int kWgStages = 6;
constexpr size_t kWgSmemBytes = sizeof(Stage) * kWgStages + 1024;  // + the 1 KB alignment

// The dynamic shared memory rounded up to 1 KB (the swizzle's period is 512 bytes).
__device__ __forceinline__ unsigned char* wg_smem() {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  return smem_raw + ((1024u - (raw & 1023u)) & 1023u);
}

template <class AL>
__device__ __forceinline__ void nhwc_wg_tile(AL& al, BLoader& bl, int kt0, int kt1,
                                             float (&d)[2][64]) {
  constexpr int S = kWgStages, D = S - 2;  // D: tiles in flight ahead of the one multiplied
  Stage* const sm = reinterpret_cast<Stage*>(wg_smem());
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(sm));
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int e = 0; e < 64; ++e) d[h][e] = 0.f;
  const int nt = kt1 - kt0;  // block-uniform
  if (nt <= 0) return;
  al.start(kt0);
  bl.start(kt0);
#pragma unroll
  for (int st = 0; st < D; ++st) {
    if (st < nt) {
      al.template issue<WgSlots>(sm[st].a);
      bl.template issue<WgSlots>(sm[st].b);
    }
    copy_commit();
  }
  const uint64_t da = wgmma::desc_k64(base), db = wgmma::desc_k64(base + kBOffset);
  int rd = 0, wr = D;
  for (int i = 0; i < nt; ++i) {
    copy_wait<D - 1>();  // tile i has landed (this thread's copies)
    wgmma::fence_proxy_async();
    __syncthreads();  // everyone's copies of tile i; every warp is past tile i − 2's products
    if (i + D < nt) {
      al.template issue<WgSlots>(sm[wr].a);
      bl.template issue<WgSlots>(sm[wr].b);
    }
    copy_commit();
    const uint64_t off = uint64_t(rd) * (kStageBytes >> 4);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        wgmma::m64n128k16_bf16(d[h], da + off + ((h * 64 * 64 + kk * 32) >> 4),
                               db + off + ((kk * 32) >> 4));
    wgmma::commit();
    wgmma::wait<1>();
    rd = rd + 1 == S ? 0 : rd + 1;
    wr = wr + 1 == S ? 0 : wr + 1;
  }
  wgmma::wait<0>();
  wgmma::fence_operands(d[0]);
  wgmma::fence_operands(d[1]);
}

// d through the epilogue, as tc_store: lane (w, g, t) holds pixels m0 + 32w +
// 4g + u (u < 4: d[u / 2][4j + 2(u % 2) + e]) of channels n0 + 32(j / 4) +
// 8t + 4e + j % 4 (WgSlots).
template <class Epi>
__device__ __forceinline__ void nhwc_wg_store(const Epi& epi, const float (&d)[2][64], int m0,
                                              int n0) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int mr = m0 + 32 * w + 4 * g;
  if constexpr (Epi::kAlongM) {
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float v[4] = {d[0][4 * j + e], d[0][4 * j + 2 + e], d[1][4 * j + e],
                            d[1][4 * j + 2 + e]};
        epi.store_mcol(mr, n0 + 32 * (j >> 2) + 8 * t + 4 * e + (j & 3), v);
      }
  } else {
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int h = u >> 1, o = 2 * (u & 1) + e;
          const float v[4] = {d[h][16 * r + o], d[h][16 * r + 4 + o], d[h][16 * r + 8 + o],
                              d[h][16 * r + 12 + o]};
          epi.store_nrow(mr + u, n0 + 32 * r + 8 * t + 4 * e, v);
        }
  }
}

// Forward (DGRAD false: x NHWC bf16, wb[ko][k]) or backward_data (true: dy
// NHWC bf16, wb[c][k]); slice blockIdx.z covers k-tiles (of 32)
// [z·tps, min((z+1)·tps, ktiles)). kSmemBytes of dynamic shared memory.
// WG: the wgmma tile (kWgSmemBytes; an sm_90a build), else ldmatrix and
// mma.sync (kSmemBytes).
template <bool DGRAD, class Epi, bool WG = false>
__global__ void __launch_bounds__(kNT, 2)
    conv_nhwc_kernel(const __grid_constant__ ConvArgs a, const uint16_t* __restrict__ in,
                     const uint16_t* __restrict__ wb, int tps, const __grid_constant__ Epi epi) {
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int kdim = DGRAD ? a.KRS : a.CRS;
  const int ktiles = kdim / kBKN;
  const int kt0 = min((int)blockIdx.z * tps, ktiles), kt1 = min(kt0 + tps, ktiles);
  ALoader<DGRAD> al(a, in, m0, threadIdx.x);
  BLoader bl(wb, DGRAD ? a.C : a.K, kdim, n0, threadIdx.x);
  if constexpr (WG) {
    float d[2][64];
    nhwc_wg_tile(al, bl, kt0, kt1, d);
    nhwc_wg_store(epi, d, m0, n0);
  } else {
    float acc[kMI][kNI][4];
    nhwc_tile(al, bl, kt0, kt1, acc);
    nhwc_store(epi, acc, m0, n0);
  }
}

// ---- the weight gradient ----------------------------------------------------
//
// dw[ko][(r·S + s)·C + c] = Σ over pixels k = (n, p, q) of dy(k, ko) ·
// x((n, p·st − pad + r, q·st − pad + s), c), from dy and x in NHWC bf16
// (GEMM_M = K, GEMM_N = C·R·S tap-major, GEMM_K = N·P·Q). A block's 128
// columns lie in one tap (C % 128 == 0). Both operands are rows of k (a
// pixel) with m or n contiguous, 32 pixels a stage, 256-byte rows of 16
// pieces, stored at piece ^ (row & 7); ldmatrix.trans reads them as the
// mma's fragments (8 rows of k, 8 consecutive m or n each). The
// accumulators are in the mma's own layout (rows 16i + g, g + 8; columns
// 8j + 2t, 2t + 1). The same mma sequence as implicit_gemm_tc.cuh's
// weight gradient: the same bits where the slices and the last 16 pixels
// agree.
struct WStage {
  uint4 a[kBKN][kBM / 8];  // [pixel][ko pieces]
  uint4 b[kBKN][kBN / 8];  // [pixel][c pieces]
};
static_assert(sizeof(WStage) == sizeof(Stage), "the same stages");

// The weight gradient's main loop: acc += the block's 128 rows of ko (from m0)
// by its 128 columns (channels cb … cb + 127 of one tap) over k-tiles [kt0,
// kt1) of 32 pixels. rows(k, dp, xp) says whether pixel k exists and, if so,
// gives its row of dy (dp: K values from dyh) and the row of x its tap reads
// (xp: C values from xh; −1 where the tap falls outside the image).
template <class Rows>
__device__ __forceinline__ void nhwc_wgrad_tile(const Rows& rows, const uint16_t* __restrict__ xh,
                                                const uint16_t* __restrict__ dyh, int K, int C,
                                                int m0, int cb, int kt0, int kt1,
                                                float (&acc)[kMI][kNI][4]) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  WStage* const sm = reinterpret_cast<WStage*>(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm0 = (warp % Tc::WGM) * Tc::WM, wn0 = (warp / Tc::WGM) * Tc::WN;
  zero(acc);

  // Thread t copies pieces 4(t % 4) … +3 of row (pixel) t / 4 of both operands.
  const int krow = tid >> 2, pc0 = (tid & 3) * 4;
  const auto issue = [&](int t, int st) {
    int dp = 0, xp = -1;
    const bool kv = rows((kt0 + t) * kBKN + krow, dp, xp);
    const bool xv = kv && xp >= 0;
    const uint16_t* dsrc = dyh + ((long long)(kv ? dp : 0) * K + m0);
    const uint16_t* xsrc = xh + ((long long)(xv ? xp : 0) * C + cb);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int pc = pc0 + e, slot = pc ^ (krow & 7);
      const bool dv = kv && m0 + 8 * pc < K;
      copy16(reinterpret_cast<float*>(&sm[st].a[krow][slot]),
             reinterpret_cast<const float*>(dv ? dsrc + 8 * pc : dyh), dv);
      copy16(reinterpret_cast<float*>(&sm[st].b[krow][slot]),
             reinterpret_cast<const float*>(xv ? xsrc + 8 * pc : xh), xv);
    }
  };
  // Lane addresses (matrix mat = lane / 8, its row lane % 8), first 16 pixels
  // (the second: + 16 rows): A tile i takes (m 16i, 16i + 8; k 0–7, 8–15),
  // B tiles 2jp, 2jp+1 (n 16jp: k 0–7, 8–15; n 16jp + 8: the same).
  const int mat = lane >> 3, rr = lane & 7;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(sm));
  constexpr uint32_t kRows16 = 16u * (kBM / 8) * 16u, kWB = sizeof(uint4) * kBKN * (kBM / 8);
  uint32_t aoff[kMI], boff[kNI / 2];
#pragma unroll
  for (int i = 0; i < kMI; ++i) {
    const int kr = 8 * (mat >> 1) + rr, pc = (wm0 + 16 * i + 8 * (mat & 1)) / 8;
    aoff[i] = uint32_t(kr * (kBM / 8) + (pc ^ (kr & 7))) * 16u;
  }
#pragma unroll
  for (int jp = 0; jp < kNI / 2; ++jp) {
    const int kr = 8 * (mat & 1) + rr, pc = (wn0 + 16 * jp + 8 * (mat >> 1)) / 8;
    boff[jp] = kWB + uint32_t(kr * (kBN / 8) + (pc ^ (kr & 7))) * 16u;
  }
  uint32_t af[2][kMI][4], bf[2][kNI / 2][4];
  nhwc_pipeline(
      kt1 - kt0, issue,
      [&](int st, int half, int buf) {
        const uint32_t sb = base + uint32_t(st) * kStageBytes + (half ? kRows16 : 0u);
#pragma unroll
        for (int i = 0; i < kMI; ++i) gpu::mma::ldmatrix_x4(af[buf][i], sb + aoff[i], true);
#pragma unroll
        for (int jp = 0; jp < kNI / 2; ++jp)
          gpu::mma::ldmatrix_x4(bf[buf][jp], sb + boff[jp], true);
      },
      [&](int buf) { nhwc_mma(af[buf], bf[buf], acc); });
}

// The weight gradient tile's values, in the mma's own layout (rows 16i + g,
// g + 8; columns 8j + 2t, 2t + 1): store(ko, column in the block, v, v at the
// next column) for every ko < K.
template <class Store>
__device__ __forceinline__ void nhwc_wgrad_store(const float (&acc)[kMI][kNI][4], int K, int m0,
                                                 const Store& store) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm0 = (warp % Tc::WGM) * Tc::WM, wn0 = (warp / Tc::WGM) * Tc::WN;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < kMI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ko = m0 + wm0 + 16 * i + 8 * h + g;
      if (ko >= K) continue;
#pragma unroll
      for (int j = 0; j < kNI; ++j)
        store(ko, wn0 + 8 * j + 2 * t, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
    }
}

// Slice blockIdx.z covers k-tiles (of 32 pixels) [z·tps, min((z+1)·tps,
// ktiles)). add_taps: dw[(ko·C + c)·RS + rs] += the block's values (one
// slice); else slice z of out ([K][C·R·S], the tap-major columns).
// kSmemBytes of dynamic shared memory. K % 32 == 0.
__global__ void __launch_bounds__(kNT, 2)
    conv_nhwc_wgrad_kernel(const __grid_constant__ ConvArgs a, const uint16_t* __restrict__ xh,
                           const uint16_t* __restrict__ dyh, int tps, float* __restrict__ out,
                           bool add_taps) {
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int tap = n0 / a.C, cb = n0 - tap * a.C;
  const int r = tap / a.S, s = tap - r * a.S;
  const int ktiles = int((a.NPQ + kBKN - 1) / kBKN);
  const int kt0 = min((int)blockIdx.z * tps, ktiles), kt1 = min(kt0 + tps, ktiles);
  const auto rows = [&](int k, int& dp, int& xp) {
    if (k >= a.NPQ) return false;
    int img, pq, p, q;
    a.fPQ.divmod(k, img, pq);
    a.fQ.divmod(pq, p, q);
    const int h = p * a.stride - a.pad + r, w = q * a.stride - a.pad + s;
    dp = k;
    xp = (unsigned)h < (unsigned)a.H && (unsigned)w < (unsigned)a.W ? (img * a.H + h) * a.W + w
                                                                    : -1;
    return true;
  };
  float acc[kMI][kNI][4];
  nhwc_wgrad_tile(rows, xh, dyh, a.K, a.C, m0, cb, kt0, kt1, acc);
  nhwc_wgrad_store(acc, a.K, m0, [&](int ko, int nl, float v0, float v1) {
    if (add_taps) {
      float* o = out + (((size_t)ko * a.C + cb + nl) * a.RS + tap);
      o[0] = o[0] + v0;
      o[a.RS] = o[a.RS] + v1;
    } else {
      float* o = out + ((size_t)blockIdx.z * a.K + ko) * a.CRS + n0 + nl;
      *reinterpret_cast<float2*>(o) = make_float2(v0, v1);
    }
  });
}

// A pass's operands in bf16 in one launch: blocks [0, act_blocks) convert the
// activation (to_nhwc_tile), the others the weights (wop, a grid-stride loop
// over wop.count() elements; NoWeights: none). Two small passes of one
// launch each were two launches' ramps and tails (CIFAR's six weight
// conversions about 22 µs a step on their own, their elements a few
// hundred thousand at most).
//
// y[n][p][c] = bf16(x[n][c][p]) for p < HW, C % 32 == 0: a block takes 64
// pixels × 32 channels of one image, reads them along the pixels, writes 8
// channels (16 bytes) a thread; its block index counts pixel tiles fastest
// (ptiles of them), then channel tiles, then images.
constexpr int kToNhwcPix = 64, kToNhwcThreads = 256;
__device__ __forceinline__ void to_nhwc_tile(const float* __restrict__ x, int C, int HW,
                                             int ptiles, long long block, uint4* __restrict__ y,
                                             float (&tile)[32][kToNhwcPix + 1]) {
  const int ctiles = C / 32;
  const int p0 = int(block % ptiles) * kToNhwcPix, c0 = int((block / ptiles) % ctiles) * 32;
  const long long img = block / ((long long)ptiles * ctiles);
  const float* xb = x + ((size_t)img * C + c0) * HW;
  for (int e = threadIdx.x; e < 32 * kToNhwcPix; e += kToNhwcThreads) {
    const int c = e / kToNhwcPix, p = e % kToNhwcPix;
    tile[c][p] = p0 + p < HW ? __ldg(xb + (size_t)c * HW + p0 + p) : 0.f;
  }
  __syncthreads();
  const int p = threadIdx.x / 4, q = threadIdx.x % 4;
  if (p0 + p >= HW) return;
  uint4 o;
  o.x = gpu::mma::bf16x2(tile[8 * q][p], tile[8 * q + 1][p]);
  o.y = gpu::mma::bf16x2(tile[8 * q + 2][p], tile[8 * q + 3][p]);
  o.z = gpu::mma::bf16x2(tile[8 * q + 4][p], tile[8 * q + 5][p]);
  o.w = gpu::mma::bf16x2(tile[8 * q + 6][p], tile[8 * q + 7][p]);
  y[(((size_t)img * HW + p0 + p) * C + c0) / 8 + q] = o;
}

// The weights w[ko][c][rs] as bf16 rows of k, element o of wb: forward
// wb[ko][rs·C + c], backward_data wb[c][rs·K + ko].
struct KmajorWeightsBf16 {
  const float* w;
  int K, C, RS;
  bool for_dgrad;
  uint16_t* wb;
  __host__ __device__ long long count() const { return (long long)K * C * RS; }
  __device__ void operator()(long long o) const {
    const int inner = for_dgrad ? K : C;  // the k's channel: c (forward) or ko
    const int ch = int(o % inner);
    const long long t = o / inner;
    const int rs = int(t % RS), row = int(t / RS);
    const int ko = for_dgrad ? ch : row, c = for_dgrad ? row : ch;
    wb[o] = gpu::mma::bf16(__ldg(w + ((size_t)ko * C + c) * RS + rs));
  }
};

struct NoWeights {
  __host__ __device__ long long count() const { return 0; }
  __device__ void operator()(long long) const {}
};

template <class W>
__global__ void __launch_bounds__(kToNhwcThreads)
    prep_kernel(const float* __restrict__ x, int C, int HW, int ptiles, long long act_blocks,
                uint4* __restrict__ y, W wop) {
  __shared__ float tile[32][kToNhwcPix + 1];
  if ((long long)blockIdx.x < act_blocks) {
    to_nhwc_tile(x, C, HW, ptiles, blockIdx.x, y, tile);
    return;
  }
  const long long count = wop.count(), step = (gridDim.x - act_blocks) * kToNhwcThreads;
  for (long long e = (blockIdx.x - act_blocks) * kToNhwcThreads + threadIdx.x; e < count;
       e += step)
    wop(e);
}

}  // namespace hpmc::gpu::implicit_detail::nhwc
