// implicit_nhwc_kernels.cuh — the bf16 tensor-core convolution on channels-last
// operands: the tap-major forward and backward_data of training.precision bf16
// when the reduction's channels come in whole k-tiles of 32 (nhwc_forward /
// nhwc_backward_data, implicit_plan.h). conv2d_implicit_gemm.cu is the only
// includer; read implicit_gemm_tc.cuh first (fragments, run_pos, tc_store).
//
// Why: the engine of implicit_gemm_tc.cuh keeps FP32 operands in shared memory
// and gathers NCHW activations four bytes at a time, so that a k-tile of 8
// costs a copy per value, and each value is read from shared memory as FP32
// and rounded per fragment: about 8 instructions per mma, at 4–10% of the
// tensor cores' peak. Here both operands arrive rounded to bf16 with the
// channel (the reduction) fastest:
//   A   the activation in NHWC bf16 (to_nhwc_bf16_kernel): row m of a k-tile
//       (tap r, s; channels c0 … c0+31) is 64 contiguous bytes of one pixel;
//   B   the weights as rows of k (weights_kmajor_bf16_kernel): forward
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
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "layers/gpu/cp_async.cuh"
#include "layers/gpu/implicit_conv_kernels.cuh"
#include "layers/gpu/mma.cuh"

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
      const int row = row0 + 32 * i;
      copy16(reinterpret_cast<float*>(&st[row][swizzle(row, piece)]),
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
  __device__ __forceinline__ void issue(uint4 (*st)[kPieces]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + 32 * i, n = n0 + row;
      const bool ok = n < rows;
      const uint16_t* src = ok ? w + ((long long)n * kdim + k0 + 8 * piece) : w;
      copy16(reinterpret_cast<float*>(&st[row][swizzle(row, piece)]),
             reinterpret_cast<const float*>(src), ok);
    }
    k0 += kBKN;
  }
};

// The block's tile over k-tiles [kt0, kt1) of 32. Pipeline (S = kStages, tile
// i in stage i mod S, one commit group a tile): issue tiles 0 … S−2; wait for
// tile 0, barrier, read the fragments of its first 16 k. Tile i: read its
// second 16 k, mma the first; wait for tile i+1 (at most S−3 groups pending),
// barrier — every warp is done with tile i−1's stage — issue tile i+S−1 into
// it; read tile i+1's first 16 k, mma tile i's second.
template <class AL, class Epi>
__device__ __forceinline__ void nhwc_tile(AL& al, BLoader& bl, int kt0, int kt1, const Epi& epi,
                                          int m0, int n0) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Stage* const sm = reinterpret_cast<Stage*>(smem_raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm0 = (warp % Tc::WGM) * Tc::WM, wn0 = (warp / Tc::WGM) * Tc::WN;
  float acc[kMI][kNI][4];
#pragma unroll
  for (int i = 0; i < kMI; ++i)
#pragma unroll
    for (int j = 0; j < kNI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

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
  const auto read = [&](int stage, int half, int buf) {
    const uint32_t st = base + uint32_t(stage) * kStageBytes, x = half ? 32u : 0u;
#pragma unroll
    for (int i = 0; i < kMI; ++i) gpu::mma::ldmatrix_x4(af[buf][i], st + (aoff[i] ^ x));
#pragma unroll
    for (int jp = 0; jp < kNI / 2; ++jp) gpu::mma::ldmatrix_x4(bf[buf][jp], st + (boff[jp] ^ x));
  };
  const auto mma = [&](int buf) {
#pragma unroll
    for (int i = 0; i < kMI; ++i)
#pragma unroll
      for (int j = 0; j < kNI; ++j) {
        const uint32_t b[2] = {bf[buf][j >> 1][2 * (j & 1)], bf[buf][j >> 1][2 * (j & 1) + 1]};
        gpu::mma::bf16_m16n8k16(acc[i][j], af[buf][i], b);
      }
  };

  const int nt = kt1 - kt0;
  if (nt > 0) {  // block-uniform
    constexpr int S = kStages;
    al.start(kt0);
    bl.start(kt0);
#pragma unroll
    for (int st = 0; st < S - 1; ++st) {
      if (st < nt) {
        al.issue(sm[st].a);
        bl.issue(sm[st].b);
      }
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
      if (i + S - 1 < nt) {  // block-uniform
        al.issue(sm[wr].a);
        bl.issue(sm[wr].b);
      }
      copy_commit();
      rd = rd + 1 == S ? 0 : rd + 1;
      wr = wr + 1 == S ? 0 : wr + 1;
      if (i + 1 < nt) read(rd, 0, 0);
      mma(1);
    }
  }
  tc_store<Tc>(epi, acc, m0 + wm0, n0 + wn0, lane);
}

// Forward (DGRAD false: x NHWC bf16, wb[ko][k]) or backward_data (true: dy
// NHWC bf16, wb[c][k]); slice blockIdx.z covers k-tiles (of 32)
// [z·tps, min((z+1)·tps, ktiles)). kSmemBytes of dynamic shared memory.
template <bool DGRAD, class Epi>
__global__ void __launch_bounds__(kNT, 2)
    conv_nhwc_kernel(const __grid_constant__ ConvArgs a, const uint16_t* __restrict__ in,
                     const uint16_t* __restrict__ wb, int tps, const __grid_constant__ Epi epi) {
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int kdim = DGRAD ? a.KRS : a.CRS;
  const int ktiles = kdim / kBKN;
  const int kt0 = min((int)blockIdx.z * tps, ktiles), kt1 = min(kt0 + tps, ktiles);
  ALoader<DGRAD> al(a, in, m0, threadIdx.x);
  BLoader bl(wb, DGRAD ? a.C : a.K, kdim, n0, threadIdx.x);
  nhwc_tile(al, bl, kt0, kt1, epi, m0, n0);
}

// y[n][p][c] = bf16(x[n][c][p]) for p < HW, C % 32 == 0: a block takes 64
// pixels × 32 channels of one image (blockIdx.z), reads them along the
// pixels, writes 8 channels (16 bytes) a thread.
constexpr int kToNhwcPix = 64, kToNhwcThreads = 256;
__global__ void __launch_bounds__(kToNhwcThreads)
    to_nhwc_bf16_kernel(const float* __restrict__ x, int C, int HW, uint4* __restrict__ y) {
  __shared__ float tile[32][kToNhwcPix + 1];
  const int p0 = blockIdx.x * kToNhwcPix, c0 = blockIdx.y * 32;
  const float* xb = x + ((size_t)blockIdx.z * C + c0) * HW;
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
  y[(((size_t)blockIdx.z * HW + p0 + p) * C + c0) / 8 + q] = o;
}

// The weights w[ko][c][rs] as bf16 rows of k: forward wb[ko][rs·C + c],
// backward_data wb[c][rs·K + ko]. One thread per element of wb.
__global__ void __launch_bounds__(256)
    weights_kmajor_bf16_kernel(const float* __restrict__ w, int K, int C, int RS,
                               bool for_dgrad, uint16_t* __restrict__ wb) {
  const int count = K * C * RS;
  const int inner = for_dgrad ? K : C;  // the k's channel: c (forward) or ko
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < count; o += gridDim.x * blockDim.x) {
    const int ch = o % inner, t = o / inner, rs = t % RS, row = t / RS;
    const int ko = for_dgrad ? ch : row, c = for_dgrad ? row : ch;
    wb[o] = gpu::mma::bf16(__ldg(w + ((size_t)ko * C + c) * RS + rs));
  }
}

}  // namespace hpmc::gpu::implicit_detail::nhwc
