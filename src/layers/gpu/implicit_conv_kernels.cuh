// implicit_conv_kernels.cuh — the kernels of the implicit-GEMM family: the
// conv loaders (im2col gathers decoded on the fly), the conv output epilogues,
// and the __global__ functions for forward, backward_data, backward_params
// (split-K slices, split-K reductions, bias gradient), the weight re-layout of
// the tap-major paths and the plain GEMM. Every GEMM kernel runs on the engine
// of its tile configuration (run_tile: implicit_gemm_core.cuh or, for the wide
// configurations, implicit_gemm_wide.cuh with dynamic shared memory; for
// training.precision tf32 and bf16 the tensor-core configurations below,
// implicit_gemm_tc.cuh). The
// mappings, tiles and split-K scheme are described at the top of
// conv2d_implicit_gemm.cu, which holds the host side and is the only includer.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "layers/conv_shape.h"
#include "layers/epilogue_act.h"
#include "layers/gpu/epilogue_act.cuh"
#include "layers/gpu/implicit_fastdiv.h"
#include "layers/gpu/implicit_gemm_core.cuh"
#include "layers/gpu/implicit_gemm_tc.cuh"
#include "layers/gpu/implicit_gemm_wide.cuh"

namespace hpmc::gpu::implicit_detail {

// BM, BN, TM, TN, blocks per SM, stages (implicit_plan.h's Tile names them).
using CfgL = TileCfg<128, 128, 8, 8, 2, 4>;
using CfgM = TileCfg<128, 64, 8, 4, 2, 4>;
using CfgS = TileCfg<64, 64, 4, 4, 2, 4>;
using CfgThinN = TileCfg<128, 16, 4, 4, 4, 4>;
using CfgThinM = TileCfg<16, 128, 4, 4, 4, 4>;
// The wide engine (implicit_gemm_wide.cuh): BM, BN, warps along m and n, blocks
// per SM, stages, kk per unrolled body. 64×64 warp tiles (8×16 / 16×8 per
// thread, the k-tile unrolled in halves) except WL's 64×32 (8×8 / 16×4, the
// whole k-tile unrolled), which is L's tile and thread count on the wide engine.
using CfgWN = WideCfg<128, 256, 2, 4, 1, 4, 4>;
using CfgWM = WideCfg<256, 128, 4, 2, 1, 4, 4>;
using CfgWQ = WideCfg<128, 128, 2, 2, 2, 4, 4>;
using CfgWL = WideCfg<128, 128, 2, 4, 2, 4, 8>;

// The tensor-core stand-in of each configuration (implicit_gemm_tc.cuh), in
// operands Op: the same BM, BN and thread count, so that the plans and the
// loaders are those of the FP32 configuration. TcCfg: BM, BN, warps along m
// and n, blocks per SM, stages, operands; warp sub-tiles in the comments.
template <class Cfg, class Op>
struct TcOf;
#define HPMC_TC_OF(CFG, ...)            \
  template <class Op>                   \
  struct TcOf<CFG, Op> {                \
    using type = TcCfg<__VA_ARGS__, Op>; \
  };
// 5 stages: k-tiles in pairs with one pair in flight behind the pair being
// multiplied (TcCfg::kPairs); the 128×256 tiles fit 3 stages in 48 KB of
// static shared memory and take the k-tiles one by one.
HPMC_TC_OF(CfgL, 128, 128, 2, 2, 2, 5)     // 64×64
HPMC_TC_OF(CfgWL, 128, 128, 2, 2, 2, 5)    // 64×64
HPMC_TC_OF(CfgM, 128, 64, 4, 2, 2, 5)      // 32×32
HPMC_TC_OF(CfgS, 64, 64, 2, 4, 2, 5)       // 32×16
HPMC_TC_OF(CfgThinN, 128, 16, 4, 1, 4, 5)  // 32×16
HPMC_TC_OF(CfgThinM, 16, 128, 1, 4, 4, 5)  // 16×32
HPMC_TC_OF(CfgWN, 128, 256, 2, 4, 1, 3)    // 64×64
HPMC_TC_OF(CfgWM, 256, 128, 4, 2, 1, 3)    // 64×64
HPMC_TC_OF(CfgWQ, 128, 128, 2, 2, 2, 5)    // 64×64
#undef HPMC_TC_OF

// The configuration a launch with the channel-major mapping runs instead of
// Cfg (the forward and backward_data gathers FwdALoader and DgradALoader:
// two divisions per element): the 128×128 tensor-core tile with 8 warps of
// 64×32 rather than 4 of 64×64, twice the threads for the same gathers (the
// CIFAR conv1 forward, K = 27, takes 0.059 instead of 0.081 ms; H200, bf16).
// The tap-major loaders step without divisions and prefer the larger warp
// tiles (conv2 forward 0.101 → 0.091 ms). Same BM and BN: the plan holds.
template <class Cfg>
struct GatherOf {
  using type = Cfg;
};
template <class Op>
struct GatherOf<TcCfg<128, 128, 2, 2, 2, 5, Op>> {
  using type = TcCfg<128, 128, 2, 4, 2, 5, Op>;
};

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

// ---- conv loaders, channel-major GEMM_K (k = c·RS + r·S + s): any shape -------------------

// forward A (RowFast over m = (n,p,q)): the im2col gather of x. The row is fixed
// per thread, so (n, p, q) is decoded once; each element decodes its k = (c,r,s).
template <int ROWS, int NT>
struct FwdALoader {
  using Map = RowFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const ConvArgs& a;
  const float* xb;  // this row's image (x itself for an invalid row; never read)
  int h0, w0, tid, k0 = 0;
  bool mvalid;

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
  __device__ __forceinline__ void start(int kt) { k0 = kt * kBK; }
  __device__ __forceinline__ void issue(float (*s)[ROWS + kPad]) {
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int k = k0 + Map::kk(tid, e);
      int c, rs, r, s_;
      a.fRS.divmod(k, c, rs);
      a.fS.divmod(rs, r, s_);
      const int h = h0 + r, w = w0 + s_;
      const bool ok = mvalid && k < a.CRS && (unsigned)h < (unsigned)a.H &&
                      (unsigned)w < (unsigned)a.W;
      copy4(&s[Map::kk(tid, e)][Map::row(tid)], ok ? xb + (c * a.HW + h * a.W + w) : xb, ok);
    }
    k0 += kBK;
  }
};

