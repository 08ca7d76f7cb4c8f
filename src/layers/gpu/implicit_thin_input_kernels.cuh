// implicit_thin_input_kernels.cuh — a 3×3, stride-1, pad-1 convolution with
// few input channels (1 ≤ C ≤ kThinInputMaxC, K > 4: an image model's first
// layer, 3 → 256 at 32×32) for the im2col family: its forward (with the 2×2
// max pool after it, optionally) and its weight gradient. conv2d_implicit_gemm.cu,
// its only includer, launches them. In bf16 the tensor-core kernels (below)
// take a 5×5, pad-2 window too (template argument R, the window's side: the
// x window of a unit or block is R rows and R − 1 halo columns wider, the
// reduction R·R·C); the FP32 kernels are 3×3 only (thin_input_applies).
//
// ---- forward ----------------------------------------------------------------------
// As a GEMM the forward is N·H·W × K × 9·C: a reduction of 27 for RGB, which
// the GEMM engines pad to 32 (tensor cores: to pairs of 16) and whose time is
// the output's memory traffic, not its multiply-adds. thin_input_fwd_kernel
// computes it directly in FP32 FMAs, in fp32 and tf32 (as the thin output
// kernels do; bf16 has thin_input_fwd_tc_kernel, below, on tensor cores): a
// thread owns a quad of output pixels (2i .. 2i+1,
// 2j .. 2j+1) of one image and kTfKT output channels, holds its quad's 4×4
// input window of each channel in registers (zeros outside the image), and
// per output channel runs each pixel's chain acc = fma(x, w, acc) from 0 over
// k = c·9 + r·3 + s ascending — the channel-major GEMM_K order of the FP32
// engine, so in fp32 the bits of the GEMM path — then writes act(acc + b).
// Block: kTfQuads consecutive quads ((n, i, j) order, lanes along j) ×
// kTfGroups channel groups (warp-uniform), their kTfKB filters staged in
// shared memory (rows of 9·C rounded up to 4 floats: float4 broadcast reads).
// With the pool (TfOut::kPool): the quad is the pool's 2×2 window; the thread
// writes the window's maximum (argmax2x2: the MaxPool2D kernels' choice, on
// act(acc + b)) and its one-byte code (pool2x2.cuh), and the convolution's
// output is never written: 84 MB of traffic less per CIFAR step (its 67 MB
// output written and read again). maxpool2x2_backward_codes_kernel then
// writes the pool's (and the ReLU's) input gradient from the codes and dy,
// the bits of the MaxPool2D backward, reading 21 MB instead of 84.
//
// ---- weight gradient ----------------------------------------------------------------
// As a GEMM this is K × (9·C + 1 bias column) × N·H·W: at most 37 columns and
// a reduction over every pixel. The GEMM engine's 16-column tiles read dy
// (67 MB for the CIFAR conv1 at batch 64) once per column tile; here a block
// reads each of its pixels' dy once for 256 output channels and every column.
//
// A unit is 32 consecutive pixels of one row: (n, h, q0 .. q0 + 31), numbered
// u = (n·H + h)·⌈W/32⌉ + q0/32. Block (blockIdx.x, blockIdx.y) = output
// channels k0 = 256·blockIdx.x .. k0 + 255 × units [z·per, min((z+1)·per, U)),
// z = blockIdx.y. Per unit it copies (cp.async, a ring of kTiStages buffers)
//   ds[k][q]    = dy[n][k0 + k][h][q0 + q]          k < 256, q < 32 (row stride 33)
//   xs[c][r][j] = x[n][c][h − 1 + r][q0 − 1 + j]    j < 34 (row stride 36)
// with zeros outside the tensors, kTiStages − 1 units ahead of the one in
// use. Thread (kg, c, half), kg < 64, c < C, half < 2, owns output channels
// k0 + kg + 64·i (i < 4) and input channel c, and runs over pixels
// q = 16·half .. 16·half + 15 of each unit:
//   acc[i][r][s] += ds[kg + 64·i][q] · xs[c][r][q + s]
// — 4 dy reads (distinct banks across the warp), 3 x reads (one address for
// the warp: the window slides along q) and 36 FMAs a pixel. The threads of
// c = 0 also add dy for db. At the end half 1 hands its sums to half 0
// through shared memory, and half 0 writes the slice's rows
//   ws[z][k][c·9 + r·3 + s] (and ws[z][k][9·C] = db when asked),
// which thin_input_reduce_kernel adds up into dw and db, in double. Every sum
// has a fixed order: results repeat bit for bit. After a pooled forward
// (POOLED), a unit's dy rows are not copied but built: the copies bring the
// pool's output gradient and codes for the unit's pooled row, and each
// thread forms its pixels' dy from them as it reads them (0 + gp at the
// window's chosen pixel, 0 elsewhere): the values maxpool2x2_backward_codes_kernel
// would have written, so the same sums. In bf16, thin_input_wgrad_tc_kernel
// (below) runs the same units and slices on tensor cores.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "layers/gpu/implicit_conv_kernels.cuh"
#include "layers/gpu/implicit_fastdiv.h"
#include "layers/gpu/implicit_gemm_core.cuh"
#include "layers/gpu/implicit_plan.h"
#include "layers/gpu/mma.cuh"
#include "layers/gpu/pool2x2.cuh"

