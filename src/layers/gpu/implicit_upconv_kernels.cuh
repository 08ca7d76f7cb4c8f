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

// The thin fold (below) takes 5×5, pad-2 filters too. There every parity reads
// the same low rows i − 1, i, i + 1 (taps a = 0, 1, 2): output row 2i + py,
// filter row r reads upsampled row 2i + py + r − 2, low row i + ⌊(py + r − 2)/2⌋,
// so filter row r lands in tap (py + r) / 2:
//   py = 0: tap 0 = rows {0, 1}, tap 1 = rows {2, 3}, tap 2 = row {4};
//   py = 1: tap 0 = row {0}, tap 1 = rows {1, 2}, tap 2 = rows {3, 4}.
// Per parity a 3×3 filter of sums of up to four 5×5 weights: 9 multiply-adds
// an output where the upsampled convolution takes 25.
template <int R>
constexpr int kFoldTaps = R == 3 ? 2 : 3;  // taps per axis and parity
template <int R>
constexpr int kFoldPT = 4 * kFoldTaps<R> * kFoldTaps<R>;  // (parity, tap) pairs
// The tap filter row r lands in for parity p.
template <int R>
__host__ __device__ __forceinline__ int fold_tap_of(int p, int r) {
  return R == 3 ? fold_tap(p, r) : (p + r) >> 1;
}
// The low row (from i − 1) that tap 0 of parity p reads: i − 1 + p for 3×3,
// i − 1 for both parities for 5×5.
template <int R>
__host__ __device__ __forceinline__ int fold_base(int p) {
  return R == 3 ? p : 0;
}

// The sizes of one fold, by value in the kernel's parameter space.
struct UpArgs {
  int N, C, K, h, w, H, W, hw, HW;
  int M;   // N·h·w, the low-resolution pixels (< 2^30: the host checks)
  int Mp;  // N·h·⌈w/2⌉, the thin fold's pixel pairs
  int Mu;  // N·⌈h/kThinFoldBand⌉·⌈w/2⌉, its weight gradient's units
  FastDiv fhw, fw;
  FastDiv fh, fwp, fbands;  // h, ⌈w/2⌉, ⌈h/kThinFoldBand⌉ (the thin fold)
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
// FoldOut has the ReLU flag, FoldActOut any activation (EpiAct, implicit_conv_kernels.cuh).
template <bool ACT>
struct FoldOutT {
  static constexpr bool kAlongM = true;
  float* out;
  const float* bias;  // may be null
  int M, K, w, W, HW;
  FastDiv fhw, fw;
  bool row4;  // w % 4 == 0: rows m..m+3 (m a multiple of 4) lie in one image row
  EpiAct<ACT> act;  // applied to v + b

  __device__ __forceinline__ float value(float v, float b, int ch) const {
    return act.apply(v + b, ch);
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
      for (int e = 0; e < 4; ++e) o[2 * e] = value(v[e], b, n);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (m + e >= M) break;
        *at(m + e, n) = value(v[e], b, n);
      }
    }
  }
};
using FoldOut = FoldOutT<false>;
using FoldActOut = FoldOutT<true>;

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
// Epi: FoldOut or FoldActOut (splits = 1), or ConvOut into the parity-major split workspace.
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

// Wc_p[t] (pt = 4p + t) of one filter src[r·3 + s]: the sum of the taps it
// folds, r then s ascending, in double, rounded once to float.
__device__ __forceinline__ float fold_weight_sum(const float (&src)[9], int pt) {
  const int p = pt >> 2, t = pt & 3, py = p >> 1, px = p & 1, ta = t >> 1, tb = t & 1;
  double sum = 0.0;
#pragma unroll
  for (int r = 0; r < 3; ++r)
#pragma unroll
    for (int q = 0; q < 3; ++q)
      if (r >= fold_lo(py, ta) && r <= fold_hi(py, ta) && q >= fold_lo(px, tb) &&
          q <= fold_hi(px, tb))
        sum += (double)src[r * 3 + q];
  return (float)sum;
}