// backward_data A (RowFast over m = (n,h,w)): the gather of dy. Tap (r,s) of
// output (p,q) saw pixel (h,w) iff p·st = h+pad−r and q·st = w+pad−s.
template <int ROWS, int NT>
struct DgradALoader {
  using Map = RowFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const ConvArgs& a;
  const float* dyb;
  int hp, wp, tid, k0 = 0;  // h + pad, w + pad
  bool mvalid;

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
  __device__ __forceinline__ void start(int kt) { k0 = kt * kBK; }
  __device__ __forceinline__ void issue(float (*s)[ROWS + kPad]) {
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int k = k0 + Map::kk(tid, e);
      int ko, rs, r, s_;
      a.fRS.divmod(k, ko, rs);
      a.fS.divmod(rs, r, s_);
      const int ph = hp - r, qw = wp - s_;
      bool ok = mvalid && k < a.KRS && ph >= 0 && qw >= 0;
      int p, pr, q, qr;
      a.fStride.divmod(ok ? ph : 0, p, pr);  // dividends clamped to ≥ 0
      a.fStride.divmod(ok ? qw : 0, q, qr);
      ok = ok && pr == 0 && qr == 0 && p < a.P && q < a.Q;
      copy4(&s[Map::kk(tid, e)][Map::row(tid)], ok ? dyb + (ko * a.PQ + p * a.Q + q) : dyb, ok);
    }
    k0 += kBK;
  }
};

// backward_data B (KFast; rows = c, k = (ko, r, s)): w[ko][c][r][s]. One k per
// thread and tile, decoded once; the rows differ by c·RS.
template <int ROWS, int NT>
struct DgradBLoader {
  using Map = KFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const ConvArgs& a;
  const float* w;
  int n0, tid, k0 = 0;

  __device__ __forceinline__ DgradBLoader(const ConvArgs& a_, const float* w_, int n0_, int tid_)
      : a(a_), w(w_), n0(n0_), tid(tid_) {}
  __device__ __forceinline__ void start(int kt) { k0 = kt * kBK; }
  __device__ __forceinline__ void issue(float (*s)[ROWS + kPad]) {
    const int k = k0 + Map::kk(tid);
    const bool kvalid = k < a.KRS;
    int ko, rs;
    a.fRS.divmod(k, ko, rs);
    const int base = ko * a.CRS + rs;
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int c = n0 + Map::row(tid, e);
      const bool ok = kvalid && c < a.C;
      copy4(&s[Map::kk(tid)][Map::row(tid, e)], ok ? w + (base + c * a.RS) : w, ok);
    }
    k0 += kBK;
  }
};

// ---- the tap-major A loader: forward, and backward_data at stride 1 -------------------------
//
// GEMM_K ordered k = (r·S + s)·Cin + ch (the channel fastest) with Cin % kBK ==
// 0, so every k-tile lies inside one tap (r, s): the row's in-range test is
// made once per tap, and along a tap the thread's elements only step by
// kBK·H·W. No division in the loop. RowFast over m:
//   forward        m = (n,p,q), in = x (Cin = C, H×W),   pixel (p·st−pad+r, q·st−pad+s)
//   backward_data  m = (n,h,w), in = dy (Cin = K, P×Q),  pixel (h+pad−r, w+pad−s), stride 1
template <int ROWS, int NT, bool DGRAD>
struct TapALoader {
  using Map = RowFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const ConvArgs& a;
  const float* ib;  // this row's image of `in` (image 0 for an invalid row)
  int ub, vb;       // forward: p·st − pad, q·st − pad; backward_data: h + pad, w + pad
  int tid;
  int r = 0, s = 0, c0 = 0;  // the current tile's tap and first channel (block-uniform)
  int off = 0;               // element 0's offset in the image at the current tile
  bool mvalid, ok = false;   // ok: the row is valid and the current tap lies inside the image

