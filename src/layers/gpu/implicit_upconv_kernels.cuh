// implicit_upconv_kernels.cuh — the kernels of the upsample fold: a nearest ×2
// upsample followed by a 3×3, stride-1, pad-1 convolution, run on the
// low-resolution input without forming the upsampled tensor (conv2d_kernels.h,
// implicit::upconv_*; the scheme is described at the top of
// conv2d_implicit_gemm.cu, its only includer). The GEMMs run on the engines of
// implicit_gemm_core.cuh / implicit_gemm_wide.cuh with the loaders below.
//
// Notation: x_low [N][C][h][w], y and dy [N][K][H][W] with H = 2h, W = 2w,
// w [K][C][3][3]. Output pixel (2i+py, 2j+px) has parity p = 2·py + px. Along
// one axis, filter rows r ∈ [fold_lo(py, a), fold_hi(py, a)] read low row
// i + a − 1 + py (tap a ∈ {0, 1}):
//   py = 0: tap 0 = row {0} at i − 1, tap 1 = rows {1, 2} at i;
//   py = 1: tap 0 = rows {0, 1} at i, tap 1 = row {2} at i + 1.
// Parity p's 2×2 filter is Wc_p[a][b] = Σ w[r][s] over those rows and columns
// (upconv_weights_kernel, in double, rounded once).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "layers/gpu/implicit_conv_kernels.cuh"

namespace hpmc::gpu::implicit_detail {

// The filter rows [fold_lo, fold_hi] that tap a of parity p sums, and the tap
// that filter row r lands in for parity p.
__host__ __device__ __forceinline__ int fold_lo(int p, int a) { return a == 0 ? 0 : 1 + p; }
__host__ __device__ __forceinline__ int fold_hi(int p, int a) { return a == 0 ? p : 2; }
__host__ __device__ __forceinline__ int fold_tap(int p, int r) { return r > p ? 1 : 0; }

// The sizes of one fold, by value in the kernel's parameter space.
struct UpArgs {
  int N, C, K, h, w, H, W, hw, HW;
  int M;  // N·h·w, the low-resolution pixels (< 2^30: the host checks)
  FastDiv fhw, fw;
};

// ---- A of forward and backward_data: RowFast over m = (n, i, j), tap-major GEMM_K ----
//
// forward        k = t·C + c, t = 2a + b < 4: x_low[n][c][i + a − 1 + py][j + b − 1 + px]
//                for the block's parity (py, px).
// backward_data  k = (4p + t)·K + ko < 16·K: dy[n][ko][Y][X] with
//                Y = 2(i − (a − 1 + py)) + py = 2i + 2 − 2a − py (and X likewise): the
//                output of parity p and tap t that read low pixel (i, j); 0 when Y or
//                X falls outside the map.
// The channel count is a multiple of kBK, so every k-tile lies in one tap: one
// in-range test per row and tap, then steps of kBK planes (as TapALoader).
template <int ROWS, int NT, bool DGRAD>
struct FoldALoader {
  using Map = RowFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const UpArgs& a;
  const float* ib;  // this row's image of the input (image 0 for an invalid row)
  int u, v;         // the row's low-resolution pixel (i, j)
  int py, px;       // forward: the block's parity
  int tid;
  int tap = 0, c0 = 0, off = 0;
  bool mvalid, ok = false;

  __device__ __forceinline__ int cin() const { return DGRAD ? a.K : a.C; }
  __device__ __forceinline__ int hin() const { return DGRAD ? a.H : a.h; }
  __device__ __forceinline__ int win() const { return DGRAD ? a.W : a.w; }
  __device__ __forceinline__ int plane() const { return DGRAD ? a.HW : a.hw; }