// Calls store(ko, c, pt, Wc_p[t]) (pt = 4p + t) for filter e of w[ko][c][3][3]
// and every pt < 16, where e counts the filters ko fastest when ko_fast (else
// c), so that the stores of a layout with that index fastest coalesce when
// consecutive threads take consecutive e; the filter's 9 values are loaded at
// once.
template <class Store>
__device__ __forceinline__ void fold_weight_element(const float* __restrict__ w, int K, int C,
                                                    bool ko_fast, long long e,
                                                    const Store& store) {
  const int fast = ko_fast ? K : C;
  const int f = int(e % fast), sl = int(e / fast);
  const int ko = ko_fast ? f : sl, c = ko_fast ? sl : f;
  float src[9];
#pragma unroll
  for (int j = 0; j < 9; ++j) src[j] = __ldg(w + ((size_t)ko * C + c) * 9 + j);
#pragma unroll
  for (int pt = 0; pt < 16; ++pt) store(ko, c, pt, fold_weight_sum(src, pt));
}

// fold_weight_element for every filter, one thread each (grid-stride).
template <class Store>
__device__ __forceinline__ void for_each_fold_weight(const float* __restrict__ w, int K, int C,
                                                     bool ko_fast, const Store& store) {
  const long long count = (long long)K * C;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < count;
       e += (long long)gridDim.x * blockDim.x)
    fold_weight_element(w, K, C, ko_fast, e, store);
}