  __device__ __forceinline__ int cin() const { return DGRAD ? a.K : a.C; }
  __device__ __forceinline__ int hin() const { return DGRAD ? a.P : a.H; }
  __device__ __forceinline__ int win() const { return DGRAD ? a.Q : a.W; }
  __device__ __forceinline__ int plane() const { return DGRAD ? a.PQ : a.HW; }

  __device__ __forceinline__ TapALoader(const ConvArgs& a_, const float* in, int m0, int tid_)
      : a(a_), tid(tid_) {
    const int m = m0 + Map::row(tid);
    int img, uv, u, v;
    if constexpr (DGRAD) {
      mvalid = m < a.NHW;
      a.fHW.divmod(mvalid ? m : 0, img, uv);
      a.fW.divmod(uv, u, v);
      ub = u + a.pad;
      vb = v + a.pad;
      ib = in + (size_t)img * a.KPQ;
    } else {
      mvalid = m < a.NPQ;
      a.fPQ.divmod(mvalid ? m : 0, img, uv);
      a.fQ.divmod(uv, u, v);
      ub = u * a.stride - a.pad;
      vb = v * a.stride - a.pad;
      ib = in + (size_t)img * a.CHW;
    }
  }
  __device__ __forceinline__ void set_tap() {
    const int h = DGRAD ? ub - r : ub + r, w = DGRAD ? vb - s : vb + s;
    ok = mvalid && (unsigned)h < (unsigned)hin() && (unsigned)w < (unsigned)win();
    off = (c0 + Map::kk(tid, 0)) * plane() + h * win() + w;
  }
  __device__ __forceinline__ void start(int kt) {
    const int k0 = kt * kBK, tap = k0 / cin();
    c0 = k0 - tap * cin();
    r = tap / a.S;
    s = tap - r * a.S;
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
      if (++s == a.S) {
        s = 0;
        ++r;
      }
      set_tap();
    }
  }
};

// ---- backward_params loaders (GEMM_K = (n, p, q)) ----------------------------------------

// backward_params A (KFast; rows = ko, k = (n, p, q)): dy[n][ko][p][q].
template <int ROWS, int NT>
struct WgradALoader {
  using Map = KFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const ConvArgs& a;
  const float* dy;
  int m0, tid, k0 = 0;

  __device__ __forceinline__ WgradALoader(const ConvArgs& a_, const float* dy_, int m0_, int tid_)
      : a(a_), dy(dy_), m0(m0_), tid(tid_) {}
  __device__ __forceinline__ void start(int kt) { k0 = kt * kBK; }
  __device__ __forceinline__ void issue(float (*s)[ROWS + kPad]) {
    const int k = k0 + Map::kk(tid);
    const bool kvalid = k < a.NPQ;
    int img, pq;
    a.fPQ.divmod(kvalid ? k : 0, img, pq);
    const float* base = dy + (size_t)img * a.KPQ + pq;
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int ko = m0 + Map::row(tid, e);
      const bool ok = kvalid && ko < a.K;
      copy4(&s[Map::kk(tid)][Map::row(tid, e)], ok ? base + ko * a.PQ : dy, ok);
    }
    k0 += kBK;
  }
};

// 1.0f in global memory: the source of the bias gradient's column of ones
// (cp.async copies from global memory only).
__device__ const float kOneF = 1.0f;

// backward_params B (KFast; rows = (c,r,s), k = (n,p,q)): the im2col gather of x,
// transposed. The rows' (c,r,s) are decoded once per block; each tile decodes
// its one k per thread. With bias_col, row C·R·S (in the last tile's padding)
// is a column of ones, so that GEMM column C·R·S sums dy over k: the bias
// gradient, in the same pass.
template <int ROWS, int NT>
struct WgradBLoader {
  using Map = KFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  static_assert(ELEMS <= 32, "row-valid bits fit an unsigned");
  const ConvArgs& a;
  const float* x;
  int tid, k0 = 0;
  unsigned nvalid;   // bit e: row e is < C·R·S
  unsigned ones;     // bit e: row e is the column of ones
  int roff[ELEMS];   // c·H·W + r·W + s
  int rs16[ELEMS];   // r·2^16 + s (R, S < 2^15: check_shape), one register for both

