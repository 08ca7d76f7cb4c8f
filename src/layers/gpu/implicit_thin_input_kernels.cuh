// implicit_thin_input_kernels.cuh — the weight gradient of a 3×3, stride-1,
// pad-1 convolution with few input channels (1 ≤ C ≤ kThinInputMaxC, K > 4:
// an image model's first layer, 3 → 256 at 32×32) for the im2col family.
// conv2d_implicit_gemm.cu, its only includer, launches it and adds the slices.
//
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
// has a fixed order: results repeat bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "layers/gpu/implicit_fastdiv.h"
#include "layers/gpu/implicit_gemm_core.cuh"
#include "layers/gpu/implicit_plan.h"

namespace hpmc::gpu::implicit_detail {

constexpr int kTiKG = 64;            // k groups per block
constexpr int kTiKB = 4 * kTiKG;     // output channels per block
constexpr int kTiCols = 32;          // pixels per unit
constexpr int kTiDsLd = kTiCols + 1; // ds row stride: bank-conflict-free column reads
constexpr int kTiXsLd = 36;          // xs row stride (34 used)

struct TiArgs {
  int N, C, H, W, K, HW, CHW;
  int ld;     // 9·C (+ 1 with the bias column)
  int units;  // N·H·⌈W/32⌉ (< 2^30: the host checks)
  FastDiv fCb;  // ⌈W/32⌉
  FastDiv fH;
};

constexpr int kTiStages = 4;  // units in flight: cp.async ring depth

struct TiSmem {
  float ds[kTiStages][kTiKB * kTiDsLd];
  float xs[kTiStages][kThinInputMaxC * 3 * kTiXsLd];
};

__host__ __device__ constexpr size_t thin_input_smem_bytes() { return sizeof(TiSmem); }

// Copy unit u's dy rows and x window into buffer b (this thread's share; the
// caller commits). blockDim.x is a multiple of 32, so a thread's dy column
// q = tid mod 32 is the same for all its rows k = tid / 32 + j·blockDim/32.
__device__ __forceinline__ void ti_issue(const TiArgs& a, const float* __restrict__ x,
                                         const float* __restrict__ dy, int k0, int u, int b,
                                         TiSmem& sm) {
  int rest, cb, n, h;
  a.fCb.divmod(u, rest, cb);
  a.fH.divmod(rest, n, h);
  const int q0 = cb * kTiCols, q = threadIdx.x & 31, kstep = blockDim.x >> 5;
  const bool qok = q0 + q < a.W;
  int k = threadIdx.x >> 5;
  const float* src = dy + (((size_t)n * a.K + k0 + k) * a.H + h) * a.W + q0 + q;
  const size_t src_step = (size_t)kstep * a.HW;
  float* dst = &sm.ds[b][k * kTiDsLd + q];
  for (; k < kTiKB; k += kstep, src += src_step, dst += kstep * kTiDsLd) {
    const bool ok = qok && k0 + k < a.K;
    copy4(dst, ok ? src : dy, ok);
  }
  for (int e = threadIdx.x; e < a.C * 3 * 34; e += blockDim.x) {
    const int cr = e / 34, j = e - cr * 34, c = cr / 3, r = cr - 3 * c;
    const int hh = h - 1 + r, ww = q0 - 1 + j;
    const bool ok = (unsigned)hh < (unsigned)a.H && (unsigned)ww < (unsigned)a.W;
    const float* xsrc = ok ? x + (size_t)n * a.CHW + (size_t)c * a.HW + hh * a.W + ww : x;
    copy4(&sm.xs[b][cr * kTiXsLd + j], xsrc, ok);
  }
}

// blockDim.x = 2·kTiKG·C.
__global__ void __launch_bounds__(2 * kTiKG * kThinInputMaxC)
    thin_input_wgrad_kernel(const __grid_constant__ TiArgs a, const float* __restrict__ x,
                            const float* __restrict__ dy, int per, bool with_db,
                            float* __restrict__ ws) {
  extern __shared__ __align__(16) unsigned char ti_raw[];
  TiSmem& sm = *reinterpret_cast<TiSmem*>(ti_raw);
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
    if (u0 + j < u1) ti_issue(a, x, dy, k0, u0 + j, j, sm);
    copy_commit();  // possibly empty: one group per unit keeps the count
  }
  for (int u = u0, b = 0; u < u1; ++u, b = b + 1 == kTiStages ? 0 : b + 1) {
    copy_wait<kTiStages - 2>();  // unit u has landed (this thread's copies) ...
    __syncthreads();             // ... and everyone's; and unit u − 1's buffer is free
    {
      const int un = u + kTiStages - 1;
      const int bn = b == 0 ? kTiStages - 1 : b - 1;  // (u − 1)'s buffer
      if (un < u1) ti_issue(a, x, dy, k0, un, bn, sm);
      copy_commit();
    }
    const float* dsb = sm.ds[b] + kg * kTiDsLd;
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
#pragma unroll
      for (int i = 0; i < 4; ++i) d[i] = dsb[i * kTiKG * kTiDsLd + 16 * half + q];
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

}  // namespace hpmc::gpu::implicit_detail
