// implicit_conv_kernels.cuh — the kernels of the implicit-GEMM family: the
// conv loaders (im2col gathers decoded on the fly), the conv output epilogue,
// and the __global__ functions for forward, backward_data, backward_params
// (split-K slices, split-K reduction, bias gradient) and the plain GEMM. The
// mappings, tiles and split-K scheme are described at the top of
// conv2d_implicit_gemm.cu, which holds the host side and is the only includer.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "layers/conv_shape.h"
#include "layers/gpu/implicit_fastdiv.h"
#include "layers/gpu/implicit_gemm_core.cuh"

namespace hpmc::gpu::implicit_detail {

using CfgL = TileCfg<128, 128, 8, 8, 2>;
using CfgS = TileCfg<64, 64, 4, 4, 2>;
using CfgThinN = TileCfg<128, 16, 4, 4, 4>;
using CfgThinM = TileCfg<16, 128, 4, 4, 4>;

// Everything the conv loaders need, by value in the kernel's parameter space.
struct ConvArgs {
  int N, C, H, W, K, R, S, stride, pad, P, Q;
  int RS, HW, PQ, CRS, KRS, CHW, KPQ;
  long long NPQ, NHW;  // GEMM extents; the host checks they fit an int
  FastDiv fRS, fS, fHW, fW, fPQ, fQ, fStride;
};

inline ConvArgs make_args(const Conv2dShape& s) {
  ConvArgs a{};
  a.N = s.N, a.C = s.C, a.H = s.H, a.W = s.W, a.K = s.K, a.R = s.R, a.S = s.S;
  a.stride = s.stride, a.pad = s.pad, a.P = s.P, a.Q = s.Q;
  a.RS = s.R * s.S;
  a.HW = s.H * s.W;
  a.PQ = s.P * s.Q;
  a.CRS = s.C * a.RS;
  a.KRS = s.K * a.RS;
  a.CHW = s.C * a.HW;
  a.KPQ = s.K * a.PQ;
  a.NPQ = (long long)s.N * a.PQ;
  a.NHW = (long long)s.N * a.HW;
  a.fRS = FastDiv(a.RS);
  a.fS = FastDiv(s.S);
  a.fHW = FastDiv(a.HW);
  a.fW = FastDiv(s.W);
  a.fPQ = FastDiv(a.PQ);
  a.fQ = FastDiv(s.Q);
  a.fStride = FastDiv(s.stride);
  return a;
}

// ---- conv loaders ------------------------------------------------------------------

// forward A (RowFast over m = (n,p,q)): the im2col gather of x. The row is fixed
// per thread, so (n, p, q) is decoded once; each element decodes its k = (c,r,s).
template <int ROWS, int NT>
struct FwdALoader {
  using Map = RowFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const ConvArgs& a;
  const float* xb;  // this row's image (x itself for an invalid row; never read)
  int h0, w0, tid;
  bool mvalid;
  float v[ELEMS];

  __device__ __forceinline__ FwdALoader(const ConvArgs& a_, const float* x, int m0, int tid_)
      : a(a_), tid(tid_) {
    const int m = m0 + Map::row(tid);
    mvalid = m < a.NPQ;
    int img, pq, p, q;
    a.fPQ.divmod(mvalid ? m : 0, img, pq);
    a.fQ.divmod(pq, p, q);
    h0 = p * a.stride - a.pad;
    w0 = q * a.stride - a.pad;
    xb = x + (size_t)img * a.CHW;
  }
  __device__ __forceinline__ void load(int k0) {
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int k = k0 + Map::kk(tid, e);
      int c, rs, r, s;
      a.fRS.divmod(k, c, rs);
      a.fS.divmod(rs, r, s);
      const int h = h0 + r, w = w0 + s;
      const bool ok = mvalid && k < a.CRS && (unsigned)h < (unsigned)a.H &&
                      (unsigned)w < (unsigned)a.W;
      float t = 0.f;
      if (ok) t = __ldg(xb + c * a.HW + h * a.W + w);
      v[e] = t;
    }
  }
  __device__ __forceinline__ void store(float (*s)[ROWS + kPad]) { Map::store(s, tid, v); }
};

// backward_data A (RowFast over m = (n,h,w)): the gather of dy. Tap (r,s) of
// output (p,q) saw pixel (h,w) iff p·st = h+pad−r and q·st = w+pad−s.
template <int ROWS, int NT>
struct DgradALoader {
  using Map = RowFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const ConvArgs& a;
  const float* dyb;
  int hp, wp, tid;  // h + pad, w + pad
  bool mvalid;
  float v[ELEMS];