  __device__ __forceinline__ WgradBLoader(const ConvArgs& a_, const float* x_, int n0, int tid_,
                                          bool bias_col = false)
      : a(a_), x(x_), tid(tid_), nvalid(0), ones(0) {
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      const int n = n0 + Map::row(tid, e);
      const bool ok = n < a.CRS;
      if (ok) nvalid |= 1u << e;
      if (bias_col && n == a.CRS) ones |= 1u << e;
      int c, rs, r, s;
      a.fRS.divmod(ok ? n : 0, c, rs);
      a.fS.divmod(rs, r, s);
      rs16[e] = (r << 16) | s;
      roff[e] = c * a.HW + r * a.W + s;
    }
  }
  __device__ __forceinline__ void start(int kt) { k0 = kt * kBK; }
  __device__ __forceinline__ void issue(float (*st)[ROWS + kPad]) {
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
      const int h = hb + (rs16[e] >> 16), w = wb + (rs16[e] & 0xffff);
      const bool ok = kvalid && ((nvalid >> e) & 1u) && (unsigned)h < (unsigned)a.H &&
                      (unsigned)w < (unsigned)a.W;
      const bool one = (ones >> e) & 1u;
      copy4(&st[Map::kk(tid)][Map::row(tid, e)], one ? &kOneF : ok ? xb + (roff[e] + boff) : x,
            ok || (one && kvalid));
    }
    k0 += kBK;
  }
};

// backward_params B with tap-major columns (KFast; column n' = (r·S + s)·C + c,
// k = (n, p, q)), for C % ROWS == 0: a block's ROWS columns then lie in one tap
// (r, s) with channels c0 … c0+ROWS−1, so one in-range test per thread and
// k-tile serves all its elements, which lie RSTEP channels (RSTEP·H·W floats)
// apart. No per-row tables, no per-element tests. The B values are
// WgradBLoader's with the columns permuted: column rs·C + c is dw[ko][c][rs].
template <int ROWS, int NT>
struct WgradTapBLoader {
  using Map = KFast<ROWS, NT>;
  static constexpr int ELEMS = Map::ELEMS;
  const ConvArgs& a;
  const float* x;
  int hr, ws;  // r − pad, s − pad of the block's tap
  int coff;    // (c0 + the thread's first row)·H·W
  int tid, k0 = 0;

  __device__ __forceinline__ WgradTapBLoader(const ConvArgs& a_, const float* x_, int n0, int tid_)
      : a(a_), x(x_), tid(tid_) {
    const int tap = n0 / a.C, c0 = n0 - tap * a.C;  // once per thread
    int r, s;
    a.fS.divmod(tap, r, s);
    hr = r - a.pad;
    ws = s - a.pad;
    coff = (c0 + Map::row(tid, 0)) * a.HW;
  }
  __device__ __forceinline__ void start(int kt) { k0 = kt * kBK; }
  __device__ __forceinline__ void issue(float (*st)[ROWS + kPad]) {
    const int k = k0 + Map::kk(tid);
    const bool kvalid = k < a.NPQ;
    int img, pq, p, q;
    a.fPQ.divmod(kvalid ? k : 0, img, pq);
    a.fQ.divmod(pq, p, q);
    const int h = p * a.stride + hr, w = q * a.stride + ws;
    const bool ok = kvalid && (unsigned)h < (unsigned)a.H && (unsigned)w < (unsigned)a.W;
    const float* src = ok ? x + ((size_t)img * a.CHW + (coff + h * a.W + w)) : x;
    const int step = ok ? Map::RSTEP * a.HW : 0;  // in range either way
#pragma unroll
    for (int e = 0; e < ELEMS; ++e)
      copy4(&st[Map::kk(tid)][Map::row(tid, e)], src + e * step, ok);
    k0 += kBK;
  }
};

// The ReLU layer's function (v < 0 ? 0 : v: NaN passes), for a fused ReLU.
__device__ __forceinline__ float relu_of(float v) { return v < 0.0f ? 0.0f : v; }

// The activation of an epilogue. ACT = false: the original epilogue, `relu`
// or nothing (a flag; no descriptor in the parameter space, so the kernels of
// the none / ReLU path are as they were); ACT = true: any Activation
// (layers/epilogue_act.h), for its own instantiation of the kernels.
template <bool ACT>
struct EpiAct {
  bool relu;  // write relu(v) (a fused ReLU)
  __device__ __forceinline__ float apply(float o, int /*ch*/) const {
    return relu ? relu_of(o) : o;
  }
};
template <>
struct EpiAct<true> {
  Activation act;
  __device__ __forceinline__ float apply(float o, int ch) const {
    return apply_activation(act, o, ch);
  }
};

// ---- conv output epilogue: out[n][ch][pix], m = n·plane + pix, column = ch -------------
// In a split-K launch slice blockIdx.z writes out + z·split_stride (no bias, no
// activation). ConvOut has the ReLU flag, ConvActOut any activation (EpiAct).
template <bool ACT>
struct ConvOutT {
  static constexpr bool kAlongM = true;
  float* out;
  const float* bias;  // may be null
  long long split_stride;
  int M, Nch, plane;
  FastDiv fplane;
  bool vec;   // plane % 4 == 0 and out 16-byte aligned (and mask, when set)
  EpiAct<ACT> act;  // applied to v + b
  // Null, or a tensor of out's layout: out = mask > 0 ? v : 0 (the backward of
  // a ReLU before the layer, fused into its input gradient; no split, no bias).
  const float* mask;