// The parities' summed filters, from w[ko][c][r][s]:
//   forward         wf[((p·4 + t)·C + c)·K + ko]
//   backward_data   wd[((p·4 + t)·K + ko)·C + c]
// Wc_p[t] = Σ w[ko][c][r][s] over r ∈ [fold_lo(py, a), fold_hi(py, a)], s likewise
// (t = 2a + b), r then s ascending, in double, rounded once to float.
// One thread per (ko, c), the output layout's fastest index on the lanes
// (coalesced stores): it loads its filter's 9 values at once and writes its
// 16 sums. (A block per 32×32 tile of (ko, c), staged in shared memory, took
// 19 µs for the CIFAR AE's 256 × 128: 32 blocks, each thread's loads one
// after another.)
__global__ void __launch_bounds__(256)
    upconv_weights_kernel(const float* __restrict__ w, int K, int C, bool for_dgrad,
                          float* __restrict__ out) {
  for_each_fold_weight(w, K, C, !for_dgrad, [&](int ko, int c, int pt, float v) {
    out[for_dgrad ? ((size_t)pt * K + ko) * C + c : ((size_t)pt * C + c) * K + ko] = v;
  });
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

// upconv_out_reduce_kernel with any activation: act(the sum + bias) for the
// pixel's output channel.
__global__ void __launch_bounds__(256)
    upconv_out_reduce_act_kernel(const float* __restrict__ ws, int splits,
                                 const __grid_constant__ UpArgs a, const float* __restrict__ bias,
                                 const __grid_constant__ Activation act, float* __restrict__ y) {
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
    const int ko = (int)(plane % a.K);
    if (bias) v += __ldg(bias + ko);
    y[i] = apply_activation(act, v, ko);
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
// kernels keep every parity and output channel of two neighbouring low pixels
// in registers instead. A thread owns the pair (i, j0), (i, j0 + 1), j0 = 2·jp,
// of image n; pairs are numbered m = (n·h + i)·wp + jp (wp = ⌈w/2⌉), so a warp's
// 32 lanes cover 64 consecutive pixels of a row or of consecutive rows (the last
// pair of a row holds one pixel when w is odd). Its low window is rows i − 1 ..
// i + 1, columns j0 − 1 .. j0 + 2 for a 3×3 filter and for a 5×5 one alike; its
// high block rows 2i + py, columns 2j0 .. 2j0 + 3. With T taps an axis (2 for
// 3×3, 3 for 5×5; kFoldTaps) a parity has T² taps and a channel PT = 4·T²
// (parity, tap) pairs (kFoldPT: 16 or 36). The summed filters come packed,
// wc[c·PT·K + (T²·p + t)·K + k] = Wc_p[t][c][k] (upconv_thin_weights_kernel):
// PT·K/4 float4 per channel, read from shared memory at one address for a
// whole warp (a broadcast).
//   forward        block = 32 pairs; its 8 warps split C into contiguous ranges
//                  (staged in rounds of kThinFoldStage channels, half as many
//                  for 5×5); per channel 12 loads, PT·K/4 float4 reads, 2·PT·K
//                  FMAs; the 8 partial outputs are added in shared memory (a
//                  fixed tree), then + b, ReLU.
//   backward_data  block = 256 pairs × kThinFoldChannels channels (blockIdx.y):
//                  the high window of dy every parity and tap that read the pair
//                  touch (4×6 for 3×3, 6×8 for 5×5) in registers; per channel
//                  PT·K/4 float4 reads, 2·PT·K FMAs, the ReLU mask (copied
//                  kThinMaskStages − 1 channels ahead by cp.async), two stores.
//   weight grad    block = 8 channels (one a warp) × one slice of the units
//                  (a pair column of kThinFoldBand rows; blockIdx.y); a lane walks
//                  down its units' rows: per row 4 x and 2·K float4 dy loads,
//                  2·PT·K FMAs into PT·K sums; a shuffle tree at the end, one row
//                  of the slice's workspace. The blocks of channel block 0 also
//                  sum dy for the bias. upconv_thin_wgrad_reduce_kernel adds
//                  slices and parities into dw and db, in double.
// Every sum has a fixed order: the results repeat bit for bit.
constexpr int kThinFoldWarps = 8;
constexpr int kThinFoldThreads = kThinFoldWarps * 32;
constexpr int kThinFoldStage = 16;     // forward: channels per warp per staging round
constexpr int kThinFoldChannels = 32;  // backward_data: channels per block
constexpr int kThinFoldBand = 4;       // weight gradient: low rows a lane walks down
constexpr int kThinMaskStages = 8;     // backward_data: ReLU masks in flight, in channels
// The forward's staging round: a 5×5 fold's filters are 9/4 as large.
template <int R>
constexpr int kThinFoldStageOf = R == 3 ? kThinFoldStage : kThinFoldStage / 2;

// wc[c·PT·K + (T²·p + t)·K + k] = Wc_p[t][c][k], in double (filter rows, then
// columns, ascending), rounded once.
template <int R>
__global__ void __launch_bounds__(256)
    upconv_thin_weights_kernel(const float* __restrict__ w, int K, int C, float* __restrict__ wc) {
  constexpr int T = kFoldTaps<R>, TT = T * T;
  const int per = kFoldPT<R> * K, count = per * C;
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < count; o += gridDim.x * blockDim.x) {
    const int c = o / per, ptk = o - c * per, pt = ptk / K, k = ptk - pt * K;
    const int p = pt / TT, t = pt - p * TT, py = p >> 1, px = p & 1, ta = t / T, tb = t - ta * T;
    const float* src = w + ((size_t)k * C + c) * (R * R);
    double s = 0.0;
    for (int r = 0; r < R; ++r) {
      if (fold_tap_of<R>(py, r) != ta) continue;
      for (int q = 0; q < R; ++q)
        if (fold_tap_of<R>(px, q) == tb) s += (double)__ldg(src + r * R + q);
    }
    wc[o] = (float)s;
  }
}

// Component k of v; k is a constant after unrolling, so this folds away.
__device__ __forceinline__ float thin_comp(const float4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}
// Filter value pt·KC + k of a channel's PT·KC/4 float4.
template <int KC, int NW>
__device__ __forceinline__ float thin_w(const float4 (&wv)[NW], int pt, int k) {
  return thin_comp(wv[(pt * KC + k) >> 2], (pt * KC + k) & 3);
}

// Pair m's image, low row and first column; whether it holds a second pixel.
__device__ __forceinline__ void thin_pair(const UpArgs& a, int m, int& n, int& i, int& j0,
                                          bool& two) {
  int rest, jp;
  a.fwp.divmod(m, rest, jp);
  a.fh.divmod(rest, n, i);
  j0 = 2 * jp;
  two = j0 + 1 < a.w;
}

// v[r][q] = row_r[q] (row_r = &x_c[i − 1 + r][j0 − 1]), 0 outside the map: bit
// 4r + q of `inside` says whether it lies inside (a row pointer is formed but
// not read from when its row is outside).
__device__ __forceinline__ void thin_window(const float* const (&row)[3], unsigned inside,
                                            float (&v)[3][4]) {
#pragma unroll
  for (int r = 0; r < 3; ++r)
#pragma unroll
    for (int q = 0; q < 4; ++q) v[r][q] = (inside >> (4 * r + q)) & 1u ? __ldg(row[r] + q) : 0.f;
}

__device__ __forceinline__ unsigned thin_window_bits(const UpArgs& a, int i, int j0) {
  unsigned bits = 0;
#pragma unroll
  for (int r = 0; r < 3; ++r)
#pragma unroll
    for (int q = 0; q < 4; ++q)
      if ((unsigned)(i - 1 + r) < (unsigned)a.h && (unsigned)(j0 - 1 + q) < (unsigned)a.w)
        bits |= 1u << (4 * r + q);
  return bits;
}

template <int R, int KC>
union ThinFwdSmem {
  // each warp's staged filters
  float4 w[kThinFoldWarps][kThinFoldStageOf<R> * kFoldPT<R> / 4 * KC];
  float red[kThinFoldWarps / 2][KC * 8][32];  // the tree's upper half: [k·8 + py·4 + col][lane]
};

// Forward. acc[k][py][q] is output (k, 2i + py, 2j0 + q); `vec`: W % 4 == 0 and
// y 16-byte aligned (float4 stores).
template <int R, int KC>
__global__ void __launch_bounds__(kThinFoldThreads, 2)
    upconv_thin_fwd_kernel(const __grid_constant__ UpArgs a, const float* __restrict__ x,
                           const float4* __restrict__ wc, const float* __restrict__ bias, bool relu,
                           bool vec, float* __restrict__ y) {
  constexpr int T = kFoldTaps<R>, TT = T * T, PT = kFoldPT<R>, NW = PT / 4 * KC;
  constexpr int STAGE = kThinFoldStageOf<R>;
  __shared__ __align__(16) ThinFwdSmem<R, KC> sm;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int m = blockIdx.x * 32 + lane;
  const bool valid = m < a.Mp;
  int n, i, j0;
  bool two;
  thin_pair(a, valid ? m : 0, n, i, j0, two);
  const unsigned inside = valid ? thin_window_bits(a, i, j0) : 0u;
  const int cw = (a.C + kThinFoldWarps - 1) / kThinFoldWarps;
  const int cbeg = min(a.C, warp * cw), cend = min(a.C, cbeg + cw);
  // The window rows of the next channel to load, advanced a plane at a time.
  const float* row[3];
#pragma unroll
  for (int r = 0; r < 3; ++r)
    row[r] = x + ((size_t)n * a.C + cbeg) * a.hw + (ptrdiff_t)(i - 1 + r) * a.w + (j0 - 1);

  float acc[KC][2][4];
#pragma unroll
  for (int k = 0; k < KC; ++k)
#pragma unroll
    for (int py = 0; py < 2; ++py)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[k][py][q] = 0.f;

  float nxt[3][4];
  if (cbeg < cend) thin_window(row, inside, nxt);
  float4* sw = sm.w[warp];
  int cl = STAGE;  // channel c's staging slot; STAGE starts a round
  for (int c = cbeg; c < cend; ++c, ++cl) {
    if (cl == STAGE) {  // warp-uniform
      __syncwarp();  // the previous round's reads are done
      const int n4 = min(STAGE, cend - c) * NW;
      for (int e = lane; e < n4; e += 32) sw[e] = __ldg(wc + (size_t)c * NW + e);
      __syncwarp();
      cl = 0;
    }
    float v[3][4];
#pragma unroll
    for (int r = 0; r < 3; ++r)
#pragma unroll
      for (int q = 0; q < 4; ++q) v[r][q] = nxt[r][q];
    if (c + 1 < cend) {
#pragma unroll
      for (int r = 0; r < 3; ++r) row[r] += a.hw;
      thin_window(row, inside, nxt);
    }
    float4 wv[NW];
#pragma unroll
    for (int e = 0; e < NW; ++e) wv[e] = sw[cl * NW + e];
#pragma unroll
    for (int pt = 0; pt < PT; ++pt) {
      const int p = pt / TT, t = pt % TT, py = p >> 1, px = p & 1, ta = t / T, tb = t % T;
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const float xv = v[ta + fold_base<R>(py)][u + tb + fold_base<R>(px)];
#pragma unroll
        for (int k = 0; k < KC; ++k)
          acc[k][py][2 * u + px] = fmaf(xv, thin_w<KC>(wv, pt, k), acc[k][py][2 * u + px]);
      }
    }
  }

  // The 8 warps' partial outputs, added in a fixed tree: w += w + 4, w += w + 2, w += w + 1.
#pragma unroll
  for (int half = kThinFoldWarps / 2; half > 0; half >>= 1) {
    __syncthreads();  // staging (first level) or the last level's reads are done
    if (warp >= half && warp < 2 * half) {
#pragma unroll
      for (int k = 0; k < KC; ++k)
#pragma unroll
        for (int py = 0; py < 2; ++py)
#pragma unroll
          for (int q = 0; q < 4; ++q) sm.red[warp - half][k * 8 + py * 4 + q][lane] = acc[k][py][q];
    }
    __syncthreads();
    if (warp < half) {
#pragma unroll
      for (int k = 0; k < KC; ++k)
#pragma unroll
        for (int py = 0; py < 2; ++py)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[k][py][q] += sm.red[warp][k * 8 + py * 4 + q][lane];
    }
  }
  if (warp != 0 || !valid) return;
#pragma unroll
  for (int k = 0; k < KC; ++k) {
    const float bk = bias ? __ldg(bias + k) : 0.f;
#pragma unroll
    for (int py = 0; py < 2; ++py) {
      float o[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        o[q] = acc[k][py][q];
        if (bias) o[q] += bk;
        if (relu) o[q] = relu_of(o[q]);
      }
      float* dst = y + ((size_t)n * KC + k) * a.HW + (size_t)(2 * i + py) * a.W + 2 * j0;
      if (vec) {
        *reinterpret_cast<float4*>(dst) = make_float4(o[0], o[1], o[2], o[3]);
      } else {
        dst[0] = o[0];
        dst[1] = o[1];
        if (two) {
          dst[2] = o[2];
          dst[3] = o[3];
        }
      }
    }
  }
}