  __device__ __forceinline__ FoldALoader(const UpArgs& a_, const float* in, int parity, int m0,
                                         int tid_)
      : a(a_), py(parity >> 1), px(parity & 1), tid(tid_) {
    const int m = m0 + Map::row(tid);
    mvalid = m < a.M;
    int img, ij;
    a.fhw.divmod(mvalid ? m : 0, img, ij);
    a.fw.divmod(ij, u, v);
    ib = in + (size_t)img * cin() * plane();
  }
  __device__ __forceinline__ void set_tap() {
    int y, x;
    if constexpr (DGRAD) {
      const int p = tap >> 2, t = tap & 3, qy = p >> 1, qx = p & 1;
      y = 2 * u + 2 - 2 * (t >> 1) - qy;
      x = 2 * v + 2 - 2 * (t & 1) - qx;
    } else {
      y = u + (tap >> 1) - 1 + py;
      x = v + (tap & 1) - 1 + px;
    }
    ok = mvalid && (unsigned)y < (unsigned)hin() && (unsigned)x < (unsigned)win();
    off = (c0 + Map::kk(tid, 0)) * plane() + y * win() + x;
  }
  __device__ __forceinline__ void start(int kt) {
    const int k0 = kt * kBK;
    tap = k0 / cin();
    c0 = k0 - tap * cin();
    set_tap();
  }
  __device__ __forceinline__ void issue(float (*st)[ROWS + kPad]) {
    const int o = ok ? off : 0, step = ok ? Map::KSTEP * plane() : 0;  // in range either way
#pragma unroll
    for (int e = 0; e < ELEMS; ++e)
      copy4(&st[Map::kk(tid, e)][Map::row(tid)], ib + (o + e * step), ok);
    c0 += kBK;
    off += kBK * plane();
    if (c0 == cin()) {  // block-uniform: the next tap
      c0 = 0;
      ++tap;
      set_tap();
    }
  }
};

// ---- the weight gradient of parity p: GEMM_M = K, GEMM_N = 4·C (n' = t·C + c),
// GEMM_K = N·h·w (low-resolution pixels) --------------------------------------------

// A (KFast; rows = ko, k = (n, i, j)): dy[n][ko][2i + py][2j + px].
template <int ROWS, int NT>
struct FoldWgradALoader {
  using Map = KFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const UpArgs& a;
  const float* dy;
  int py, px, m0, tid, k0 = 0;

  __device__ __forceinline__ FoldWgradALoader(const UpArgs& a_, const float* dy_, int parity,
                                              int m0_, int tid_)
      : a(a_), dy(dy_), py(parity >> 1), px(parity & 1), m0(m0_), tid(tid_) {}
  __device__ __forceinline__ void start(int kt) { k0 = kt * kBK; }
  __device__ __forceinline__ void issue(float (*s)[ROWS + kPad]) {
    const int k = k0 + Map::kk(tid);
    const bool kvalid = k < a.M;
    int img, ij, i, j;
    a.fhw.divmod(kvalid ? k : 0, img, ij);
    a.fw.divmod(ij, i, j);
    const float* base = dy + (size_t)img * a.K * a.HW + ((2 * i + py) * a.W + 2 * j + px);
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int ko = m0 + Map::row(tid, e);
      const bool ok = kvalid && ko < a.K;
      copy4(&s[Map::kk(tid)][Map::row(tid, e)], ok ? base + ko * a.HW : dy, ok);
    }
    k0 += kBK;
  }
};

// B (KFast; rows = n' = t·C + c, k = (n, i, j)): x_low[n][c][i + a − 1 + py][j + b − 1 + px]
// with t = 2a + b. The rows' (c, offsets) are decoded once per block.
template <int ROWS, int NT>
struct FoldWgradBLoader {
  using Map = KFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  static_assert(ELEMS <= 8, "four bits of offsets per row fit an unsigned");
  const UpArgs& a;
  const float* x;
  int tid, k0 = 0;
  unsigned offs;    // bits 4e..4e+3: row e's tap offsets (dy + 1) | (dx + 1) << 2, each in
                    // {0, 1, 2}; 0xf: row e is past 4·C (never in range)
  int roff[ELEMS];  // c·h·w + dy·w + dx