  __device__ __forceinline__ float value(float v, float b, int ch) const {
    return act.apply(v + b, ch);
  }
  __device__ __forceinline__ static float masked(float v, float m) { return m > 0.f ? v : 0.f; }

  // Rows m..m+3 (m a multiple of 4) of column n.
  __device__ __forceinline__ void store_mcol(int m, int n, const float (&v)[4]) const {
    if (m >= M || n >= Nch) return;
    const float b = bias ? __ldg(bias + n) : 0.f;
    float* o = out + (long long)blockIdx.z * split_stride;
    if (vec) {  // plane % 4 == 0: m..m+3 lie in one image, aligned, and below M
      int img, pix;
      fplane.divmod(m, img, pix);
      const size_t at = ((size_t)img * Nch + n) * plane + pix;
      float4 r = make_float4(value(v[0], b, n), value(v[1], b, n), value(v[2], b, n),
                             value(v[3], b, n));
      if (mask) {
        const float4 mk = __ldg(reinterpret_cast<const float4*>(mask + at));
        r = make_float4(masked(r.x, mk.x), masked(r.y, mk.y), masked(r.z, mk.z), masked(r.w, mk.w));
      }
      *reinterpret_cast<float4*>(o + at) = r;
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (m + i >= M) break;
        int img, pix;
        fplane.divmod(m + i, img, pix);
        const size_t at = ((size_t)img * Nch + n) * plane + pix;
        const float r = value(v[i], b, n);
        o[at] = mask ? masked(r, __ldg(mask + at)) : r;
      }
    }
  }
};
using ConvOut = ConvOutT<false>;
using ConvActOut = ConvOutT<true>;

// The tap-major weight gradient added into dw (one slice): column n' = rs·C + c
// of row ko is dw[ko][c][rs]. n' is a multiple of 4 and C % 4 == 0, so the
// four columns of a store share one tap.
struct TapWOut {
  static constexpr bool kAlongM = false;
  float* dw;
  int K, C, RS, CRS;
  FastDiv fC;

  __device__ __forceinline__ void store_nrow(int m, int n, const float (&v)[4]) const {
    if (m >= K || n >= CRS) return;
    int rs, c;
    fC.divmod(n, rs, c);
    float* o = dw + ((size_t)m * CRS + (size_t)c * RS + rs);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (n + j < CRS) o[(size_t)j * RS] = o[(size_t)j * RS] + v[j];
  }
};

// ---- kernels ---------------------------------------------------------------------------

inline __host__ __device__ int ktiles_of(long long kdim) { return int((kdim + kBK - 1) / kBK); }

// Slice blockIdx.z of a split-K launch covers k-tiles [z·tps, min((z+1)·tps, ktiles)).
__device__ __forceinline__ void slice_range(int ktiles, int tps, int& kt0, int& kt1) {
  kt0 = min((int)blockIdx.z * tps, ktiles);
  kt1 = min(kt0 + tps, ktiles);
}

// The block's tile on the configuration's engine (implicit_gemm_core.cuh,
// implicit_gemm_tc.cuh, or implicit_gemm_wide.cuh: a wide one runs with
// Cfg::kSmemBytes of dynamic shared memory).
template <class Cfg, class AL, class BL, class Epi>
__device__ __forceinline__ void run_tile(AL& al, BL& bl, int kt0, int kt1, const Epi& epi, int m0,
                                         int n0) {
  if constexpr (Cfg::kTc) tc_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
  else if constexpr (Cfg::kWide) wide_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
  else classic_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
}

// TAP: the tap-major mapping (TapALoader; w is then the re-laid-out wt[(rs·C + c)·K + ko]).
// Epi: ConvOut, or ConvActOut for an activation other than ReLU.
template <class Cfg, bool TAP, class Epi = ConvOut>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    conv_fwd_kernel(const __grid_constant__ ConvArgs a, const float* __restrict__ x,
                    const float* __restrict__ w, int tps, const __grid_constant__ Epi epi) {
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  int kt0, kt1;
  slice_range(ktiles_of(a.CRS), tps, kt0, kt1);
  if constexpr (TAP) {
    TapALoader<Cfg::BM, Cfg::NT, false> al(a, x, m0, tid);
    VecRowLoader<Cfg::BN, Cfg::NT> bl(w, a.K, a.K, a.CRS, n0, tid);
    run_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
  } else {
    FwdALoader<Cfg::BM, Cfg::NT> al(a, x, m0, tid);
    MatLoader<Cfg::BN, Cfg::NT, false> bl(w, a.K, a.CRS, a.CRS, 1, n0, tid);  // w[ko·CRS + k]
    run_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
  }
}