namespace hpmc::gpu::implicit_detail {

constexpr int kTiKG = 64;            // k groups per block
constexpr int kTiKB = 4 * kTiKG;     // output channels per block
constexpr int kTiCols = 32;          // pixels per unit
constexpr int kTiDsLd = kTiCols + 1; // ds row stride: bank-conflict-free column reads
constexpr int kTiXsLd = 36;          // xs row stride (32 + R − 1 used)

struct TiArgs {
  int N, C, H, W, K, HW, CHW;
  int ld;     // R·R·C (+ 1 with the bias column): 9·C for the FP32 kernel
  int units;  // N·H·⌈W/32⌉ (< 2^30: the host checks)
  FastDiv fCb;  // ⌈W/32⌉
  FastDiv fH;
  // The pooled form (POOLED = true): dy is the 2×2 max pool's input gradient,
  // not formed: built per unit from the pool's output gradient gp
  // [N][K][qh][qw] and its codes (thin_input_fwd_kernel, TfOut::kPool), with
  // the ReLU's mask when relu. qw % 4 == 0 (whole 4-byte code words).
  const float* gp;
  const unsigned char* code;
  int qh, qw;
  bool relu;
};

constexpr int kTiStages = 4;  // units in flight: cp.async ring depth

// xs: the unit's x window, rows c·R + r of 32 + R − 1 ≤ kTiXsLd columns.
template <int R>
struct TiSmem {
  static_assert(kTiCols + R - 1 <= kTiXsLd, "the window's columns fit a row of xs");
  float ds[kTiStages][kTiKB * kTiDsLd];
  float xs[kTiStages][kThinInputMaxC * R * kTiXsLd];
};

__host__ __device__ constexpr size_t thin_input_smem_bytes() { return sizeof(TiSmem<3>); }

// The pooled form's unit in a ds buffer: gs[k][j] = gp[n][k0 + k][h/2][q0/2 + j]
// (j < 16, row stride kTiGsLd) and the code words cs[k][w] (4 codes each,
// w < 4, row stride kTiCsLd words); odd strides: the lanes' (k) reads hit
// distinct banks.
constexpr int kTiGsLd = kTiCols / 2 + 1;
constexpr int kTiCsLd = kTiCols / 8 + 1;
static_assert(kTiKB * (kTiGsLd + kTiCsLd) <= kTiKB * kTiDsLd, "the pooled unit fits a ds buffer");

// thin_input_wgrad_tc_kernel's buffers: a pooled unit's ds holds only the
// pool's gradient and codes (a quarter of a formed dy's size less), so that
// two of its blocks fit an SM.
template <bool POOLED, int R>
struct TiTcSmem {
  static_assert(kTiCols + R - 1 <= kTiXsLd, "the window's columns fit a row of xs");
  float ds[kTiStages][kTiKB * (POOLED ? kTiGsLd + kTiCsLd : kTiDsLd)];
  float xs[kTiStages][kThinInputMaxC * R * kTiXsLd];
};

// Copy unit u's dy rows and x window (R rows a channel, 32 + R − 1 columns,
// from row h − R/2 and column q0 − R/2) into buffer b (this thread's share;
// the caller commits). blockDim.x is a multiple of 32, so a thread's dy
// column q = tid mod 32 is the same for all its rows k = tid / 32 + j·blockDim/32.
template <bool POOLED, int R, class Smem>
__device__ __forceinline__ void ti_issue(const TiArgs& a, const float* __restrict__ x,
                                         const float* __restrict__ dy, int k0, int u, int b,
                                         Smem& sm) {
  int rest, cb, n, h;
  a.fCb.divmod(u, rest, cb);
  a.fH.divmod(rest, n, h);
  const int q0 = cb * kTiCols;
  if constexpr (POOLED) {
    // pooled row i = h/2 (none past the last window: zeros), columns j0 + j
    const int i = h >> 1, j0 = q0 >> 1;
    const bool rowok = i < a.qh;
    const size_t row = ((size_t)n * a.K + k0) * a.qh + i;  // (n, k0, i)'s pooled row
    const size_t kstride = (size_t)a.qh;                   // rows from one channel to the next
    float* gs = sm.ds[b];
    const int j = threadIdx.x & 15;
    for (int k = threadIdx.x >> 4; k < kTiKB; k += blockDim.x >> 4) {
      const bool ok = rowok && k0 + k < a.K && j0 + j < a.qw;
      copy4(&gs[k * kTiGsLd + j], ok ? a.gp + (row + k * kstride) * a.qw + j0 + j : a.gp, ok);
    }
    float* cs = gs + kTiKB * kTiGsLd;  // code words, copied as 4-byte pieces
    const int w = threadIdx.x & 3;
    const float* codes = reinterpret_cast<const float*>(a.code);
    for (int k = threadIdx.x >> 2; k < kTiKB; k += blockDim.x >> 2) {
      const bool ok = rowok && k0 + k < a.K && j0 + 4 * w < a.qw;
      copy4(&cs[k * kTiCsLd + w],
            ok ? reinterpret_cast<const float*>(a.code + (row + k * kstride) * a.qw + j0 + 4 * w)
               : codes,
            ok);
    }
  } else {
    const int q = threadIdx.x & 31, kstep = blockDim.x >> 5;
    const bool qok = q0 + q < a.W;
    int k = threadIdx.x >> 5;
    const float* src = dy + (((size_t)n * a.K + k0 + k) * a.H + h) * a.W + q0 + q;
    const size_t src_step = (size_t)kstep * a.HW;
    float* dst = &sm.ds[b][k * kTiDsLd + q];
    for (; k < kTiKB; k += kstep, src += src_step, dst += kstep * kTiDsLd) {
      const bool ok = qok && k0 + k < a.K;
      copy4(dst, ok ? src : dy, ok);
    }
  }
  constexpr int XC = kTiCols + R - 1;
  for (int e = threadIdx.x; e < a.C * R * XC; e += blockDim.x) {
    const int cr = e / XC, j = e - cr * XC, c = cr / R, r = cr - R * c;
    const int hh = h - R / 2 + r, ww = q0 - R / 2 + j;
    const bool ok = (unsigned)hh < (unsigned)a.H && (unsigned)ww < (unsigned)a.W;
    const float* xsrc = ok ? x + (size_t)n * a.CHW + (size_t)c * a.HW + hh * a.W + ww : x;
    copy4(&sm.xs[b][cr * kTiXsLd + j], xsrc, ok);
  }
}

// blockDim.x = 2·kTiKG·C. POOLED: dy from the pool's gp and codes (TiArgs),
// each pixel's value the one maxpool2x2_backward_codes_kernel would write
// (0 + gp at the window's chosen position, unless masked; 0 elsewhere), so
// the same sums as on the formed dy.
template <bool POOLED>
__global__ void __launch_bounds__(2 * kTiKG * kThinInputMaxC)
    thin_input_wgrad_kernel(const __grid_constant__ TiArgs a, const float* __restrict__ x,
                            const float* __restrict__ dy, int per, bool with_db,
                            float* __restrict__ ws) {
  extern __shared__ __align__(16) unsigned char ti_raw[];
  TiSmem<3>& sm = *reinterpret_cast<TiSmem<3>*>(ti_raw);
  const int nh = kTiKG * a.C;  // threads per half
  const int tid = threadIdx.x, half = tid / nh, t = tid - half * nh;
  const int kg = t % kTiKG, c = t / kTiKG;  // c is warp-uniform (kTiKG = 2 warps)
  const int k0 = blockIdx.x * kTiKB;
  const int u0 = blockIdx.y * per, u1 = min(u0 + per, a.units);
  const bool bias = with_db && c == 0;

  float acc[4][3][3], accb[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    accb[i] = 0.f;
#pragma unroll
    for (int r = 0; r < 3; ++r)
#pragma unroll
      for (int s = 0; s < 3; ++s) acc[i][r][s] = 0.f;
  }

#pragma unroll
  for (int j = 0; j < kTiStages - 1; ++j) {
    if (u0 + j < u1) ti_issue<POOLED, 3>(a, x, dy, k0, u0 + j, j, sm);
    copy_commit();  // possibly empty: one group per unit keeps the count
  }
  for (int u = u0, b = 0; u < u1; ++u, b = b + 1 == kTiStages ? 0 : b + 1) {
    copy_wait<kTiStages - 2>();  // unit u has landed (this thread's copies) ...
    __syncthreads();             // ... and everyone's; and unit u − 1's buffer is free
    {
      const int un = u + kTiStages - 1;
      const int bn = b == 0 ? kTiStages - 1 : b - 1;  // (u − 1)'s buffer
      if (un < u1) ti_issue<POOLED, 3>(a, x, dy, k0, un, bn, sm);
      copy_commit();
    }
    const float* dsb = sm.ds[b] + kg * kTiDsLd;
    // pooled: this thread's rows of gs and cs, and the window position of
    // this unit's row (h odd: the bottom row, positions 2 and 3)
    const float* gsb = sm.ds[b] + kg * kTiGsLd + 8 * half;
    const unsigned* csb =
        reinterpret_cast<const unsigned*>(sm.ds[b] + kTiKB * kTiGsLd) + kg * kTiCsLd + 2 * half;
    int bottom = 0;
    const unsigned pos_bits = a.relu ? 3u | kPoolNotPositive : 3u;
    if constexpr (POOLED) {
      int rest, cbu, nu, hu;
      a.fCb.divmod(u, rest, cbu);
      a.fH.divmod(rest, nu, hu);
      bottom = (hu & 1) * 2;
    }
    float g[4];
    int pos[4];
    const float* xsb = sm.xs[b] + c * 3 * kTiXsLd + 16 * half;
    float xw[3][3];
#pragma unroll
    for (int r = 0; r < 3; ++r)
#pragma unroll
      for (int s = 0; s < 2; ++s) xw[r][s + 1] = xsb[r * kTiXsLd + s];
#pragma unroll
    for (int q = 0; q < 16; ++q) {
#pragma unroll
      for (int r = 0; r < 3; ++r) {
        xw[r][0] = xw[r][1];
        xw[r][1] = xw[r][2];
        xw[r][2] = xsb[r * kTiXsLd + q + 2];
      }
      float d[4];
      if constexpr (POOLED) {
        if (q % 2 == 0) {  // a new window: its gradient and position, for q and q + 1
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const unsigned word = csb[i * kTiKG * kTiCsLd + q / 8];
            // with the ReLU's mask, a masked window's position (bit 2 set)
            // matches no pixel: its gradient is 0 everywhere
            g[i] = 0.0f + gsb[i * kTiKG * kTiGsLd + q / 2];
            pos[i] = int((word >> (8 * ((q / 2) % 4))) & pos_bits);
          }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) d[i] = pos[i] == bottom + q % 2 ? g[i] : 0.0f;
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) d[i] = dsb[i * kTiKG * kTiDsLd + 16 * half + q];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int r = 0; r < 3; ++r)
#pragma unroll
          for (int s = 0; s < 3; ++s) acc[i][r][s] = fmaf(d[i], xw[r][s], acc[i][r][s]);
      if (bias) {
#pragma unroll
        for (int i = 0; i < 4; ++i) accb[i] += d[i];
      }
    }
  }
  copy_wait<0>();  // nothing of this thread's is still landing in shared memory
  __syncthreads();

  // half 1 → shared memory (value v of thread t at red[v·nh + t]) → half 0 adds.
  float* red = sm.ds[0];
  if (half == 1) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int rs = 0; rs < 9; ++rs) red[(i * 10 + rs) * nh + t] = acc[i][rs / 3][rs % 3];
      red[(i * 10 + 9) * nh + t] = accb[i];
    }
  }
  __syncthreads();
  if (half == 1) return;
  float* out = ws + (size_t)blockIdx.y * a.K * a.ld;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int k = k0 + kg + kTiKG * i;
    if (k >= a.K) continue;
    float* row = out + (size_t)k * a.ld;