  __device__ __forceinline__ FoldWgradBLoader(const UpArgs& a_, const float* x_, int parity,
                                              int n0, int tid_)
      : a(a_), x(x_), tid(tid_), offs(0) {
    const int py = parity >> 1, px = parity & 1;
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int n = n0 + Map::row(tid, e);
      const bool ok = n < 4 * a.C;
      const int t = ok ? n / a.C : 0, c = ok ? n - t * a.C : 0;
      const int dy = (t >> 1) - 1 + py, dx = (t & 1) - 1 + px;
      offs |= (ok ? unsigned((dy + 1) | (dx + 1) << 2) : 0xfu) << (4 * e);
      roff[e] = c * a.hw + dy * a.w + dx;
    }
  }
  __device__ __forceinline__ void start(int kt) { k0 = kt * kBK; }
  __device__ __forceinline__ void issue(float (*st)[ROWS + kPad]) {
    const int k = k0 + Map::kk(tid);
    const bool kvalid = k < a.M;
    int img, ij, i, j;
    a.fhw.divmod(kvalid ? k : 0, img, ij);
    a.fw.divmod(ij, i, j);
    const float* xb = x + (size_t)img * a.C * a.hw;
    const int boff = i * a.w + j;
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      // A row past 4·C decodes to offsets 2, 2: i + 2 ≥ h or j + 2 ≥ w does not
      // always hold, so its validity is tested by itself.
      const unsigned o = (offs >> (4 * e)) & 0xfu;
      const int yy = i + int(o & 3u) - 1, xx = j + int(o >> 2) - 1;
      const bool ok = kvalid && o != 0xfu && (unsigned)yy < (unsigned)a.h &&
                      (unsigned)xx < (unsigned)a.w;
      copy4(&st[Map::kk(tid)][Map::row(tid, e)], ok ? xb + (roff[e] + boff) : x, ok);
    }
    k0 += kBK;
  }
};

// ---- the forward's epilogue without split-K: row m = (n, i, j) of parity
// blockIdx.z, column ko, goes to y[n][ko][2i + py][2j + px] -----------------------------
struct FoldOut {
  static constexpr bool kAlongM = true;
  float* out;
  const float* bias;  // may be null
  int M, K, w, W, HW;
  FastDiv fhw, fw;
  bool row4;  // w % 4 == 0: rows m..m+3 (m a multiple of 4) lie in one image row
  bool relu;

  __device__ __forceinline__ float value(float v, float b) const {
    const float o = v + b;
    return relu ? relu_of(o) : o;
  }
  __device__ __forceinline__ float* at(int m, int n) const {
    const int p = blockIdx.z, py = p >> 1, px = p & 1;
    int img, ij, i, j;
    fhw.divmod(m, img, ij);
    fw.divmod(ij, i, j);
    return out + ((size_t)img * K + n) * HW + (2 * i + py) * W + 2 * j + px;
  }
  __device__ __forceinline__ void store_mcol(int m, int n, const float (&v)[4]) const {
    if (m >= M || n >= K) return;
    const float b = bias ? __ldg(bias + n) : 0.f;
    if (row4) {  // m..m+3 are (i, j..j+3) of one image, all below M
      float* o = at(m, n);
#pragma unroll
      for (int e = 0; e < 4; ++e) o[2 * e] = value(v[e], b);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (m + e >= M) break;
        *at(m + e, n) = value(v[e], b);
      }
    }
  }
};

// ---- kernels ---------------------------------------------------------------------------

// blockIdx.z = parity·splits + slice; slice covers k-tiles [slice·tps, …) of ktiles.
__device__ __forceinline__ void fold_slice(int splits, int ktiles, int tps, int& parity, int& kt0,
                                           int& kt1) {
  parity = (int)blockIdx.z / splits;
  const int slice = (int)blockIdx.z - parity * splits;
  kt0 = min(slice * tps, ktiles);
  kt1 = min(kt0 + tps, ktiles);
}

// Forward, per parity: A = FoldALoader, B = wf[((p·4 + t)·C + c)·K + ko] (K contiguous).
// Epi: FoldOut (splits = 1) or ConvOut into the parity-major split workspace.
template <class Cfg, class Epi>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    upconv_fwd_kernel(const __grid_constant__ UpArgs a, const float* __restrict__ x,
                      const float* __restrict__ wf, int splits, int tps,
                      const __grid_constant__ Epi epi) {
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  int parity, kt0, kt1;
  fold_slice(splits, ktiles_of(4ll * a.C), tps, parity, kt0, kt1);
  FoldALoader<Cfg::BM, Cfg::NT, false> al(a, x, parity, m0, tid);
  VecRowLoader<Cfg::BN, Cfg::NT> bl(wf + (size_t)parity * 4 * a.C * a.K, a.K, a.K, 4 * a.C, n0,
                                    tid);
  run_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
}

