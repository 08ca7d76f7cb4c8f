// conv2d_implicit_gemm.cu — the "im2col" family (namespace hpmc::gpu::implicit):
// Conv2D forward / backward as implicit GEMMs, and the plain GEMM of the
// Linear layers, on one exact-FP32 engine (implicit_gemm_core.cuh): FFMA only,
// no TF32, no tensor cores, no floating-point atomics.
//
// ---- mappings (x NCHW, w KCRS, y NKPQ; k-index orders as in the CPU im2col) ----
// forward          GEMM_M = N·P·Q (m = (n,p,q)), GEMM_N = K, GEMM_K = C·R·S (c·RS + r·S + s)
//                  A[m][k] = x[n][c][p·st−pad+r][q·st−pad+s] (0 outside),
//                  B[k][ko] = w[ko][c][r][s]
//                  y[n][ko][p][q] = Σ + b[ko]   (overwritten; float4 stores along (p,q))
// backward_data    GEMM_M = N·H·W (m = (n,h,w)), GEMM_N = C, GEMM_K = K·R·S (ko·RS + r·S + s)
//                  A[m][k] = dy[n][ko][p][q] with p = (h+pad−r)/st, q = (w+pad−s)/st when both
//                  divide exactly and lie in [0,P)×[0,Q), else 0;  B[k][c] = w[ko][c][r][s]
//                  dx[n][c][h][w] = Σ (overwritten). With st > 1 most A entries are such
//                  structural zeros (3/4 at st = 2): correct, not optimal.
// backward_params  GEMM_M = K, GEMM_N = C·R·S, GEMM_K = N·P·Q (n·PQ + p·Q + q)
//                  A[ko][k] = dy[n][ko][p][q], B[k][crs] = x[n][c][p·st−pad+r][q·st−pad+s]
//                  dw[ko][crs] += Σ;  db[ko] += Σ dy  (separate deterministic kernel)
// gemm             C[m×n] (= or +=) op(A)·op(B), row-major, leading dimensions lda/ldb/ldc;
//                  the transposes select the loaders' thread mappings (4 instantiations).
// The im2col matrix is never materialised: each loader decodes its indices on the
// fly (k → (c,r,s) or m → (n,p,q) by multiply-high division, implicit_fastdiv.h).
//
// ---- tiles (BM×BN×BK, per-thread TM×TN, threads) -----------------------------------
//   L      128×128×8, 8×8, 256 threads, ≥2 blocks/SM   the workhorse for large M and N
//   S       64× 64×8, 4×4, 256 threads, ≥2 blocks/SM   mid-size problems: 4× the blocks
//   ThinN  128× 16×8, 4×4, 128 threads, ≥4 blocks/SM   GEMM_N ≤ 16 (K = 3 outputs, C = 3)
//   ThinM   16×128×8, 4×4, 128 threads, ≥4 blocks/SM   GEMM_M ≤ 16 (weight grad of K = 3)
// Heuristic, per call (choose_tile, implicit_plan.h): GEMM_N ≤ 16 → ThinN; else
// GEMM_M ≤ 16 → ThinM; else L when its padding wastes ≤ 25% of the tile work
// (padded M·N ≤ 1.25·M·N) and its blocks (× split-K slices) make at least one per
// SM; else S. Not yet tuned on the H100. The tile choice changes no bit of any
// result (see the note in implicit_gemm_core.cuh).
//
// ---- split-K (backward_params only) -------------------------------------------------
// GEMM_K = N·P·Q is long and GEMM_M·GEMM_N small, so blockIdx.z splits the k-tiles into
// `splits` contiguous ranges of `tps` tiles. With splits = 1 the epilogue adds into dw
// directly; otherwise slice z writes its partial tile to workspace[z][K][CRS] (every
// element of every slice is written, zeros for an empty range) and splitk_reduce_kernel
// computes dw[i] = dw[i] + Σ_z ws[z][i], summing z = 0, 1, … in double in that fixed
// order. splits is a function of the shape only (choose_splits: aims at kSplitTarget
// 64×64-tile blocks, ≥ 8 k-tiles per slice, ≤ 64 slices), so the bits do not depend on
// the device, the tile configuration or the run. db: one block per output channel,
// each thread sums a fixed strided subset in double, then a fixed shared-memory tree.
// The workspace is a grow-only, cached cudaMalloc'd buffer (default stream only).
//
// ---- thin convolutions ----------------------------------------------------------------
// K ≤ 4 output channels (choose_thin, implicit_plan.h) skip the GEMM engine for the
// kernels of conv2d_thin.cu, in all three passes; they share the workspace below.
//
// ---- files -------------------------------------------------------------------------
// implicit_gemm_core.cuh    the tiled, double-buffered, register-blocked main loop,
//                           the strided-matrix loader and the row-major epilogue
// implicit_conv_kernels.cuh the conv loaders and epilogue, and every __global__ kernel
// implicit_plan.h           tile choice and split-K plan (pure host code, unit-tested)
// implicit_fastdiv.h        multiply-high division by run-time divisors
// conv2d_thin.cu            the thin-convolution kernels (K ≤ 4) and their launches
// this file                 the host side: checks, plans, workspace, launches
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/conv_shape.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/conv2d_thin.h"
#include "layers/gpu/implicit_fastdiv.h"
#include "layers/gpu/implicit_conv_kernels.cuh"
#include "layers/gpu/implicit_gemm_core.cuh"
#include "layers/gpu/implicit_plan.h"