#pragma unroll
    for (int rs = 0; rs < 9; ++rs)
      row[c * 9 + rs] = acc[i][rs / 3][rs % 3] + red[(i * 10 + rs) * nh + t];
    if (bias) row[9 * a.C] = accb[i] + red[(i * 10 + 9) * nh + t];
  }
}

// bf16: the same units, ring and copies (ti_issue) on bf16 tensor cores.
// 8 warps; warp w owns output channels k0 + 32w … + 31 (two m16 tiles) and
// the R·R·C columns (c, r, s) in n8 tiles (five for 3×3: at most 36 used;
// thirteen for 5×5, at most 100; the tiles past R·R·C are skipped). Per unit, two
// k16 steps of 16 pixels: a lane builds its A fragments from ds (or the
// pooled gs and codes: the values maxpool2x2_backward_codes_kernel would
// write) and its B fragments from xs, x and dy rounded to bf16 (to nearest
// even) as they enter a fragment, then 20 mma. The bias column is no product:
// each lane adds its dy values (unrounded) in FP32, in pixel order, and the
// four lanes of a row are added at the end — a reduction in FP32 as bf16's
// others. The slices go to ws as thin_input_wgrad_kernel's. Pooled, its
// buffers (TiTcSmem) let two blocks share an SM, and the host gives it twice
// the FP32 kernel's slices (pooled or not, so that both forms sum alike): 16
// warps an SM to hide the ring's waits and the fragments' loads (one block
// of 8 warps an SM took 54 µs for CIFAR conv1 at batch 64). 5×5's 13 tiles
// of sums take more registers than two blocks an SM leave: one block.
constexpr int kTiTcWarps = kTiKB / 32;  // 32 output channels a warp
// n8 tiles of the R·R·C ≤ R·R·kThinInputMaxC columns
template <int R>
__host__ __device__ constexpr int ti_tc_ntiles() {
  return (R * R * kThinInputMaxC + 7) / 8;
}
template <int R>
__host__ __device__ constexpr int ti_tc_blocks_per_sm(bool pooled) {
  return pooled && R == 3 ? 2 : 1;
}