// TAP: the tap-major mapping at stride 1 (w is then wt[(rs·K + ko)·C + c]).
template <class Cfg, bool TAP>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    conv_dgrad_kernel(const __grid_constant__ ConvArgs a, const float* __restrict__ dy,
                      const float* __restrict__ w, int tps, const __grid_constant__ ConvOut epi) {
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  int kt0, kt1;
  slice_range(ktiles_of(a.KRS), tps, kt0, kt1);
  if constexpr (TAP) {
    TapALoader<Cfg::BM, Cfg::NT, true> al(a, dy, m0, tid);
    VecRowLoader<Cfg::BN, Cfg::NT> bl(w, a.C, a.C, a.KRS, n0, tid);
    run_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
  } else {
    DgradALoader<Cfg::BM, Cfg::NT> al(a, dy, m0, tid);
    DgradBLoader<Cfg::BN, Cfg::NT> bl(a, w, n0, tid);
    run_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
  }
}

// TAP: the tap-major columns (WgradTapBLoader, C % BN == 0): the epilogue
// writes column n' = rs·C + c (a split slice in that order, or TapWOut).
// bias_col (channel-major only): column C·R·S is the bias gradient
// (WgradBLoader), for an epilogue C·R·S + 1 columns wide.
template <class Cfg, bool TAP, class Epi>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    conv_wgrad_kernel(const __grid_constant__ ConvArgs a, const float* __restrict__ x,
                      const float* __restrict__ dy, int tps, const __grid_constant__ Epi epi,
                      bool bias_col) {
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  int kt0, kt1;
  slice_range(ktiles_of(a.NPQ), tps, kt0, kt1);
  WgradALoader<Cfg::BM, Cfg::NT> al(a, dy, m0, tid);
  if constexpr (TAP) {
    WgradTapBLoader<Cfg::BN, Cfg::NT> bl(a, x, n0, tid);
    run_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
  } else {
    WgradBLoader<Cfg::BN, Cfg::NT> bl(a, x, n0, tid, bias_col);
    run_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
  }
}

// op(A)(m,k) = TA ? a[k·lda + m] : a[m·lda + k];
// op(B)(k,n) = TB ? b[n·ldb + k] : b[k·ldb + n]. Slice blockIdx.z takes k-tiles
// [z·tps, (z+1)·tps) (tps ≥ all k-tiles: no split).
template <class Cfg, bool TA, bool TB>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    gemm_kernel(int M, int N, int K, const float* __restrict__ A, int lda,
                const float* __restrict__ B, int ldb, const __grid_constant__ MatOut epi, int tps) {
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  MatLoader<Cfg::BM, Cfg::NT, TA> al(A, M, K, TA ? 1 : lda, TA ? lda : 1, m0, tid);
  MatLoader<Cfg::BN, Cfg::NT, !TB> bl(B, N, K, TB ? ldb : 1, TB ? 1 : ldb, n0, tid);
  int kt0, kt1;
  slice_range(ktiles_of(K), tps, kt0, kt1);
  run_tile<Cfg>(al, bl, kt0, kt1, epi, m0, n0);
}

// The tap-major weight layouts, from w[ko][c][rs]:
//   forward         wt[(rs·C + c)·K + ko]   (GEMM_K = (rs, c) rows, GEMM_N = ko contiguous)
//   backward_data   wt[(rs·K + ko)·C + c]   (GEMM_K = (rs, ko) rows, GEMM_N = c contiguous)
// One thread per element of wt (coalesced writes; w is small and cached).
__global__ void __launch_bounds__(256)
    weight_taps_kernel(const float* __restrict__ w, int K, int C, int RS, bool for_dgrad,
                       float* __restrict__ wt) {
  const int count = K * C * RS;
  const int inner = for_dgrad ? C : K, mid = for_dgrad ? K : C;
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < count; o += gridDim.x * blockDim.x) {
    const int j = o % inner, t = o / inner;
    const int i = t % mid, rs = t / mid;
    const int ko = for_dgrad ? i : j, c = for_dgrad ? j : i;
    wt[o] = __ldg(w + ((size_t)ko * C + c) * RS + rs);
  }
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

// c[i][j] = (accumulate ? c[i][j] : 0) + Σ_{z ascending} ws[z·stride + i·n + j], in
// double, rounded once: the plain GEMM's split-K slices.
__global__ void __launch_bounds__(256)
    splitk_mat_kernel(const float* __restrict__ ws, int splits, long long stride, int m, int n,
                      float* __restrict__ c, long long ldc, bool accumulate) {
  const long long count = (long long)m * n;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    double s = 0.0;
    for (int z = 0; z < splits; ++z) s += (double)ws[(long long)z * stride + i];
    const long long row = i / n;
    float* o = c + row * ldc + (i - row * n);
    *o = (float)((accumulate ? (double)*o : 0.0) + s);
  }
}