// Backward data: A = FoldALoader over dy, B = wd[((p·4 + t)·K + ko)·C + c] (C contiguous);
// blockIdx.z is the split slice. Epi: ConvOut on the low-resolution map.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    upconv_dgrad_kernel(const __grid_constant__ UpArgs a, const float* __restrict__ dy,
                        const float* __restrict__ wd, int tps, const __grid_constant__ ConvOut epi) {
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  int kt0, kt1;
  slice_range(ktiles_of(16ll * a.K), tps, kt0, kt1);
  FoldALoader<Cfg::BM, Cfg::NT, true> al(a, dy, 0, m0, tid);
  VecRowLoader<Cfg::BN, Cfg::NT> bl(wd, a.C, a.C, 16 * a.K, n0, tid);
  run_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
}

// Weight gradient, per parity and slice: ws[parity·splits + slice][ko][t·C + c] (MatOut).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    upconv_wgrad_kernel(const __grid_constant__ UpArgs a, const float* __restrict__ x,
                        const float* __restrict__ dy, int splits, int tps,
                        const __grid_constant__ MatOut epi) {
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  int parity, kt0, kt1;
  fold_slice(splits, ktiles_of(a.M), tps, parity, kt0, kt1);
  FoldWgradALoader<Cfg::BM, Cfg::NT> al(a, dy, parity, m0, tid);
  FoldWgradBLoader<Cfg::BN, Cfg::NT> bl(a, x, parity, n0, tid);
  run_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
}

// The parities' summed filters, from w[ko][c][r][s]:
//   forward         wf[((p·4 + t)·C + c)·K + ko]
//   backward_data   wd[((p·4 + t)·K + ko)·C + c]
// Wc_p[t] = Σ w[ko][c][r][s] over r ∈ [fold_lo(py, a), fold_hi(py, a)], s likewise
// (t = 2a + b), r then s ascending, in double, rounded once to float.
// Block (bx, by) covers channels 32·bx … and output channels 32·by …: it reads
// their 3×3 filters (32 runs of 288 consecutive floats) into shared memory,
// then writes each of the 16 outputs' 32×32 tile with the output layout's
// fastest index on the lanes (coalesced both ways).
constexpr int kFoldTile = 32;

__global__ void __launch_bounds__(256)
    upconv_weights_kernel(const float* __restrict__ w, int K, int C, bool for_dgrad,
                          float* __restrict__ out) {
  __shared__ float f[kFoldTile][kFoldTile * 9 + 1];  // [ko][c·9 + rs]
  const int c0 = blockIdx.x * kFoldTile, ko0 = blockIdx.y * kFoldTile;
  const int nc = min(kFoldTile, C - c0), nk = min(kFoldTile, K - ko0);
  for (int i = threadIdx.x; i < kFoldTile * kFoldTile * 9; i += blockDim.x) {
    const int ko = i / (kFoldTile * 9), j = i - ko * (kFoldTile * 9);
    if (ko < nk && j < nc * 9) f[ko][j] = __ldg(w + ((size_t)(ko0 + ko) * C + c0) * 9 + j);
  }
  __syncthreads();
  // lane index: ko (forward) or c (backward_data), the other index over the warps
  const int fast = threadIdx.x % kFoldTile;
  for (int slow = threadIdx.x / kFoldTile; slow < kFoldTile; slow += blockDim.x / kFoldTile) {
    const int ko = for_dgrad ? slow : fast, c = for_dgrad ? fast : slow;
    if (ko >= nk || c >= nc) continue;
    const float* src = &f[ko][c * 9];
#pragma unroll
    for (int pt = 0; pt < 16; ++pt) {
      const int p = pt >> 2, t = pt & 3, py = p >> 1, px = p & 1, ta = t >> 1, tb = t & 1;
      double s = 0.0;
      for (int r = fold_lo(py, ta); r <= fold_hi(py, ta); ++r)
        for (int q = fold_lo(px, tb); q <= fold_hi(px, tb); ++q) s += (double)src[r * 3 + q];
      const size_t o = for_dgrad ? ((size_t)pt * K + ko0 + ko) * C + c0 + c
                                 : ((size_t)pt * C + c0 + c) * K + ko0 + ko;
      out[o] = (float)s;
    }
  }
}