// Backward data: block (blockIdx.x, blockIdx.y) = 256 pairs × channels
// [blockIdx.y·kThinFoldChannels, …). dx_low(i, j) = Σ over parity p, tap t = (a,
// b), k of dy[k][2(i − a − fold_base(py)) + 2 + py][likewise for j] ·
// Wc_p[t][c][k], p, t, k ascending (for 3×3: rows 2i + 2 − 2a − py); d[r][q][k]
// = dy[k][2i + D0 + r][2j0 + D0 + q], D0 = −1 (3×3) or −2 (5×5). `vec`: w even
// and mask, dx 8-byte aligned (float2 accesses).
template <int R, int KC>
__global__ void __launch_bounds__(kThinFoldThreads)
    upconv_thin_dgrad_kernel(const __grid_constant__ UpArgs a, const float* __restrict__ dy,
                             const float4* __restrict__ wc, const float* __restrict__ mask,
                             bool vec, float* __restrict__ dx) {
  constexpr int T = kFoldTaps<R>, TT = T * T, PT = kFoldPT<R>, NW = PT / 4 * KC;
  constexpr int D0 = R == 3 ? -1 : -2, DR = 2 * T, DC = DR + 2;
  __shared__ float4 sw[kThinFoldChannels * NW];
  __shared__ float2 mring[kThinMaskStages][kThinFoldThreads];
  const int c0 = blockIdx.y * kThinFoldChannels, nc = min(kThinFoldChannels, a.C - c0);
  for (int e = threadIdx.x; e < nc * NW; e += kThinFoldThreads)
    sw[e] = __ldg(wc + (size_t)c0 * NW + e);
  __syncthreads();
  const int m = blockIdx.x * kThinFoldThreads + threadIdx.x;
  if (m >= a.Mp) return;
  int n, i, j0;
  bool two;
  thin_pair(a, m, n, i, j0, two);
  const size_t base = ((size_t)n * a.C + c0) * a.hw + (size_t)i * a.w + j0;
  // The masks of channels c + 1 .. c + kThinMaskStages − 1 are in flight (cp.async)
  // while channel c computes; each thread reads back only what it copied.
  auto fetch_mask = [&](int c) {
    if (mask && c < nc) {
      const float* src = mask + base + (size_t)c * a.hw;
      float* dst = &mring[c % kThinMaskStages][threadIdx.x].x;
      if (vec) {
        copy8(dst, src, true);
      } else {
        copy4(dst, src, true);
        copy4(dst + 1, two ? src + 1 : src, two);
      }
    }
    copy_commit();  // possibly empty: one group per channel keeps the count
  };
#pragma unroll
  for (int c = 0; c < kThinMaskStages - 1; ++c) fetch_mask(c);
  float d[DR][DC][KC];
#pragma unroll
  for (int r = 0; r < DR; ++r) {
    const int yy = 2 * i + D0 + r;
#pragma unroll
    for (int q = 0; q < DC; ++q) {
      const int xx = 2 * j0 + D0 + q;
      const bool ok = (unsigned)yy < (unsigned)a.H && (unsigned)xx < (unsigned)a.W;
#pragma unroll
      for (int k = 0; k < KC; ++k)
        d[r][q][k] = ok ? __ldg(dy + ((size_t)n * KC + k) * a.HW + yy * a.W + xx) : 0.f;
    }
  }
  for (int c = 0; c < nc; ++c) {
    copy_wait<kThinMaskStages - 2>();  // channel c's mask has landed
    float4 wv[NW];
#pragma unroll
    for (int e = 0; e < NW; ++e) wv[e] = sw[c * NW + e];
    float s[2] = {0.f, 0.f};
#pragma unroll
    for (int pt = 0; pt < PT; ++pt) {
      const int p = pt / TT, t = pt % TT, py = p >> 1, px = p & 1, ta = t / T, tb = t % T;
      const int dr = 2 - 2 * ta - 2 * fold_base<R>(py) + py - D0;
      const int dc = 2 - 2 * tb - 2 * fold_base<R>(px) + px - D0;
#pragma unroll
      for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int k = 0; k < KC; ++k)
          s[u] = fmaf(d[dr][2 * u + dc][k], thin_w<KC>(wv, pt, k), s[u]);
    }
    if (mask) {
      const float2 mk = mring[c % kThinMaskStages][threadIdx.x];
      s[0] = ConvOut::masked(s[0], mk.x);
      s[1] = ConvOut::masked(s[1], mk.y);
    }
    const size_t at = base + (size_t)c * a.hw;
    if (vec) {
      *reinterpret_cast<float2*>(dx + at) = make_float2(s[0], s[1]);
    } else {
      dx[at] = s[0];
      if (two) dx[at + 1] = s[1];
    }
    // The slot of channel c is refilled only after its value was used above.
    fetch_mask(c + kThinMaskStages - 1);
  }
}