  __device__ __forceinline__ DgradALoader(const ConvArgs& a_, const float* dy, int m0, int tid_)
      : a(a_), tid(tid_) {
    const int m = m0 + Map::row(tid);
    mvalid = m < a.NHW;
    int img, hw, h, w;
    a.fHW.divmod(mvalid ? m : 0, img, hw);
    a.fW.divmod(hw, h, w);
    hp = h + a.pad;
    wp = w + a.pad;
    dyb = dy + (size_t)img * a.KPQ;
  }
  __device__ __forceinline__ void load(int k0) {
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int k = k0 + Map::kk(tid, e);
      int ko, rs, r, s;
      a.fRS.divmod(k, ko, rs);
      a.fS.divmod(rs, r, s);
      const int ph = hp - r, qw = wp - s;
      bool ok = mvalid && k < a.KRS && ph >= 0 && qw >= 0;
      int p, pr, q, qr;
      a.fStride.divmod(ok ? ph : 0, p, pr);  // dividends clamped to ≥ 0
      a.fStride.divmod(ok ? qw : 0, q, qr);
      ok = ok && pr == 0 && qr == 0 && p < a.P && q < a.Q;
      float t = 0.f;
      if (ok) t = __ldg(dyb + ko * a.PQ + p * a.Q + q);
      v[e] = t;
    }
  }
  __device__ __forceinline__ void store(float (*s)[ROWS + kPad]) { Map::store(s, tid, v); }
};

// backward_data B (KFast; rows = c, k = (ko, r, s)): w[ko][c][r][s]. One k per
// thread and tile, decoded once; the rows differ by c·RS.
template <int ROWS, int NT>
struct DgradBLoader {
  using Map = KFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const ConvArgs& a;
  const float* w;
  int n0, tid;
  float v[ELEMS];

  __device__ __forceinline__ DgradBLoader(const ConvArgs& a_, const float* w_, int n0_, int tid_)
      : a(a_), w(w_), n0(n0_), tid(tid_) {}
  __device__ __forceinline__ void load(int k0) {
    const int k = k0 + Map::kk(tid);
    const bool kvalid = k < a.KRS;
    int ko, rs;
    a.fRS.divmod(k, ko, rs);
    const int base = ko * a.CRS + rs;
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int c = n0 + Map::row(tid, e);
      float t = 0.f;
      if (kvalid && c < a.C) t = __ldg(w + base + c * a.RS);
      v[e] = t;
    }
  }
  __device__ __forceinline__ void store(float (*s)[ROWS + kPad]) { Map::store(s, tid, v); }
};

// backward_params A (KFast; rows = ko, k = (n, p, q)): dy[n][ko][p][q].
template <int ROWS, int NT>
struct WgradALoader {
  using Map = KFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const ConvArgs& a;
  const float* dy;
  int m0, tid;
  float v[ELEMS];

  __device__ __forceinline__ WgradALoader(const ConvArgs& a_, const float* dy_, int m0_, int tid_)
      : a(a_), dy(dy_), m0(m0_), tid(tid_) {}
  __device__ __forceinline__ void load(int k0) {
    const int k = k0 + Map::kk(tid);
    const bool kvalid = k < a.NPQ;
    int img, pq;
    a.fPQ.divmod(kvalid ? k : 0, img, pq);
    const float* base = dy + (size_t)img * a.KPQ + pq;
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int ko = m0 + Map::row(tid, e);
      float t = 0.f;
      if (kvalid && ko < a.K) t = __ldg(base + ko * a.PQ);
      v[e] = t;
    }
  }
  __device__ __forceinline__ void store(float (*s)[ROWS + kPad]) { Map::store(s, tid, v); }
};

// backward_params B (KFast; rows = (c,r,s), k = (n,p,q)): the im2col gather of x,
// transposed. The rows' (c,r,s) are decoded once per block; each tile decodes
// its one k per thread.
template <int ROWS, int NT>
struct WgradBLoader {
  using Map = KFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  static_assert(ELEMS <= 32, "row-valid bits fit an unsigned");
  const ConvArgs& a;
  const float* x;
  int tid;
  unsigned nvalid;   // bit e: row e is < C·R·S
  int roff[ELEMS];   // c·H·W + r·W + s
  int rr[ELEMS], ss[ELEMS];
  float v[ELEMS];