// dw[ko][c][r][s] += Σ_{p = 0..3} Σ_{z < splits} ws[p·splits + z][ko][t·C + c] with
// t = 2·fold_tap(py, r) + fold_tap(px, s): every filter tap lands in exactly one
// tap of each parity. p then z ascending, in double. Thread i covers (ko, rs, c),
// c fastest (coalesced reads; dw written with a stride of 9).
__global__ void __launch_bounds__(256)
    upconv_wgrad_reduce_kernel(const float* __restrict__ ws, int splits, int K, int C,
                               float* __restrict__ dw) {
  const long long count = 9ll * K * C, slab = 4ll * K * C;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const int c = int(i % C);
    const long long t2 = i / C;
    const int rs = int(t2 % 9), ko = int(t2 / 9), r = rs / 3, s = rs - 3 * r;
    double acc = 0.0;
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const int t = 2 * fold_tap(p >> 1, r) + fold_tap(p & 1, s);
      const float* src = ws + (long long)p * splits * slab + (long long)ko * 4 * C + t * C + c;
      for (int z = 0; z < splits; ++z) acc += (double)src[z * slab];
    }
    float* o = dw + ((long long)ko * C + c) * 9 + rs;
    *o = (float)((double)*o + acc);
  }
}

// The split forward's slices, scattered to y: y[n][ko][Y][X] = (float)(Σ_z, in double,
// z ascending, of ws[p·splits + z][n][ko][Y/2][X/2] with p the pixel's parity) + bias,
// then the fused ReLU if relu.
__global__ void __launch_bounds__(256)
    upconv_out_reduce_kernel(const float* __restrict__ ws, int splits,
                             const __grid_constant__ UpArgs a, const float* __restrict__ bias,
                             bool relu, float* __restrict__ y) {
  const long long count = (long long)a.N * a.K * a.HW, slab = (long long)a.M * a.K;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const long long plane = i / a.HW;  // n·K + ko
    const int pix = int(i - plane * a.HW), Y = pix / a.W, X = pix - Y * a.W;
    const int p = 2 * (Y & 1) + (X & 1);
    const float* src = ws + (long long)p * splits * slab + plane * a.hw + (Y >> 1) * a.w + (X >> 1);
    double s = 0.0;
    for (int z = 0; z < splits; ++z) s += (double)src[z * slab];
    float v = (float)s;
    if (bias) v += __ldg(bias + (int)(plane % a.K));
    y[i] = relu ? relu_of(v) : v;
  }
}

// ---- the thin fold: K ≤ 4 output channels (an autoencoder's last layer) ---------------
//
// As a GEMM the fold of a thin convolution is 4·K columns wide (forward) or K
// rows tall (weight gradient): mostly padding on the GEMM engines. These
// kernels keep every parity and output channel of a low-resolution pixel in
// registers instead; the summed filters come from shared memory as one float4
// per (channel, parity, tap): wc[(c·16 + p·4 + t)] = Wc_p[t][c][0..3], the K
// channels padded to 4 with zeros (upconv_thin_weights_kernel), the same
// address for a whole warp (a broadcast).
//   forward        thread = one low pixel × one group of channels (blockIdx.y):
//                  its 3×3 low window per channel, 16·4 FMAs; groups' partial
//                  outputs go to a workspace summed by upconv_thin_out_kernel
//                  (with one group, straight to y with the bias and ReLU).
//   backward_data  thread = one low pixel × a block's channels: the 4×4 window
//                  of dy (every parity and tap that read the pixel) in registers,
//                  16·K FMAs per channel, the ReLU mask, one store.
//   weight grad    warp = one channel, lane = pixels of one slice (blockIdx.y):
//                  16·K sums per lane, a shuffle tree at the end, one row of
//                  the slice's workspace; warp 0 of channel block 0 also sums dy
//                  for the bias. upconv_thin_wgrad_reduce_kernel adds the slices
//                  and parities into dw and db, in double.
constexpr int kThinFoldThreads = 256;
constexpr int kThinFoldMaxGroup = 64;  // channels per forward group / backward-data block