template <bool POOLED, int R>
__global__ void __launch_bounds__(32 * kTiTcWarps, ti_tc_blocks_per_sm<R>(POOLED))
    thin_input_wgrad_tc_kernel(const __grid_constant__ TiArgs a, const float* __restrict__ x,
                               const float* __restrict__ dy, int per, bool with_db,
                               float* __restrict__ ws) {
  constexpr int NT = ti_tc_ntiles<R>(), RR = R * R;
  extern __shared__ __align__(16) unsigned char ti_raw[];
  TiTcSmem<POOLED, R>& sm = *reinterpret_cast<TiTcSmem<POOLED, R>*>(ti_raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int k0 = blockIdx.x * kTiKB, kw = 32 * warp;  // the warp's rows in the block
  const int u0 = blockIdx.y * per, u1 = min(u0 + per, a.units);
  const int ncols = RR * a.C;
  // This lane's B column in each n tile, n = 8j + g = c·R·R + r·R + s: its
  // offset in xs (the window slides along the pixels), or −1 past R·R·C.
  int xoff[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int n = 8 * j + g, c = n / RR, rs = n - RR * c, r = rs / R, sc = rs - R * r;
    xoff[j] = n < ncols ? (c * R + r) * kTiXsLd + sc : -1;
  }
  float acc[2][NT][4], db[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    db[i][0] = db[i][1] = 0.f;
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
  }

#pragma unroll
  for (int j = 0; j < kTiStages - 1; ++j) {
    if (u0 + j < u1) ti_issue<POOLED, R>(a, x, dy, k0, u0 + j, j, sm);
    copy_commit();
  }
  const unsigned pos_bits = a.relu ? 3u | kPoolNotPositive : 3u;
  for (int u = u0, b = 0; u < u1; ++u, b = b + 1 == kTiStages ? 0 : b + 1) {
    copy_wait<kTiStages - 2>();
    __syncthreads();
    {
      const int un = u + kTiStages - 1;
      const int bn = b == 0 ? kTiStages - 1 : b - 1;
      if (un < u1) ti_issue<POOLED, R>(a, x, dy, k0, un, bn, sm);
      copy_commit();
    }
    int bottom = 0;  // pooled: the window positions of this unit's row (h odd: 2, 3)
    if constexpr (POOLED) {
      int rest, cbu, nu, hu;
      a.fCb.divmod(u, rest, cbu);
      a.fH.divmod(rest, nu, hu);
      bottom = (hu & 1) * 2;
    }
    const float* xsb = sm.xs[b];
    const float* dsb = sm.ds[b];
    const unsigned* csb = reinterpret_cast<const unsigned*>(sm.ds[b] + kTiKB * kTiGsLd);
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {  // pixels 16·ks … + 15
      // B: b[j][h] = x at pixels 16ks + 2t + 8h, + 1 (k), column 8j + g (n)
      uint32_t bf[NT][2];
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int q = 16 * ks + 2 * t + 8 * h;
          const bool ok = xoff[j] >= 0;
          bf[j][h] = gpu::mma::bf16x2(ok ? xsb[xoff[j] + q] : 0.f, ok ? xsb[xoff[j] + q + 1] : 0.f);
        }
      // A: af[i][2·hc + hr] = dy at row kw + 16i + g + 8hr, pixels 16ks + 2t + 8hc, + 1
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        uint32_t af[4];
#pragma unroll
        for (int hr = 0; hr < 2; ++hr)
#pragma unroll
          for (int hc = 0; hc < 2; ++hc) {
            const int k = kw + 16 * i + g + 8 * hr, q = 16 * ks + 2 * t + 8 * hc;
            float d0, d1;
            if constexpr (POOLED) {  // pixels q, q + 1: one window's two columns
              const unsigned word = csb[k * kTiCsLd + q / 8];
              const int pos = int((word >> (8 * ((q / 2) % 4))) & pos_bits);
              const float gv = 0.0f + dsb[k * kTiGsLd + q / 2];
              d0 = pos == bottom ? gv : 0.0f;
              d1 = pos == bottom + 1 ? gv : 0.0f;
            } else {
              d0 = dsb[k * kTiDsLd + q];
              d1 = dsb[k * kTiDsLd + q + 1];
            }
            af[2 * hc + hr] = gpu::mma::bf16x2(d0, d1);
            db[i][hr] += d0 + d1;
          }
#pragma unroll
        for (int j = 0; j < NT; ++j)
          if (8 * j < ncols) gpu::mma::bf16_m16n8k16(acc[i][j], af, bf[j]);
      }
    }
  }
  copy_wait<0>();

  float* out = ws + (size_t)blockIdx.y * a.K * a.ld;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      // the row's four lanes (t) hold its bias sums: added in t order
      float v = db[i][hr];
      const float v1 = __shfl_xor_sync(0xffffffffu, v, 1);
      v = (t & 1) ? v1 + v : v + v1;
      const float v2 = __shfl_xor_sync(0xffffffffu, v, 2);
      v = (t & 2) ? v2 + v : v + v2;
      const int k = k0 + kw + 16 * i + g + 8 * hr;
      if (k >= a.K) continue;
      float* row = out + (size_t)k * a.ld;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = 8 * j + 2 * t + e;
          if (col < ncols) row[col] = acc[i][j][2 * hr + e];
        }
      if (with_db && t == 0) row[ncols] = v;
    }
}