namespace hpmc::gpu {

namespace implicit_detail {
namespace {

// ---- host side -----------------------------------------------------------------------------

// Index arithmetic is 32-bit (k0 + BK, m + 3 and friends must not overflow):
// every GEMM extent and per-sample size stays below 2^30.
constexpr long long kMaxExtent = 1ll << 30;

void check_extent(const char* what, long long v) {
  if (v < 0 || v >= kMaxExtent)
    throw RuntimeError(str("implicit GEMM: ", what, " = ", v,
                           " is outside the supported range [0, 2^30)"));
}

int sm_count() {
  static std::atomic<int> cached[64];  // zero-initialised (static storage)
  int dev = 0;
  HPMC_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64) dev = 0;
  int n = cached[dev].load(std::memory_order_relaxed);
  if (n <= 0) {
    HPMC_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    if (n <= 0) n = 1;
    cached[dev].store(n, std::memory_order_relaxed);
  }
  return n;
}

// The tile configuration for this device (implicit_plan.h).
Tile pick_tile(long long M, long long N, int slices) {
  return choose_tile(M, N, slices, sm_count());
}

template <class Cfg>
dim3 grid_of(long long M, long long N, int slices) {
  const long long gx = tiles(M, Cfg::BM), gy = tiles(N, Cfg::BN);
  if (gx > INT_MAX || gy > 65535 || slices > 65535)
    throw RuntimeError(str("implicit GEMM: grid ", gx, "x", gy, "x", slices, " too large"));
  return dim3(unsigned(gx), unsigned(gy), unsigned(slices));
}

// Grow-only device scratch, kept between calls. The kernels that use it run on
// the default stream, in order, so a later call may reuse it at once; growing
// synchronizes the device, then frees the old block.
class Scratch {
 public:
  float* get(size_t floats) {
    std::lock_guard<std::mutex> lock(mu_);
    int dev = 0;
    HPMC_CUDA_CHECK(cudaGetDevice(&dev));
    const size_t bytes = std::max<size_t>(floats, 1) * sizeof(float);
    size_t want = bytes;
    if (ptr_ && (bytes > bytes_ || dev != dev_)) {
      if (dev == dev_) want = std::max(bytes, bytes_ + bytes_ / 2);  // some headroom
      // Work queued by an earlier call may still read the old block: wait for
      // it explicitly rather than rely on cudaFree's implicit synchronization.
      HPMC_CUDA_CHECK(cudaDeviceSynchronize());
      HPMC_CUDA_CHECK(cudaFree(ptr_));
      ptr_ = nullptr;
      bytes_ = 0;
    }
    if (!ptr_) {
      void* p = nullptr;
      HPMC_CUDA_CHECK(cudaMalloc(&p, want));
      ptr_ = static_cast<float*>(p);
      bytes_ = want;
      dev_ = dev;
    }
    return ptr_;
  }
  ~Scratch() {
    if (ptr_) cudaFree(ptr_);  // at exit the runtime may be gone already; ignore
  }