// wc[c·16 + p·4 + t] = (Wc_p[t][c][k], k < 4; 0 for k ≥ K), in double, rounded once.
__global__ void __launch_bounds__(256)
    upconv_thin_weights_kernel(const float* __restrict__ w, int K, int C,
                               float4* __restrict__ wc) {
  const int count = 16 * C;
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < count; o += gridDim.x * blockDim.x) {
    const int c = o >> 4, pt = o & 15, p = pt >> 2, t = pt & 3, py = p >> 1, px = p & 1;
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      double s = 0.0;
      if (k < K) {
        const float* src = w + ((size_t)k * C + c) * 9;
        for (int r = fold_lo(py, t >> 1); r <= fold_hi(py, t >> 1); ++r)
          for (int q = fold_lo(px, t & 1); q <= fold_hi(px, t & 1); ++q)
            s += (double)__ldg(src + r * 3 + q);
      }
      v[k] = (float)s;
    }
    wc[o] = make_float4(v[0], v[1], v[2], v[3]);
  }
}

// Stage the float4 filters of channels [c0, c0 + n) into sw.
__device__ __forceinline__ void stage_thin_filters(const float4* __restrict__ wc, int c0, int n,
                                                   float4* sw) {
  for (int i = threadIdx.x; i < 16 * n; i += blockDim.x) sw[i] = __ldg(wc + (size_t)c0 * 16 + i);
  __syncthreads();
}

// Forward: group g = blockIdx.y covers channels [g·per, min((g+1)·per, C)). With
// `direct`, out = y (+ bias, ReLU); else out = ws, slice g of N·K·H·W.
template <int KC>
__global__ void __launch_bounds__(kThinFoldThreads)
    upconv_thin_fwd_kernel(const __grid_constant__ UpArgs a, const float* __restrict__ x,
                           const float4* __restrict__ wc, int per, bool direct,
                           const float* __restrict__ bias, bool relu, float* __restrict__ out) {
  __shared__ float4 sw[16 * kThinFoldMaxGroup];
  const int c0 = blockIdx.y * per, nc = min(per, a.C - c0);
  stage_thin_filters(wc, c0, nc, sw);
  const int m = blockIdx.x * kThinFoldThreads + threadIdx.x;
  if (m >= a.M) return;
  int img, ij, i, j;
  a.fhw.divmod(m, img, ij);
  a.fw.divmod(ij, i, j);
  float acc[4][KC] = {};
  // The 3×3 window's offsets and in-range bits, once per pixel (an out-of-range
  // element reads offset 0, in range, and is replaced by 0).
  int off[9];
  unsigned inside = 0;
#pragma unroll
  for (int e = 0; e < 9; ++e) {
    const int yy = i + e / 3 - 1, xx = j + e % 3 - 1;
    const bool ok = (unsigned)yy < (unsigned)a.h && (unsigned)xx < (unsigned)a.w;
    inside |= ok ? 1u << e : 0u;
    off[e] = ok ? yy * a.w + xx : 0;
  }
  const float* xc = x + ((size_t)img * a.C + c0) * a.hw;
  for (int c = 0; c < nc; ++c, xc += a.hw) {
    float v[9];
#pragma unroll
    for (int e = 0; e < 9; ++e) {
      const float t = __ldg(xc + off[e]);
      v[e] = (inside >> e) & 1u ? t : 0.f;
    }
#pragma unroll
    for (int p = 0; p < 4; ++p)
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const float4 wv = sw[c * 16 + p * 4 + t];
        const float wk[4] = {wv.x, wv.y, wv.z, wv.w};
        const float xv = v[((t >> 1) + (p >> 1)) * 3 + (t & 1) + (p & 1)];
#pragma unroll
        for (int k = 0; k < KC; ++k) acc[p][k] = fmaf(xv, wk[k], acc[p][k]);
      }
  }
  float* o = direct ? out : out + (size_t)blockIdx.y * a.N * KC * a.HW;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const int pix = (2 * i + (p >> 1)) * a.W + 2 * j + (p & 1);