// dw[k·CRS + col] (col < CRS) or db[k] (col = CRS) += Σ_z ws[z][k][col], for the
// K·ld elements of a slice row set: a block takes 32 consecutive elements,
// warp w adds slices w, w + 8, … in double, then warp 0 adds the 8 partial
// sums in warp order.
constexpr int kTiReduceWarps = 8;

__global__ void __launch_bounds__(32 * kTiReduceWarps)
    thin_input_reduce_kernel(const float* __restrict__ ws, int slices, int K, int CRS, int ld,
                             float* __restrict__ dw, float* __restrict__ db) {
  __shared__ double part[kTiReduceWarps][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long count = (long long)K * ld, i = (long long)blockIdx.x * 32 + lane;
  double s = 0.0;
  if (i < count)
    for (int z = warp; z < slices; z += kTiReduceWarps) s += (double)ws[(long long)z * count + i];
  part[warp][lane] = s;
  __syncthreads();
  if (warp != 0 || i >= count) return;
  double t = 0.0;
#pragma unroll
  for (int w = 0; w < kTiReduceWarps; ++w) t += part[w][lane];
  const long long k = i / ld;
  const int col = int(i - k * ld);
  float* o = col < CRS ? dw + (k * CRS + col) : db + k;
  *o = (float)((double)*o + t);
}

// ---- forward (see the top of the file) ------------------------------------------------

constexpr int kTfQuads = 64;                      // quads per block (two warps)
constexpr int kTfGroups = 4;                      // output-channel groups per block
constexpr int kTfKT = 32;                         // output channels per thread ...
constexpr int kTfKP = 8;                          // ... in passes of kTfKP (accumulators)
constexpr int kTfKB = kTfGroups * kTfKT;          // output channels per block
constexpr int kTfThreads = kTfQuads * kTfGroups;  // 256

struct TfArgs {
  int N, H, W, K, HW, CHW;
  int qh, qw;  // quads per column and per row: ⌈H/2⌉, ⌈W/2⌉ (pooled: ⌊H/2⌋, ⌊W/2⌋)
  int quads;   // N·qh·qw (< 2^31: the host checks)
  FastDiv fqw, fqh;
  bool vec;    // W even and y 8-byte aligned: a quad's rows are float2 stores
};

enum class TfOut { kPlain, kAct, kPool };  // y; y with any activation; pooled y + codes

// Grid: (⌈quads / kTfQuads⌉, ⌈K / kTfKB⌉); kTfThreads threads. act: the ReLU
// flag (kPlain, kPool) or any activation (kAct), applied to acc + b.
template <int C, TfOut OUT>
__global__ void __launch_bounds__(kTfThreads)
    thin_input_fwd_kernel(const __grid_constant__ TfArgs a, const float* __restrict__ x,
                          const float* __restrict__ w, const float* __restrict__ bias,
                          EpiAct<OUT == TfOut::kAct> act, float* __restrict__ y,
                          unsigned char* __restrict__ code) {
  constexpr int CRS = 9 * C, LD = (CRS + 3) / 4 * 4;
  __shared__ __align__(16) float ws[kTfKB * LD];
  const int k0 = blockIdx.y * kTfKB;
  for (int e = threadIdx.x; e < kTfKB * LD; e += blockDim.x) {
    const int k = e / LD, j = e - k * LD;
    ws[e] = k0 + k < a.K && j < CRS ? __ldg(w + (size_t)(k0 + k) * CRS + j) : 0.f;
  }
  __syncthreads();
  const int quad = blockIdx.x * kTfQuads + threadIdx.x % kTfQuads;
  const int kg = threadIdx.x / kTfQuads;  // warp-uniform
  if (quad >= a.quads || k0 + kg * kTfKT >= a.K) return;  // no barrier after this point
  int rest, i, j, n;
  a.fqw.divmod(quad, rest, j);
  a.fqh.divmod(rest, n, i);

  float xw[C][4][4];  // x[n][c][2i − 1 + r][2j − 1 + s]
  const float* xn = x + (size_t)n * a.CHW;
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int hh = 2 * i - 1 + r;
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int ww = 2 * j - 1 + s;
        const bool ok = (unsigned)hh < (unsigned)a.H && (unsigned)ww < (unsigned)a.W;
        xw[c][r][s] = ok ? __ldg(xn + (size_t)c * a.HW + hh * a.W + ww) : 0.f;
      }
    }

#pragma unroll 1
  for (int kp = 0; kp < kTfKT; kp += kTfKP) {
    const int kb = kg * kTfKT + kp;  // the pass's first channel in the block
    float acc[kTfKP][4];
#pragma unroll
    for (int kk = 0; kk < kTfKP; ++kk) {
      float wr[LD];
#pragma unroll
      for (int v = 0; v < LD / 4; ++v) {
        const float4 t = *reinterpret_cast<const float4*>(ws + (kb + kk) * LD + 4 * v);
        wr[4 * v] = t.x, wr[4 * v + 1] = t.y, wr[4 * v + 2] = t.z, wr[4 * v + 3] = t.w;
      }
#pragma unroll
      for (int p = 0; p < 4; ++p) acc[kk][p] = 0.f;
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int r = 0; r < 3; ++r)
#pragma unroll
          for (int s = 0; s < 3; ++s)
#pragma unroll
            for (int p = 0; p < 4; ++p)
              acc[kk][p] = fmaf(xw[c][(p >> 1) + r][(p & 1) + s], wr[c * 9 + r * 3 + s],
                                acc[kk][p]);
    }