  __device__ __forceinline__ WgradBLoader(const ConvArgs& a_, const float* x_, int n0, int tid_)
      : a(a_), x(x_), tid(tid_), nvalid(0) {
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int n = n0 + Map::row(tid, e);
      const bool ok = n < a.CRS;
      if (ok) nvalid |= 1u << e;
      int c, rs, r, s;
      a.fRS.divmod(ok ? n : 0, c, rs);
      a.fS.divmod(rs, r, s);
      rr[e] = r;
      ss[e] = s;
      roff[e] = c * a.HW + r * a.W + s;
    }
  }
  __device__ __forceinline__ void load(int k0) {
    const int k = k0 + Map::kk(tid);
    const bool kvalid = k < a.NPQ;
    int img, pq, p, q;
    a.fPQ.divmod(kvalid ? k : 0, img, pq);
    a.fQ.divmod(pq, p, q);
    const int hb = p * a.stride - a.pad, wb = q * a.stride - a.pad;
    const float* xb = x + (size_t)img * a.CHW;
    const int boff = hb * a.W + wb;  // may be negative; only used when h, w are in range
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int h = hb + rr[e], w = wb + ss[e];
      const bool ok = kvalid && ((nvalid >> e) & 1u) && (unsigned)h < (unsigned)a.H &&
                      (unsigned)w < (unsigned)a.W;
      float t = 0.f;
      if (ok) t = __ldg(xb + (roff[e] + boff));  // = c·HW + h·W + w ≥ 0
      v[e] = t;
    }
  }
  __device__ __forceinline__ void store(float (*s)[ROWS + kPad]) { Map::store(s, tid, v); }
};

// ---- conv output epilogue: out[n][ch][pix], m = n·plane + pix, column = ch -------------
struct ConvOut {
  static constexpr bool kAlongM = true;
  float* out;
  const float* bias;  // may be null
  int M, Nch, plane;
  FastDiv fplane;
  bool vec;  // plane % 4 == 0 and out 16-byte aligned

  // Rows m..m+3 (m a multiple of 4) of column n.
  __device__ __forceinline__ void store_mcol(int m, int n, const float (&v)[4]) const {
    if (m >= M || n >= Nch) return;
    const float b = bias ? __ldg(bias + n) : 0.f;
    if (vec) {  // plane % 4 == 0: m..m+3 lie in one image, aligned, and below M
      int img, pix;
      fplane.divmod(m, img, pix);
      *reinterpret_cast<float4*>(out + ((size_t)img * Nch + n) * plane + pix) =
          make_float4(v[0] + b, v[1] + b, v[2] + b, v[3] + b);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (m + i >= M) break;
        int img, pix;
        fplane.divmod(m + i, img, pix);
        out[((size_t)img * Nch + n) * plane + pix] = v[i] + b;
      }
    }
  }
};

// ---- kernels ---------------------------------------------------------------------------

inline __host__ __device__ int ktiles_of(long long kdim) { return int((kdim + kBK - 1) / kBK); }