#pragma unroll
    for (int k = 0; k < KC; ++k) {
      float r = acc[p][k];
      if (direct) {
        if (bias) r += __ldg(bias + k);
        if (relu) r = relu_of(r);
      }
      o[((size_t)img * KC + k) * a.HW + pix] = r;
    }
  }
}

// y[i] = (float)(Σ_{g ascending} ws[g·count + i], in double) + bias, then the ReLU.
__global__ void __launch_bounds__(256)
    upconv_thin_out_kernel(const float* __restrict__ ws, int groups, long long count, int K,
                           int HW, const float* __restrict__ bias, bool relu,
                           float* __restrict__ y) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    double s = 0.0;
    for (int g = 0; g < groups; ++g) s += (double)ws[(long long)g * count + i];
    float v = (float)s;
    if (bias) v += __ldg(bias + (int)((i / HW) % K));
    y[i] = relu ? relu_of(v) : v;
  }
}

// Backward data: block (blockIdx.x, blockIdx.y) = 256 low pixels × channels
// [blockIdx.y·per, …). dx_low = Σ over parity p, tap t, k of
// dy[k][2i + 2 − 2a − py][2j + 2 − 2b − px] · Wc_p[t][c][k], p and t ascending.
template <int KC>
__global__ void __launch_bounds__(kThinFoldThreads)
    upconv_thin_dgrad_kernel(const __grid_constant__ UpArgs a, const float* __restrict__ dy,
                             const float4* __restrict__ wc, int per, const float* __restrict__ mask,
                             float* __restrict__ dx) {
  __shared__ float4 sw[16 * kThinFoldMaxGroup];
  const int c0 = blockIdx.y * per, nc = min(per, a.C - c0);
  stage_thin_filters(wc, c0, nc, sw);
  const int m = blockIdx.x * kThinFoldThreads + threadIdx.x;
  if (m >= a.M) return;
  int img, ij, i, j;
  a.fhw.divmod(m, img, ij);
  a.fw.divmod(ij, i, j);
  float d[16][KC];
#pragma unroll
  for (int pt = 0; pt < 16; ++pt) {
    const int p = pt >> 2, t = pt & 3;
    const int yy = 2 * i + 2 - 2 * (t >> 1) - (p >> 1), xx = 2 * j + 2 - 2 * (t & 1) - (p & 1);
    const bool ok = (unsigned)yy < (unsigned)a.H && (unsigned)xx < (unsigned)a.W;
#pragma unroll
    for (int k = 0; k < KC; ++k)
      d[pt][k] = ok ? __ldg(dy + ((size_t)img * KC + k) * a.HW + yy * a.W + xx) : 0.f;
  }
  const size_t base = ((size_t)img * a.C + c0) * a.hw + (size_t)i * a.w + j;
  for (int c = 0; c < nc; ++c) {
    float s = 0.f;
#pragma unroll
    for (int pt = 0; pt < 16; ++pt) {
      const float4 wv = sw[c * 16 + pt];
      const float wk[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
      for (int k = 0; k < KC; ++k) s = fmaf(d[pt][k], wk[k], s);
    }
    const size_t at = base + (size_t)c * a.hw;
    dx[at] = mask ? ConvOut::masked(s, __ldg(mask + at)) : s;
  }
}

// Weight gradient: warp w of block bx = channel 8·bx + w; slice z = blockIdx.y
// covers low pixels [z·per, min((z+1)·per, M)), lane l the pixels l, l + 32, …
// of it. ws[z·stride + c·16·KC + (p·4 + t)·KC + k] = Σ x(tap t of parity p)·dy(p, k);
// ws[z·stride + C·16·KC + k] = Σ dy[k] over the slice's pixels' 2×2 blocks
// (warp 0 of block 0). stride = (C·16 + 1)·KC.
constexpr int kThinFoldWarps = 8;

template <int KC>
__global__ void __launch_bounds__(kThinFoldWarps * 32)
    upconv_thin_wgrad_kernel(const __grid_constant__ UpArgs a, const float* __restrict__ x,
                             const float* __restrict__ dy, int per, float* __restrict__ ws) {
  const int lane = threadIdx.x & 31, c = blockIdx.x * kThinFoldWarps + (threadIdx.x >> 5);
  if (c >= a.C) return;  // warp-uniform; no block-wide synchronization below
  const bool bias = c == 0;
  const int q0 = blockIdx.y * per, q1 = min(q0 + per, a.M);
  float acc[16][KC] = {};
  float accb[KC] = {};
  for (int q = q0 + lane; q < q1; q += 32) {
    int img, ij, i, j;
    a.fhw.divmod(q, img, ij);
    a.fw.divmod(ij, i, j);
    const float* xc = x + ((size_t)img * a.C + c) * a.hw;
    float v[3][3];
#pragma unroll
    for (int ry = 0; ry < 3; ++ry)
#pragma unroll
      for (int rx = 0; rx < 3; ++rx) {
        const int yy = i + ry - 1, xx = j + rx - 1;
        v[ry][rx] = (unsigned)yy < (unsigned)a.h && (unsigned)xx < (unsigned)a.w
                        ? __ldg(xc + yy * a.w + xx) : 0.f;
      }
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float* dyp = dy + (size_t)img * KC * a.HW + (2 * i + (p >> 1)) * a.W + 2 * j + (p & 1);
#pragma unroll
      for (int k = 0; k < KC; ++k) {
        const float g = __ldg(dyp + (size_t)k * a.HW);
        if (bias) accb[k] += g;
#pragma unroll
        for (int t = 0; t < 4; ++t)
          acc[p * 4 + t][k] = fmaf(v[(t >> 1) + (p >> 1)][(t & 1) + (p & 1)], g, acc[p * 4 + t][k]);
      }
    }
  }
  // A fixed butterfly over the lanes: every lane ends with the same sums.
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
    for (int pt = 0; pt < 16; ++pt)
#pragma unroll
      for (int k = 0; k < KC; ++k) acc[pt][k] += __shfl_xor_sync(0xffffffffu, acc[pt][k], off);
#pragma unroll
    for (int k = 0; k < KC; ++k) accb[k] += __shfl_xor_sync(0xffffffffu, accb[k], off);
  }
  float* o = ws + (size_t)blockIdx.y * (16 * a.C + 1) * KC;
  if (lane < 16) {
#pragma unroll
    for (int pt = 0; pt < 16; ++pt)
      if (pt == lane)
#pragma unroll
        for (int k = 0; k < KC; ++k) o[((size_t)c * 16 + pt) * KC + k] = acc[pt][k];
  }
  if (bias && lane == 0)