#pragma unroll
    for (int kk = 0; kk < kTfKP; ++kk) {
      const int ch = k0 + kb + kk;
      if (ch >= a.K) break;
      const float b = bias ? __ldg(bias + ch) : 0.f;
      float v[4];
#pragma unroll
      for (int p = 0; p < 4; ++p) v[p] = act.apply(acc[kk][p] + b, ch);
      const size_t plane = (size_t)n * a.K + ch;
      if constexpr (OUT == TfOut::kPool) {
        const int at = argmax2x2(v[0], v[1], v[2], v[3]);
        const float m = pick4(at, v[0], v[1], v[2], v[3]);
        const size_t o = (plane * a.qh + i) * a.qw + j;
        y[o] = m;
        code[o] = pool_code(at, m);
      } else {
        float* row = y + (plane * a.H + 2 * i) * a.W + 2 * j;
        if (a.vec && 2 * i + 1 < a.H) {
          *reinterpret_cast<float2*>(row) = make_float2(v[0], v[1]);
          *reinterpret_cast<float2*>(row + a.W) = make_float2(v[2], v[3]);
        } else {
#pragma unroll
          for (int p = 0; p < 4; ++p)
            if (2 * i + (p >> 1) < a.H && 2 * j + (p & 1) < a.W) row[(p >> 1) * a.W + (p & 1)] = v[p];
        }
      }
    }
  }
}

// ---- forward on bf16 tensor cores -------------------------------------------------------
// In training.precision bf16 the forward runs as the GEMM it is, on mma.sync
// m16n8k16 (thin_input_fwd_tc_kernel): the outputs thin_input_fwd_kernel
// writes (TfArgs, TfOut: plain, activated, or pooled with codes), from
// products of bf16-rounded x and w summed in FP32, k = c·R·R + r·R + s
// ascending in steps of 16 (R·R·C padded with zeros to a multiple of 16;
// R = 3, or 5 with pad 2).
// GEMM_M is the output channels: warp w of a block owns kTcWM = 64 of them,
// its A fragments (4 m-tiles × the k-steps) read once from the block's
// weights, staged in bf16 in shared memory, and held in registers. GEMM_N is
// the pixels, 8 to an n-tile, ordered so that one thread's accumulators hold
// whole quads: the n-tile pair (top, bottom) of quads (i, 4·pj .. 4·pj + 3)
// has column 2t + e of the top tile at pixel (2i, 2(4·pj + t) + e) and of the
// bottom tile at (2i + 1, …), so lane (g, t)'s c0, c1 of both tiles are quad
// (i, 4·pj + t) of output channel m-tile row g (c2, c3: row g + 8), and the
// pool and the activation need no exchange between lanes. A block is kTcQR
// quad rows (one where that would leave an SM fewer than two blocks: a small
// batch) × kTcQC quad columns of one image × kTcKB channels; its x window
// (with the halo and zeros outside the image) is staged in shared memory in
// bf16, and each lane builds its B fragments from it through per-lane
// offsets of its k values (c, r, s), made once. Pooled, a warp gathers a quad
// row's 64 × 16 maxima and codes in shared memory and writes them as whole
// rows (16-byte pieces where aligned), not 16-byte runs of 8 channels. The
// CIFAR conv1 (3 → 256, 32×32, batch 64, pooled): 1.1 GFLOP with the
// padding, 21 MB of pooled output and codes.
constexpr int kTcWarps = 4, kTcWM = 64;    // warps a block, output channels a warp
constexpr int kTcKB = kTcWarps * kTcWM;    // output channels a block
constexpr int kTcQR = 2, kTcQC = 16;       // quad rows and columns a block
constexpr int kTcYLd = kTcQC + 4;  // a pooled row's stride in floats: distinct banks, 16-byte rows

// R: the window's side (3 or 5), C: the input channels. In dynamic shared
// memory (5×5 at C = 4 holds 61 KB of weights).
template <int R, int C>
struct TcSmem {
  static constexpr int kXR = 2 * kTcQR + R - 1, kXC = 2 * kTcQC + R - 1;  // the staged x window
  static constexpr int kKS = (R * R * C + 15) / 16;  // k-steps of 16
  // a weight row's stride in 32-bit words (k pairs): the 8 rows of a
  // fragment read fall into distinct banks
  static constexpr int kWLd = 8 * kKS + 4;
  // the weights until every warp holds its fragments, then the pooled rows
  // (first: the rows' 16-byte reads need 16-byte alignment)
  union alignas(16) {
    uint32_t w[kTcKB * kWLd];  // bf16 pairs, zeros past R·R·C and past K
    struct {
      float y[kTcWarps][kTcWM * kTcYLd];  // pooled: a quad row's maxima, per warp
      unsigned char code[kTcWarps][kTcWM * kTcQC];
    } out;
  };
  // bf16; then kXR·kXC zeros, which the k values past R·R·C read (for any
  // pixel of the window: no predicate in the main loop)
  uint16_t x[(C + 1) * kXR * kXC];
};