// Weight gradient: warp w of block bx = channel 8·bx + w; slice z = blockIdx.y
// covers units [z·per, min((z+1)·per, Mu)), lane l its units l, l + 32, …. A
// unit is one pair column jp of kThinFoldBand rows of one image, numbered
// u = (n·bands + band)·wp + jp; the lane walks down its rows, so each row reads
// one new row of the x window (4 values) and its two rows of dy.
// ws[z·stride + (c·PT + T²·p + t)·KC + k] = Σ x(tap t of parity p)·dy(p, k) over
// the slice; ws[z·stride + PT·C·KC + w·KC + k] = warp w's share of Σ dy[k] (the
// blocks of channel block 0, warps w < min(8, C): unit r of a lane counts in
// warp r mod min(8, C)). stride = (PT·C + 8)·KC. `vec`: W % 4 == 0 and dy
// 16-byte aligned (float4 loads).
template <int R, int KC>
__global__ void __launch_bounds__(kThinFoldThreads, R == 3 && KC < 4 ? 2 : 1)  // else spills at 2
    upconv_thin_wgrad_kernel(const __grid_constant__ UpArgs a, const float* __restrict__ x,
                             const float* __restrict__ dy, int per, bool vec,
                             float* __restrict__ ws) {
  constexpr int T = kFoldTaps<R>, TT = T * T, PT = kFoldPT<R>;
  constexpr int RB = kThinFoldBand;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int c = blockIdx.x * kThinFoldWarps + warp;
  if (c >= a.C) return;  // warp-uniform; no block-wide synchronization below
  const bool bias = blockIdx.x == 0;
  const int nb = min(kThinFoldWarps, a.C);  // warps sharing the bias sums
  const int u0 = blockIdx.y * per, u1 = min(u0 + per, a.Mu);
  float acc[PT][KC], accb[KC];
#pragma unroll
  for (int k = 0; k < KC; ++k) {
    accb[k] = 0.f;
#pragma unroll
    for (int pt = 0; pt < PT; ++pt) acc[pt][k] = 0.f;
  }
  int turn = 0;
  for (int u = u0 + lane; u < u1; u += 32) {
    int rest, jp, n, band;
    a.fwp.divmod(u, rest, jp);
    a.fbands.divmod(rest, n, band);
    const int j0 = 2 * jp, i0 = band * RB;
    const bool two = j0 + 1 < a.w;
    unsigned cols = 0;  // bit q: column j0 − 1 + q lies inside
#pragma unroll
    for (int q = 0; q < 4; ++q) cols |= (unsigned)(j0 - 1 + q) < (unsigned)a.w ? 1u << q : 0u;
    const float* xc = x + ((size_t)n * a.C + c) * a.hw;
    float v[RB + 2][4];  // x rows i0 − 1 .. i0 + RB, columns j0 − 1 .. j0 + 2
#pragma unroll
    for (int r = 0; r < RB + 2; ++r) {
      const int row = i0 - 1 + r;
      const bool rok = (unsigned)row < (unsigned)a.h;
#pragma unroll
      for (int q = 0; q < 4; ++q)
        v[r][q] = rok && ((cols >> q) & 1u) ? __ldg(xc + (row * a.w + j0 - 1) + q) : 0.f;
    }
    const bool share = bias && turn == warp;
    if (bias && ++turn == nb) turn = 0;
#pragma unroll
    for (int r = 0; r < RB; ++r) {
      const int i = i0 + r;
      if (i >= a.h) break;
      float g[2][4][KC];  // dy[k][2i + py][2j0 + q]
#pragma unroll
      for (int py = 0; py < 2; ++py)
#pragma unroll
        for (int k = 0; k < KC; ++k) {
          const float* src = dy + ((size_t)n * KC + k) * a.HW + (size_t)(2 * i + py) * a.W + 2 * j0;
          if (vec) {
            const float4 t = __ldg(reinterpret_cast<const float4*>(src));
            g[py][0][k] = t.x, g[py][1][k] = t.y, g[py][2][k] = t.z, g[py][3][k] = t.w;
          } else {
            g[py][0][k] = __ldg(src);
            g[py][1][k] = __ldg(src + 1);
            g[py][2][k] = two ? __ldg(src + 2) : 0.f;
            g[py][3][k] = two ? __ldg(src + 3) : 0.f;
          }
        }
      if (share) {
#pragma unroll
        for (int k = 0; k < KC; ++k)
#pragma unroll
          for (int py = 0; py < 2; ++py)
#pragma unroll
            for (int q = 0; q < 4; ++q) accb[k] += g[py][q][k];
      }
#pragma unroll
      for (int pt = 0; pt < PT; ++pt) {
        const int p = pt / TT, t = pt % TT, py = p >> 1, px = p & 1, ta = t / T, tb = t % T;
        const int vr = r + ta + fold_base<R>(py), vc = tb + fold_base<R>(px);
#pragma unroll
        for (int uu = 0; uu < 2; ++uu)
#pragma unroll
          for (int k = 0; k < KC; ++k)
            acc[pt][k] = fmaf(v[vr][uu + vc], g[py][2 * uu + px][k], acc[pt][k]);
      }
    }
  }
  // A fixed butterfly over the lanes: every lane ends with the same sums.
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
    for (int pt = 0; pt < PT; ++pt)
#pragma unroll
      for (int k = 0; k < KC; ++k) acc[pt][k] += __shfl_xor_sync(0xffffffffu, acc[pt][k], off);
    if (bias) {
#pragma unroll
      for (int k = 0; k < KC; ++k) accb[k] += __shfl_xor_sync(0xffffffffu, accb[k], off);
    }
  }
  float* o = ws + (size_t)blockIdx.y * (PT * a.C + kThinFoldWarps) * KC;