template <class Cfg>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    conv_fwd_kernel(const __grid_constant__ ConvArgs a, const float* __restrict__ x,
                    const float* __restrict__ w, const __grid_constant__ ConvOut epi) {
  __shared__ __align__(16) Smem<Cfg> sm;
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  int tm, tn;
  thread_coords<Cfg, ConvOut::kAlongM>(tid, tm, tn);
  FwdALoader<Cfg::BM, Cfg::NT> al(a, x, m0, tid);
  MatLoader<Cfg::BN, Cfg::NT, false> bl(w, a.K, a.CRS, a.CRS, 1, n0, tid);  // w[ko·CRS + k]
  float acc[Cfg::TM][Cfg::TN];
  mainloop<Cfg, kBK>(al, bl, sm, 0, ktiles_of(a.CRS), tm, tn, acc);
  epilogue<Cfg>(epi, acc, m0, n0, tm, tn);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    conv_dgrad_kernel(const __grid_constant__ ConvArgs a, const float* __restrict__ dy,
                      const float* __restrict__ w, const __grid_constant__ ConvOut epi) {
  __shared__ __align__(16) Smem<Cfg> sm;
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  int tm, tn;
  thread_coords<Cfg, ConvOut::kAlongM>(tid, tm, tn);
  DgradALoader<Cfg::BM, Cfg::NT> al(a, dy, m0, tid);
  DgradBLoader<Cfg::BN, Cfg::NT> bl(a, w, n0, tid);
  float acc[Cfg::TM][Cfg::TN];
  mainloop<Cfg, kBK>(al, bl, sm, 0, ktiles_of(a.KRS), tm, tn, acc);
  epilogue<Cfg>(epi, acc, m0, n0, tm, tn);
}

// Slice blockIdx.z covers k-tiles [z·tps, min((z+1)·tps, ktiles)).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    conv_wgrad_kernel(const __grid_constant__ ConvArgs a, const float* __restrict__ x,
                      const float* __restrict__ dy, int tps, const __grid_constant__ MatOut epi) {
  __shared__ __align__(16) Smem<Cfg> sm;
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  int tm, tn;
  thread_coords<Cfg, MatOut::kAlongM>(tid, tm, tn);
  WgradALoader<Cfg::BM, Cfg::NT> al(a, dy, m0, tid);
  WgradBLoader<Cfg::BN, Cfg::NT> bl(a, x, n0, tid);
  const int ktiles = ktiles_of(a.NPQ);
  const int kt0 = min((int)blockIdx.z * tps, ktiles), kt1 = min(kt0 + tps, ktiles);
  float acc[Cfg::TM][Cfg::TN];
  mainloop<Cfg, Cfg::KU_HEAVY>(al, bl, sm, kt0, kt1, tm, tn, acc);
  epilogue<Cfg>(epi, acc, m0, n0, tm, tn);
}

// op(A)(m,k) = TA ? a[k·lda + m] : a[m·lda + k];
// op(B)(k,n) = TB ? b[n·ldb + k] : b[k·ldb + n].
template <class Cfg, bool TA, bool TB>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    gemm_kernel(int M, int N, int K, const float* __restrict__ A, int lda,
                const float* __restrict__ B, int ldb, const __grid_constant__ MatOut epi) {
  __shared__ __align__(16) Smem<Cfg> sm;
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  int tm, tn;
  thread_coords<Cfg, MatOut::kAlongM>(tid, tm, tn);
  MatLoader<Cfg::BM, Cfg::NT, TA> al(A, M, K, TA ? 1 : lda, TA ? lda : 1, m0, tid);
  MatLoader<Cfg::BN, Cfg::NT, !TB> bl(B, N, K, TB ? ldb : 1, TB ? 1 : ldb, n0, tid);
  float acc[Cfg::TM][Cfg::TN];
  mainloop<Cfg, Cfg::KU_HEAVY>(al, bl, sm, 0, ktiles_of(K), tm, tn, acc);
  epilogue<Cfg>(epi, acc, m0, n0, tm, tn);
}

// dw[i] = dw[i] + Σ_{z=0..splits−1} ws[z·count + i], z ascending, in double.
__global__ void __launch_bounds__(256)
    splitk_reduce_kernel(const float* __restrict__ ws, int splits, long long count,
                         float* __restrict__ dw) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    double s = 0.0;
    for (int z = 0; z < splits; ++z) s += (double)ws[(long long)z * count + i];
    dw[i] = (float)((double)dw[i] + s);
  }
}

// db[ko] += Σ_{n,p,q} dy[n][ko][p][q]: block ko; thread t sums the flat indices
// j ≡ t (mod 256) of the N·PQ values in ascending order (double), then a fixed
// pairwise tree over the 256 partials.
constexpr int kBiasThreads = 256;
__global__ void __launch_bounds__(kBiasThreads)
    bias_grad_kernel(const __grid_constant__ ConvArgs a, const float* __restrict__ dy,
                     float* __restrict__ db) {
  __shared__ double red[kBiasThreads];
  const int ko = blockIdx.x;
  double s = 0.0;
  for (long long j = threadIdx.x; j < a.NPQ; j += kBiasThreads) {
    int img, pq;
    a.fPQ.divmod((int)j, img, pq);
    s += (double)__ldg(dy + ((size_t)img * a.K + ko) * a.PQ + pq);
  }
  red[threadIdx.x] = s;
  __syncthreads();
#pragma unroll
  for (int half = kBiasThreads / 2; half > 0; half >>= 1) {
    if ((int)threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[ko] = (float)((double)db[ko] + red[0]);
}

}  // namespace hpmc::gpu::implicit_detail