// The slices of a weight gradient with its bias column (ws[z][ko][CRS + 1]):
// dw[ko][n] = dw[ko][n] + Σ_z ws[z][ko][n] for n < CRS, db[ko] = db[ko] +
// Σ_z ws[z][ko][CRS]; z ascending, in double, as splitk_reduce_kernel.
__global__ void __launch_bounds__(256)
    splitk_reduce_bias_kernel(const float* __restrict__ ws, int splits, int K, int CRS,
                              float* __restrict__ dw, float* __restrict__ db) {
  const long long ld = (long long)CRS + 1, count = (long long)K * ld;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const long long ko = i / ld;
    const int n = int(i - ko * ld);
    double s = 0.0;
    for (int z = 0; z < splits; ++z) s += (double)ws[(long long)z * count + i];
    float* o = n < CRS ? dw + (ko * CRS + n) : db + ko;
    *o = (float)((double)*o + s);
  }
}

// dw[ko][c][rs] = dw[ko][c][rs] + Σ_{z ascending} ws[z][ko][rs·C + c], in double:
// the slices of a tap-major weight gradient, summed as splitk_reduce_kernel
// sums them. A block transposes a tile of kTapTile channels × kTapTile taps of
// one output channel through shared memory: its threads read the slices along
// c (coalesced) and write dw along rs (coalesced), where one thread per
// element wrote dw at a stride of RS floats (a 32-byte sector per element:
// 29.5 µs for a 5×5 256 → 128 layer's slices at batch 64). Grid: x = the
// tiles of one output channel (⌈C / kTapTile⌉ · ⌈RS / kTapTile⌉, c tiles
// fastest), y = output channels ko0 .. ko0 + gridDim.y − 1 (at most 65535 a launch).
constexpr int kTapTile = 32;
constexpr int kTapRows = 8;  // threads: kTapTile × kTapRows

__global__ void __launch_bounds__(kTapTile * kTapRows)
    splitk_reduce_taps_kernel(const float* __restrict__ ws, int splits, long long count, int C,
                              int RS, long long ko0, float* __restrict__ dw) {
  __shared__ double t[kTapTile][kTapTile + 1];  // [rs][c]
  const int c_tiles = (C + kTapTile - 1) / kTapTile;
  const int c0 = int(blockIdx.x % c_tiles) * kTapTile, rs0 = int(blockIdx.x / c_tiles) * kTapTile;
  const long long ko = ko0 + blockIdx.y;
  const int tx = threadIdx.x % kTapTile, ty = threadIdx.x / kTapTile;
  const float* src = ws + ko * RS * (long long)C;
  for (int j = ty; j < kTapTile; j += kTapRows) {
    const int rs = rs0 + j, c = c0 + tx;
    double v = 0.0;
    if (rs < RS && c < C) {
      const long long i = (long long)rs * C + c;
      for (int z = 0; z < splits; ++z) v += (double)src[(long long)z * count + i];
    }
    t[j][tx] = v;
  }
  __syncthreads();
  float* dst = dw + ko * C * (long long)RS;
  for (int j = ty; j < kTapTile; j += kTapRows) {
    const int c = c0 + j, rs = rs0 + tx;
    if (c < C && rs < RS) {
      float* o = dst + (long long)c * RS + rs;
      *o = (float)((double)*o + t[tx][j]);
    }
  }
}

// A split conv output: out[i] = (float)(Σ_{z ascending} ws[z·count + i], in double)
// + bias[(i / plane) mod Nch] (no bias when null), then the fused ReLU if relu,
// then mask[i] > 0 ? out[i] : 0 when mask is set (ConvOut::mask). count = N·Nch·plane.
__global__ void __launch_bounds__(256)
    splitk_out_kernel(const float* __restrict__ ws, int splits, long long count, int plane,
                      int Nch, const float* __restrict__ bias, bool relu,
                      const float* __restrict__ mask, float* __restrict__ out) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    double s = 0.0;
    for (int z = 0; z < splits; ++z) s += (double)ws[(long long)z * count + i];
    float v = (float)s;
    if (bias) v += __ldg(bias + (int)((i / plane) % Nch));
    if (relu) v = relu_of(v);
    out[i] = mask ? ConvOut::masked(v, __ldg(mask + i)) : v;
  }
}