#pragma unroll
  for (int pt = 0; pt < PT; ++pt)
    if ((pt & 31) == lane)
#pragma unroll
      for (int k = 0; k < KC; ++k) o[((size_t)c * PT + pt) * KC + k] = acc[pt][k];
  if (bias && lane == 0)
#pragma unroll
    for (int k = 0; k < KC; ++k) o[((size_t)PT * a.C + warp) * KC + k] = accb[k];
}

// dw[k][c][r][s] += Σ_p Σ_z ws[z·stride + (c·PT + T²·p + t)·K + k], t the tap
// of parity p that (r, s) lands in; db[k] += Σ_z Σ_{w < min(8, C)} ws[z·stride +
// (PT·C + w)·K + k]; p, z, w ascending, in double. One thread per element of dw
// (then of db), in blocks of kThinReduceThreads (few elements: small blocks
// spread them over more SMs).
constexpr int kThinReduceThreads = 64;

template <int R>
__global__ void __launch_bounds__(kThinReduceThreads)
    upconv_thin_wgrad_reduce_kernel(const float* __restrict__ ws, int slices, int K, int C,
                                    float* __restrict__ dw, float* __restrict__ db) {
  constexpr int T = kFoldTaps<R>, TT = T * T, PT = kFoldPT<R>, RR = R * R;
  const long long stride = ((long long)PT * C + kThinFoldWarps) * K, nw = (long long)RR * K * C;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nw + K;
       i += (long long)gridDim.x * blockDim.x) {
    double s = 0.0;
    if (i < nw) {
      const int rs = int(i % RR), r = rs / R, q = rs - R * r;
      const long long kc = i / RR;
      const int c = int(kc % C), k = int(kc / C);
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const int t = T * fold_tap_of<R>(p >> 1, r) + fold_tap_of<R>(p & 1, q);
        const float* src = ws + ((long long)c * PT + p * TT + t) * K + k;
#pragma unroll 8
        for (int z = 0; z < slices; ++z) s += (double)src[z * stride];
      }
      dw[i] = (float)((double)dw[i] + s);
    } else if (db) {
      const int k = int(i - nw), nb = min(kThinFoldWarps, C);
      for (int z = 0; z < slices; ++z)
        for (int w = 0; w < nb; ++w) s += (double)ws[z * stride + ((long long)PT * C + w) * K + k];
      db[k] = (float)((double)db[k] + s);
    }
  }
}

}  // namespace hpmc::gpu::implicit_detail