#pragma unroll
    for (int k = 0; k < KC; ++k) o[(size_t)16 * a.C * KC + k] = accb[k];
}

// dw[k][c][r][s] += Σ_p Σ_z ws[z·stride + (c·16 + p·4 + t)·K + k], t the tap of
// parity p that (r, s) lands in; db[k] += Σ_z ws[z·stride + 16·C·K + k]; p then z
// ascending, in double. One thread per element of dw (then of db), in blocks of
// kThinReduceThreads (few elements: small blocks spread them over more SMs).
constexpr int kThinReduceThreads = 64;

__global__ void __launch_bounds__(kThinReduceThreads)
    upconv_thin_wgrad_reduce_kernel(const float* __restrict__ ws, int slices, int K, int C,
                                    float* __restrict__ dw, float* __restrict__ db) {
  const long long stride = (16ll * C + 1) * K, nw = 9ll * K * C;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nw + K;
       i += (long long)gridDim.x * blockDim.x) {
    double s = 0.0;
    if (i < nw) {
      const int rs = int(i % 9), r = rs / 3, q = rs - 3 * r;
      const long long kc = i / 9;
      const int c = int(kc % C), k = int(kc / C);
      for (int p = 0; p < 4; ++p) {
        const int t = 2 * fold_tap(p >> 1, r) + fold_tap(p & 1, q);
        const float* src = ws + ((long long)c * 16 + p * 4 + t) * K + k;
#pragma unroll 4
        for (int z = 0; z < slices; ++z) s += (double)src[z * stride];
      }
      dw[i] = (float)((double)dw[i] + s);
    } else if (db) {
      const int k = int(i - nw);
      for (int z = 0; z < slices; ++z) s += (double)ws[z * stride + 16ll * C * K + k];
      db[k] = (float)((double)db[k] + s);
    }
  }
}

}  // namespace hpmc::gpu::implicit_detail