// splitk_out_kernel four outputs at a time, where count and plane are
// multiples of 4, ws, out (and mask) 16-byte aligned and count / 4 < 2^31:
// float4 loads and stores, the channel by 32-bit FastDiv (fquads: plane / 4,
// fnch: Nch) instead of a 64-bit division per element. The same sums, in the
// same order, so the same bits.
__global__ void __launch_bounds__(256)
    splitk_out4_kernel(const float4* __restrict__ ws, int splits, unsigned quads, FastDiv fquads,
                       FastDiv fnch, const float* __restrict__ bias, bool relu,
                       const float4* __restrict__ mask, float4* __restrict__ out) {
  for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < quads;
       e += gridDim.x * blockDim.x) {
    double s[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll 4
    for (int z = 0; z < splits; ++z) {
      const float4 t = __ldg(ws + (size_t)z * quads + e);
      s[0] += (double)t.x, s[1] += (double)t.y, s[2] += (double)t.z, s[3] += (double)t.w;
    }
    float v[4] = {(float)s[0], (float)s[1], (float)s[2], (float)s[3]};
    if (bias) {
      int q, r, img, ch;
      fquads.divmod(int(e), q, r);
      fnch.divmod(q, img, ch);
      const float b = __ldg(bias + ch);
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] += b;
    }
    if (relu) {
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = relu_of(v[i]);
    }
    if (mask) {
      const float4 m = __ldg(mask + e);
      v[0] = ConvOut::masked(v[0], m.x), v[1] = ConvOut::masked(v[1], m.y);
      v[2] = ConvOut::masked(v[2], m.z), v[3] = ConvOut::masked(v[3], m.w);
    }
    out[e] = make_float4(v[0], v[1], v[2], v[3]);
  }
}

// splitk_out_kernel's sum with any activation (no mask: a forward's output):
// out[i] = act((float)(Σ_z ws[z·count + i], in double) + bias[ch]), ch = (i / plane) mod Nch.
__global__ void __launch_bounds__(256)
    splitk_out_act_kernel(const float* __restrict__ ws, int splits, long long count, int plane,
                          int Nch, const float* __restrict__ bias,
                          const __grid_constant__ Activation act, float* __restrict__ out) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    double s = 0.0;
    for (int z = 0; z < splits; ++z) s += (double)ws[(long long)z * count + i];
    float v = (float)s;
    const int ch = (int)((i / plane) % Nch);
    if (bias) v += __ldg(bias + ch);
    out[i] = apply_activation(act, v, ch);
  }
}

// y = relu(y) in place: the fused ReLU after a kernel without it (the thin forward).
__global__ void __launch_bounds__(256) relu_inplace_kernel(float* __restrict__ y, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = relu_of(y[i]);
}

// db[ko] += Σ_{n,p,q} dy[n][ko][p][q]: block ko. The channel's N·P·Q values
// are read in pieces of `width` consecutive floats along (p, q): 4 (one
// float4) when P·Q % 4 == 0 and dy is 16-byte aligned, else 1; fpiece divides
// by the pieces per image (P·Q / width). Thread t sums the pieces j ≡ t
// (mod 256), j ascending, each piece's values in order, in double; it loads
// four pieces before adding any (memory parallelism, same order). Then a
// fixed pairwise tree over the 256 partials.
constexpr int kBiasThreads = 256;

template <int WIDTH>
__device__ __forceinline__ void load_piece(const float* __restrict__ p, float (&v)[4]) {
  if constexpr (WIDTH == 4) {
    const float4 t = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
  } else {
    v[0] = __ldg(p);
  }
}

template <int WIDTH>
__device__ __forceinline__ double bias_partial(const ConvArgs& a, const float* __restrict__ dy,
                                               FastDiv fpiece, int ko) {
  const long long pieces = a.NPQ / WIDTH;
  auto at = [&](long long j) {  // the first float of piece j
    int img, pc;
    fpiece.divmod((int)j, img, pc);
    return dy + ((size_t)img * a.K + ko) * a.PQ + (size_t)pc * WIDTH;
  };
  double s = 0.0;
  long long j = threadIdx.x;
  for (; j + 3 * kBiasThreads < pieces; j += 4 * kBiasThreads) {
    float v[4][4];
#pragma unroll
    for (int u = 0; u < 4; ++u) load_piece<WIDTH>(at(j + u * kBiasThreads), v[u]);
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int i = 0; i < WIDTH; ++i) s += (double)v[u][i];
  }
  for (; j < pieces; j += kBiasThreads) {
    float v[4];
    load_piece<WIDTH>(at(j), v);
#pragma unroll
    for (int i = 0; i < WIDTH; ++i) s += (double)v[i];
  }
  return s;
}

__global__ void __launch_bounds__(kBiasThreads)
    bias_grad_kernel(const __grid_constant__ ConvArgs a, const float* __restrict__ dy, bool vec,
                     FastDiv fpiece, float* __restrict__ db) {
  __shared__ double red[kBiasThreads];
  const int ko = blockIdx.x;
  red[threadIdx.x] = vec ? bias_partial<4>(a, dy, fpiece, ko) : bias_partial<1>(a, dy, fpiece, ko);
  __syncthreads();
#pragma unroll
  for (int half = kBiasThreads / 2; half > 0; half >>= 1) {
    if ((int)threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[ko] = (float)((double)db[ko] + red[0]);
}

}  // namespace hpmc::gpu::implicit_detail