// A warp's staged quad row out: `rows` rows of `cols` ≤ kTcQC values from
// src (row stride lds) to dst (row stride step), whole rows in pieces of 4
// values (P: 4 of T) where `vec` (aligned rows of 4-value multiples) and the
// row is whole, else value by value.
template <typename P, typename T>
__device__ __forceinline__ void warp_rows_out(T* dst, size_t step, const T* src, int lds, int rows,
                                              int cols, bool vec, int lane) {
  static_assert(sizeof(P) == 4 * sizeof(T), "a piece is 4 values");
  if (vec && cols == kTcQC) {
    for (int e = lane; e < rows * (kTcQC / 4); e += 32) {
      const int r = e / (kTcQC / 4), q = e % (kTcQC / 4);
      *reinterpret_cast<P*>(dst + r * step + 4 * q) =
          *reinterpret_cast<const P*>(src + r * lds + 4 * q);
    }
  } else {
    for (int e = lane; e < rows * kTcQC; e += 32) {
      const int r = e / kTcQC, q = e % kTcQC;
      if (q < cols) dst[r * step + q] = src[r * lds + q];
    }
  }
}

// Both stagings below issue a batch of loads before their first store (the
// loop bounds are compile-time, the loads independent): one trip to L2 a
// batch instead of one a value, which at one or two blocks an SM (a small
// batch) was most of the kernel.
constexpr int kTcThreads = 32 * kTcWarps, kTcLoadBatch = 8;

// Grid: (N·⌈qh/qr⌉·⌈qw/kTcQC⌉, ⌈K/kTcKB⌉), qr (1 or kTcQR) quad rows a
// block: 1 where kTcQR would leave the SMs with less than two blocks each;
// kTcThreads threads, sizeof(TcSmem<R, C>) bytes of dynamic shared memory.
template <int R, int C, TfOut OUT>
__global__ void __launch_bounds__(kTcThreads)
    thin_input_fwd_tc_kernel(const __grid_constant__ TfArgs a, int qr,
                             const float* __restrict__ x, const float* __restrict__ w,
                             const float* __restrict__ bias, EpiAct<OUT == TfOut::kAct> act,
                             float* __restrict__ y, unsigned char* __restrict__ code) {
  using Sm = TcSmem<R, C>;
  constexpr int RR = R * R, CRS = RR * C, KS = Sm::kKS, WLD = Sm::kWLd;
  constexpr int XR = Sm::kXR, XC = Sm::kXC;
  extern __shared__ __align__(16) unsigned char tc_raw[];
  Sm& sm = *reinterpret_cast<Sm*>(tc_raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int tiles_c = (a.qw + kTcQC - 1) / kTcQC, tiles_r = (a.qh + qr - 1) / qr;
  const int tc = blockIdx.x % tiles_c, rest = blockIdx.x / tiles_c;
  const int tr = rest % tiles_r, n = rest / tiles_r;
  const int i0 = tr * qr, j0 = tc * kTcQC;  // the block's first quad
  const int kb = blockIdx.y * kTcKB, k0 = kb + warp * kTcWM;

  // x[n][c][2·i0 − R/2 + rr][2·j0 − R/2 + cc] in bf16, zeros outside the image
  // (rows past the block's 2·qr + R − 1 are read by no lane)
  const float* xn = x + (size_t)n * a.CHW;
  constexpr int XE = (C + 1) * XR * XC, XI = (XE + kTcThreads - 1) / kTcThreads;
  for (int i = 0; i < XI; i += kTcLoadBatch) {
    float v[kTcLoadBatch];
#pragma unroll
    for (int u = 0; u < kTcLoadBatch; ++u) {
      const int e = (i + u) * kTcThreads + threadIdx.x;
      const int c = e / (XR * XC), rr = e / XC % XR, cc = e % XC;
      const int hh = 2 * i0 - R / 2 + rr, ww = 2 * j0 - R / 2 + cc;
      const bool ok = i + u < XI && e < XE && c < C && (unsigned)hh < (unsigned)a.H &&
                      (unsigned)ww < (unsigned)a.W;
      v[u] = ok ? __ldg(xn + (size_t)c * a.HW + hh * a.W + ww) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kTcLoadBatch; ++u) {
      const int e = (i + u) * kTcThreads + threadIdx.x;
      if (i + u < XI && e < XE) sm.x[e] = mma::bf16(v[u]);
    }
  }
  // the block's weights, rows k = 0 .. 16·KS − 1 as bf16 pairs (read in order)
  constexpr int WE = kTcKB * 8 * KS, WI = WE / kTcThreads;
  static_assert(WE % kTcThreads == 0, "whole rounds of the block's threads");
  for (int i = 0; i < WI; i += kTcLoadBatch) {
    float2 v[kTcLoadBatch];
#pragma unroll
    for (int u = 0; u < kTcLoadBatch; ++u) {
      const int e = (i + u) * kTcThreads + threadIdx.x;
      const int m = e / (8 * KS), k = 2 * (e - m * (8 * KS));
      const float* row = w + (size_t)(kb + m) * CRS;
      const bool mok = i + u < WI && kb + m < a.K;
      v[u] = make_float2(mok && k < CRS ? __ldg(row + k) : 0.f,
                         mok && k + 1 < CRS ? __ldg(row + k + 1) : 0.f);
    }
#pragma unroll
    for (int u = 0; u < kTcLoadBatch; ++u) {
      const int e = (i + u) * kTcThreads + threadIdx.x;
      const int m = e / (8 * KS), p = e - m * (8 * KS);
      if (i + u < WI) sm.w[m * WLD + p] = mma::bf16x2(v[u].x, v[u].y);
    }
  }
  // B: the staged offset of this lane's k values (c, r, s); past R·R·C the zeros'
  int koff[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int k = ks * 16 + 2 * t + (q & 1) + 8 * (q >> 1);
      const int c = k / RR, r = k % RR / R, sx = k % R;
      koff[ks][q] = k < CRS ? (c * XR + r) * XC + sx : C * XR * XC;
    }
  float bv[4][2];  // the bias of rows g and g + 8 of each m-tile
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = k0 + mi * 16 + g + 8 * h;
      bv[mi][h] = bias && m < a.K ? __ldg(bias + m) : 0.f;
    }
  __syncthreads();
  uint32_t af[4][KS][4];  // A: rows g, g + 8 × k pairs t, t + 4 of each k-step
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        af[mi][ks][q] = sm.w[(warp * kTcWM + mi * 16 + g + 8 * (q & 1)) * WLD + ks * 8 + t +
                             4 * (q >> 1)];
  __syncthreads();        // the weights' space is the pooled rows' from here
  if (k0 >= a.K) return;  // no barrier after this point

  float* ys = sm.out.y[warp];
  unsigned char* cs = sm.out.code[warp];
  // pooled rows leave as whole rows: 16-byte pieces where aligned
  const bool vec_y = a.qw % 4 == 0 && (reinterpret_cast<uintptr_t>(y) & 15) == 0;
  const bool vec_code = a.qw % 4 == 0 && (reinterpret_cast<uintptr_t>(code) & 3) == 0;
  const int cols = min(kTcQC, a.qw - j0);  // the block's quad columns
#pragma unroll 1
  for (int qi = 0; qi < qr; ++qi) {
    const int i = i0 + qi;
    if (i >= a.qh) break;
#pragma unroll 1
    for (int pj = 0; pj < kTcQC / 4; ++pj) {
      const int jl = 4 * pj + t, j = j0 + jl;  // this lane's quad column
      if (4 * pj >= cols) break;
      float acc[2][4][4];  // [top, bottom][m-tile][c0..c3]
#pragma unroll
      for (int v = 0; v < 2; ++v)
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[v][mi][q] = 0.f;
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        const int pix = (2 * qi + v) * XC + 8 * pj + g;  // pixel column g of the n-tile
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          uint16_t e[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) e[q] = sm.x[koff[ks][q] + pix];
          const uint32_t bf[2] = {uint32_t(e[0]) | uint32_t(e[1]) << 16,
                                  uint32_t(e[2]) | uint32_t(e[3]) << 16};
#pragma unroll
          for (int mi = 0; mi < 4; ++mi) mma::bf16_m16n8k16(acc[v][mi], af[mi][ks], bf);
        }
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int cl = mi * 16 + g + 8 * h, ch = k0 + cl;  // the warp's row, the channel
          float o[4];  // the quad, row-major
#pragma unroll
          for (int p = 0; p < 4; ++p)
            o[p] = act.apply(acc[p >> 1][mi][2 * h + (p & 1)] + bv[mi][h], ch);
          if constexpr (OUT == TfOut::kPool) {
            const int at = argmax2x2(o[0], o[1], o[2], o[3]);
            const float mx = pick4(at, o[0], o[1], o[2], o[3]);
            ys[cl * kTcYLd + jl] = mx;
            cs[cl * kTcQC + jl] = pool_code(at, mx);
          } else {
            if (j >= a.qw || ch >= a.K) continue;
            float* row = y + (((size_t)n * a.K + ch) * a.H + 2 * i) * a.W + 2 * j;
            if (a.vec && 2 * i + 1 < a.H) {
              *reinterpret_cast<float2*>(row) = make_float2(o[0], o[1]);
              *reinterpret_cast<float2*>(row + a.W) = make_float2(o[2], o[3]);
            } else {
#pragma unroll
              for (int p = 0; p < 4; ++p)
                if (2 * i + (p >> 1) < a.H && 2 * j + (p & 1) < a.W)
                  row[(p >> 1) * a.W + (p & 1)] = o[p];
            }
          }
        }
    }
    if constexpr (OUT == TfOut::kPool) {
      __syncwarp();
      // the warp's quad row: rows (n, ch, i) of y and code, columns j0 .. j0 + cols
      const int rows = min(kTcWM, a.K - k0);
      const size_t first = (((size_t)n * a.K + k0) * a.qh + i) * a.qw + j0;
      const size_t step = (size_t)a.qh * a.qw;  // from one channel's row to the next
      warp_rows_out<float4>(y + first, step, ys, kTcYLd, rows, cols, vec_y, lane);
      warp_rows_out<uint32_t>(code + first, step, cs, kTcQC, rows, cols, vec_code, lane);
      __syncwarp();
    }
  }
}