 private:
  std::mutex mu_;
  float* ptr_ = nullptr;
  size_t bytes_ = 0;
  int dev_ = -1;
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

void check_shape(const Conv2dShape& s) {
  if (s.N < 0 || s.C < 0 || s.H < 0 || s.W < 0 || s.K < 0 || s.R < 1 || s.S < 1 ||
      s.stride < 1 || s.pad < 0 || s.P < 0 || s.Q < 0)
    throw RuntimeError(str("implicit conv2d: invalid shape N=", s.N, " C=", s.C, " H=", s.H,
                           " W=", s.W, " K=", s.K, " R=", s.R, " S=", s.S,
                           " stride=", s.stride, " pad=", s.pad, " P=", s.P, " Q=", s.Q));
  const long long RS = (long long)s.R * s.S;
  check_extent("H + 2·pad", (long long)s.H + 2ll * s.pad);
  check_extent("W + 2·pad", (long long)s.W + 2ll * s.pad);
  check_extent("R·S", RS);
  check_extent("H·W", (long long)s.H * s.W);
  check_extent("P·Q", (long long)s.P * s.Q);
  check_extent("C·R·S", s.C * RS);
  check_extent("K·R·S", s.K * RS);
  check_extent("K·C·R·S", (long long)s.K * s.C * RS);
  check_extent("C·H·W", (long long)s.C * s.H * s.W);
  check_extent("K·P·Q", (long long)s.K * s.P * s.Q);
  check_extent("N·P·Q", (long long)s.N * s.P * s.Q);
  check_extent("N·H·W", (long long)s.N * s.H * s.W);
}

ConvOut make_conv_out(float* out, const float* bias, long long M, int Nch, int plane) {
  ConvOut e{};
  e.out = out;
  e.bias = bias;
  e.M = int(M);
  e.Nch = Nch;
  e.plane = plane;
  e.fplane = FastDiv(plane);
  e.vec = plane % 4 == 0 && aligned16(out);
  return e;
}

MatOut make_mat_out(float* out, long long ld, long long split_stride, int M, int N, bool acc) {
  MatOut e{};
  e.out = out;
  e.ld = ld;
  e.split_stride = split_stride;
  e.M = M;
  e.N = N;
  e.accumulate = acc;
  e.vec = ld % 4 == 0 && split_stride % 4 == 0 && aligned16(out);
  return e;
}

template <class Cfg>
void launch_fwd(const ConvArgs& a, const float* x, const float* w, const ConvOut& e) {
  conv_fwd_kernel<Cfg><<<grid_of<Cfg>(a.NPQ, a.K, 1), Cfg::NT>>>(a, x, w, e);
  HPMC_CUDA_LAUNCH_CHECK("implicit conv2d forward");
}
template <class Cfg>
void launch_dgrad(const ConvArgs& a, const float* dy, const float* w, const ConvOut& e) {
  conv_dgrad_kernel<Cfg><<<grid_of<Cfg>(a.NHW, a.C, 1), Cfg::NT>>>(a, dy, w, e);
  HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_data");
}
template <class Cfg>
void launch_wgrad(const ConvArgs& a, const float* x, const float* dy, int splits, int tps,
                  const MatOut& e) {
  conv_wgrad_kernel<Cfg><<<grid_of<Cfg>(a.K, a.CRS, splits), Cfg::NT>>>(a, x, dy, tps, e);
  HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_params (weights)");
}
template <class Cfg, bool TA, bool TB>
void launch_gemm_t(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                   const MatOut& e) {
  gemm_kernel<Cfg, TA, TB><<<grid_of<Cfg>(m, n, 1), Cfg::NT>>>(m, n, k, a, lda, b, ldb, e);
  HPMC_CUDA_LAUNCH_CHECK("implicit gemm");
}
template <class Cfg>
void launch_gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b,
                 int ldb, const MatOut& e) {
  if (ta && tb) launch_gemm_t<Cfg, true, true>(m, n, k, a, lda, b, ldb, e);
  else if (ta) launch_gemm_t<Cfg, true, false>(m, n, k, a, lda, b, ldb, e);
  else if (tb) launch_gemm_t<Cfg, false, true>(m, n, k, a, lda, b, ldb, e);
  else launch_gemm_t<Cfg, false, false>(m, n, k, a, lda, b, ldb, e);
}

}  // namespace
}  // namespace implicit_detail

namespace implicit {

using namespace implicit_detail;

void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* b,
                    float* y) {
  check_shape(s);
  const ConvArgs a = make_args(s);
  if (a.NPQ == 0 || a.K == 0) return;
  const ThinPath thin =
      choose_thin(s.K, s.R, s.S, s.stride, s.pad, s.W, aligned16(x) && aligned16(y));
  if (thin != ThinPath::kNone) {
    thin_forward(s, thin, x, w, b, y);
    return;
  }
  const ConvOut e = make_conv_out(y, b, a.NPQ, a.K, a.PQ);
  switch (pick_tile(a.NPQ, a.K, 1)) {
    case Tile::kL: launch_fwd<CfgL>(a, x, w, e); break;
    case Tile::kS: launch_fwd<CfgS>(a, x, w, e); break;
    case Tile::kThinN: launch_fwd<CfgThinN>(a, x, w, e); break;
    case Tile::kThinM: launch_fwd<CfgThinM>(a, x, w, e); break;
  }
}

void conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  check_shape(s);
  const ConvArgs a = make_args(s);
  if (a.NHW == 0 || a.C == 0) return;
  const ThinPath thin =
      choose_thin(s.K, s.R, s.S, s.stride, s.pad, s.W, aligned16(dy) && aligned16(dx));
  if (thin != ThinPath::kNone) {
    thin_backward_data(s, thin, dy, w, dx);
    return;
  }
  const ConvOut e = make_conv_out(dx, nullptr, a.NHW, a.C, a.HW);
  switch (pick_tile(a.NHW, a.C, 1)) {
    case Tile::kL: launch_dgrad<CfgL>(a, dy, w, e); break;
    case Tile::kS: launch_dgrad<CfgS>(a, dy, w, e); break;
    case Tile::kThinN: launch_dgrad<CfgThinN>(a, dy, w, e); break;
    case Tile::kThinM: launch_dgrad<CfgThinM>(a, dy, w, e); break;
  }
}

void conv2d_backward_params(const Conv2dShape& s, const float* x, const float* dy, float* dw,
                            float* db) {
  check_shape(s);
  const ConvArgs a = make_args(s);
  if (a.NPQ == 0 || a.K == 0) return;  // nothing to add
  const ThinPath thin =
      choose_thin(s.K, s.R, s.S, s.stride, s.pad, s.W, aligned16(x) && aligned16(dy));
  if (thin != ThinPath::kNone) {
    float* ws = scratch().get(thin_params_workspace(s, thin));
    thin_backward_params(s, thin, x, dy, dw, db, ws);
    return;
  }
  if (a.CRS > 0) {
    const int kt = ktiles_of(a.NPQ);
    int splits = 1, tps = kt;
    choose_splits(a.K, a.CRS, kt, splits, tps);
    const long long count = (long long)a.K * a.CRS;
    float* ws = splits > 1 ? scratch().get(size_t(splits) * size_t(count)) : nullptr;
    const MatOut e = splits > 1 ? make_mat_out(ws, a.CRS, count, a.K, a.CRS, false)
                                : make_mat_out(dw, a.CRS, 0, a.K, a.CRS, true);
    switch (pick_tile(a.K, a.CRS, splits)) {
      case Tile::kL: launch_wgrad<CfgL>(a, x, dy, splits, tps, e); break;
      case Tile::kS: launch_wgrad<CfgS>(a, x, dy, splits, tps, e); break;
      case Tile::kThinN: launch_wgrad<CfgThinN>(a, x, dy, splits, tps, e); break;
      case Tile::kThinM: launch_wgrad<CfgThinM>(a, x, dy, splits, tps, e); break;
    }
    if (splits > 1) {
      const long long blocks = std::min<long long>((count + 255) / 256, 4096);
      splitk_reduce_kernel<<<unsigned(blocks), 256>>>(ws, splits, count, dw);
      HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_params (split-K reduce)");
    }
  }
  if (db) {
    bias_grad_kernel<<<unsigned(a.K), kBiasThreads>>>(a, dy, db);
    HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_params (bias)");
  }
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
          const float* b, int ldb, float* c, int ldc, bool accumulate) {
  if (m < 0 || n < 0 || k < 0)
    throw RuntimeError(str("implicit gemm: negative size m=", m, " n=", n, " k=", k));
  check_extent("gemm m", m);
  check_extent("gemm n", n);
  check_extent("gemm k", k);
  if (lda < std::max(1, trans_a ? m : k) || ldb < std::max(1, trans_b ? k : n) ||
      ldc < std::max(1, n))
    throw RuntimeError(str("implicit gemm: leading dimension too small (m=", m, " n=", n, " k=", k,
                           " lda=", lda, " ldb=", ldb, " ldc=", ldc, ", trans_a=", trans_a,
                           " trans_b=", trans_b, ")"));
  if (m == 0 || n == 0 || (k == 0 && accumulate)) return;
  const MatOut e = make_mat_out(c, ldc, 0, m, n, accumulate);
  switch (pick_tile(m, n, 1)) {
    case Tile::kL: launch_gemm<CfgL>(trans_a, trans_b, m, n, k, a, lda, b, ldb, e); break;
    case Tile::kS: launch_gemm<CfgS>(trans_a, trans_b, m, n, k, a, lda, b, ldb, e); break;
    case Tile::kThinN: launch_gemm<CfgThinN>(trans_a, trans_b, m, n, k, a, lda, b, ldb, e); break;
    case Tile::kThinM: launch_gemm<CfgThinM>(trans_a, trans_b, m, n, k, a, lda, b, ldb, e); break;
  }
}

}  // namespace implicit
}  // namespace hpmc::gpu