// The 2×2 pool's input gradient from its codes (thin_input_fwd_kernel,
// TfOut::kPool): quad (plane, i, j) of dx [planes][H][W] gets 0 + dy at its
// code's position (0 when relu and the code says not positive) and 0 at the
// other three; the pixels no window covers (the last row or column of an odd
// H or W) get 0. The bits of the MaxPool2D backward kernels. One thread per
// quad of ⌈H/2⌉·⌈W/2⌉; qh, qw the pooled sizes ⌊H/2⌋, ⌊W/2⌋.
__global__ void maxpool2x2_backward_codes_kernel(const unsigned char* __restrict__ code,
                                                 const float* __restrict__ dy,
                                                 float* __restrict__ dx, unsigned quads,
                                                 FastDiv fcw, FastDiv fch, int H, int W, int qh,
                                                 int qw, bool relu, bool vec) {
  for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < quads;
       e += gridDim.x * blockDim.x) {
    int rest, j, plane, i;
    fcw.divmod(int(e), rest, j);
    fch.divmod(rest, plane, i);
    float v[4] = {0.f, 0.f, 0.f, 0.f};
    if (i < qh && j < qw) {
      const size_t o = ((size_t)plane * qh + i) * qw + j;
      const unsigned char c = __ldg(code + o);
      const float g = relu && (c & kPoolNotPositive) ? 0.0f : 0.0f + __ldg(dy + o);
#pragma unroll
      for (int p = 0; p < 4; ++p) v[p] = (c & 3) == p ? g : 0.0f;
    }
    float* row = dx + ((size_t)plane * H + 2 * i) * W + 2 * j;
    if (vec && 2 * i + 1 < H) {
      *reinterpret_cast<float2*>(row) = make_float2(v[0], v[1]);
      *reinterpret_cast<float2*>(row + W) = make_float2(v[2], v[3]);
    } else {
#pragma unroll
      for (int p = 0; p < 4; ++p)
        if (2 * i + (p >> 1) < H && 2 * j + (p & 1) < W) row[(p >> 1) * W + (p & 1)] = v[p];
    }
  }
}

}  // namespace hpmc::gpu::implicit_detail
