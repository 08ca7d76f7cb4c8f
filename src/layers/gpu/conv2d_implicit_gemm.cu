// conv2d_implicit_gemm.cu — the "im2col" family (namespace hpmc::gpu::implicit):
// Conv2D forward / backward as implicit GEMMs, and the plain GEMM of the
// Linear layers, on one exact-FP32 engine (implicit_gemm_core.cuh): FFMA only,
// no TF32, no tensor cores, no floating-point atomics.
//
// ---- mappings (x NCHW, w KCRS, y NKPQ) ------------------------------------------
// forward          GEMM_M = N·P·Q (m = (n,p,q)), GEMM_N = K, GEMM_K = C·R·S
//                  A[m][k] = x[n][c][p·st−pad+r][q·st−pad+s] (0 outside),
//                  B[k][ko] = w[ko][c][r][s]
//                  y[n][ko][p][q] = Σ + b[ko]   (overwritten; float4 stores along (p,q))
// backward_data    GEMM_M = N·H·W (m = (n,h,w)), GEMM_N = C, GEMM_K = K·R·S
//                  A[m][k] = dy[n][ko][p][q] with p = (h+pad−r)/st, q = (w+pad−s)/st when both
//                  divide exactly and lie in [0,P)×[0,Q), else 0;  B[k][c] = w[ko][c][r][s]
//                  dx[n][c][h][w] = Σ (overwritten). With st > 1 most A entries are such
//                  structural zeros (3/4 at st = 2): correct, not optimal.
// backward_params  GEMM_M = K, GEMM_N = C·R·S, GEMM_K = N·P·Q (n·PQ + p·Q + q)
//                  A[ko][k] = dy[n][ko][p][q], B[k][crs] = x[n][c][p·st−pad+r][q·st−pad+s]
//                  dw[ko][crs] += Σ;  db[ko] += Σ dy  (separate deterministic kernel)
//                  Columns channel-major (crs = c·RS + r·S + s; WgradBLoader keeps per-row
//                  tables) or, when the tile's BN divides C, tap-major (n' = rs·C + c:
//                  a block's columns share one tap, so one in-range test per thread and
//                  k-tile; WgradTapBLoader). The same sums, permuted: TapWOut or
//                  splitk_reduce_taps_kernel put column n' back at dw[ko][c][rs].
// gemm             C[m×n] (= or +=) op(A)·op(B), row-major, leading dimensions lda/ldb/ldc;
//                  the transposes select the loaders' thread mappings (4 instantiations).
// The im2col matrix is never materialised: each loader computes its addresses on
// the fly and copies straight into shared memory (cp.async).
//
// ---- two GEMM_K orders for forward and backward_data --------------------------------
// channel-major  k = c·RS + r·S + s (ko·RS + r·S + s): any shape. Each element
//                decodes its k by multiply-high division (implicit_fastdiv.h) and
//                tests its own tap: ~20 integer instructions per element.
// tap-major      k = (r·S + s)·C + c ((r·S + s)·K + ko): forward when C % 8 == 0 and
//                K % 4 == 0, backward_data when stride = 1, K % 8 == 0 and C % 4 == 0
//                (tap_major_*, implicit_plan.h). A k-tile of 8 then lies in one tap,
//                so a row's in-range test is made once per tap and the elements only
//                step by 8·H·W along the channels (TapALoader): ~4 instructions per
//                element, no division. B is the weight tensor re-laid out per call
//                by weight_taps_kernel into wt[(rs·C + c)·K + ko] (forward) or
//                wt[(rs·K + ko)·C + c] (backward_data), read 16 bytes at a time; wt
//                lives in the workspace. The order is a function of the shape only,
//                so it changes the bits only from one shape to another.
//
// ---- tiles (BM×BN×BK, per-thread TM×TN, threads; all 4-stage cp.async pipelines) ---
// classic engine (implicit_gemm_core.cuh):
//   L      128×128×8, 8×8, 256 threads, 2 blocks/SM   the workhorse for large M and N
//   M      128× 64×8, 8×4, 256 threads, 2 blocks/SM   twice the blocks of L (GEMM_N = 128
//                                                      at batch 64 would leave SMs idle)
//   S       64× 64×8, 4×4, 256 threads, 2 blocks/SM   small problems: 4× the blocks of L
//   ThinN  128× 16×8, 4×4, 128 threads, 4 blocks/SM   GEMM_N ≤ 32 (C = 3, conv1's dw: 27)
//   ThinM   16×128×8, 4×4, 128 threads, 4 blocks/SM   GEMM_M ≤ 32 (weight grad of K = 3)
// wide engine (implicit_gemm_wide.cuh: warp-tiled, 64×64 warp tiles, register
// fragments double-buffered; 8×16 per thread with lanes along m, else 16×8):
//   WN     128×256×8, 8 warps, 1 block/SM   (benchmark variant)
//   WM     256×128×8, 8 warps, 1 block/SM   (benchmark variant)
//   WQ     128×128×8, 4 warps, 2 blocks/SM  (benchmark variant)
//   WL     128×128×8, 8 warps of 64×32 (8×8 per thread), 2 blocks/SM: L's tile on
//          the wide engine; large forward and backward-data products
// Heuristic, per call (choose_conv_tile, implicit_plan.h): WL for the forward and
// backward-data passes with reductions of ≥ 32 k-tiles per slice for which WN or
// WM would fill ≥ 85% of their waves at one block per SM with ≤ 1/8 padding
// (the rule WN and WM were chosen by, until WL measured faster on every such
// CIFAR pass); else choose_tile: the thin tiles for GEMM_N or GEMM_M ≤ 16, then
// ≤ 32; else whichever of L, M, S leaves the busiest SM the least work at their
// measured rates. The weight gradient and the plain GEMM use choose_tile only.
// The tile choice changes no bit of any result (the note in implicit_gemm_core.cuh).
//
// ---- split-K ------------------------------------------------------------------------
// blockIdx.z splits the k-tiles into `splits` contiguous ranges of `tps` tiles.
// backward_params (GEMM_K = N·P·Q long, GEMM_M·GEMM_N small): with splits = 1 the
// epilogue adds into dw directly; otherwise slice z writes its partial tile to
// workspace[z][K][CRS] (every element of every slice is written, zeros for an empty
// range) and splitk_reduce_kernel computes dw[i] = dw[i] + Σ_z ws[z][i], summing
// z = 0, 1, … in double in that fixed order. choose_splits: as many slices as fill
// one wave of 128×128 blocks at two per SM on 132 SMs, ≥ 8 k-tiles per slice, ≤ 64
// (the same count fills one wave of the wide tiles at one per SM).
// forward and backward_data, when the 128×64 tiles alone would leave SMs idle
// (conv3 at 8×8, batch 64): slices of ≥ 16 k-tiles, ≤ 8; and when a large output's
// wide blocks fill < 3/4 of the SMs (GEMM_N = 128 at batch 64: 64 blocks of 256×128)
// slices of ≥ 32 k-tiles. Each slice is written whole to workspace[z] in the
// output's layout, then splitk_out_kernel sums them in double, z ascending, adds
// the bias and writes y / dx (choose_out_splits).
// Split plans are functions of the shape only (kPlanSMs = 132 whatever the device),
// so the bits do not depend on the device, the tile configuration or the run.
// db: where the split weight gradient's last column tile has room (channel-major
// columns, C·R·S not a multiple of BN: conv1's 27 of 32), an extra GEMM column of
// ones (WgradBLoader), so that its slices hold Σ dy per channel (FP32 FMA chains,
// then the slices summed in double by splitk_reduce_bias_kernel); otherwise one
// block per output channel, each thread summing a fixed strided subset of float4
// pieces in double, then a fixed shared-memory tree.
// The workspace is a grow-only, cached cudaMalloc'd buffer (default stream only).
//
// ---- thin convolutions ----------------------------------------------------------------
// K ≤ 4 output channels (choose_thin, implicit_plan.h) skip the GEMM engine for the
// kernels of conv2d_thin.cu, in all three passes; they share the workspace below.
//
// ---- files -------------------------------------------------------------------------
// implicit_gemm_core.cuh    the tiled, multi-stage, register-blocked main loop, the
//                           async copies, the matrix loaders and the row-major epilogue
// implicit_gemm_wide.cuh    the warp-tiled main loop with 8×16 thread tiles
// implicit_conv_kernels.cuh the conv loaders and epilogue, and every __global__ kernel
// implicit_plan.h           tile choice, split-K plans, GEMM_K order (pure host code,
//                           unit-tested)
// implicit_conv.h           the GEMM path with an explicit plan (tests, benchmark)
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
#include "layers/gpu/implicit_conv.h"
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
  if (s.R >= (1 << 15) || s.S >= (1 << 15))  // the weight-gradient loader packs r, s in 16 bits
    throw RuntimeError(str("implicit conv2d: filter ", s.R, "x", s.S,
                           " is outside the supported range (each side < 32768)"));
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

ConvOut make_conv_out(float* out, const float* bias, long long M, int Nch, int plane,
                      long long split_stride, bool relu = false) {
  ConvOut e{};
  e.out = out;
  e.bias = bias;
  e.split_stride = split_stride;
  e.M = int(M);
  e.Nch = Nch;
  e.plane = plane;
  e.fplane = FastDiv(plane);
  e.vec = plane % 4 == 0 && aligned16(out);
  e.relu = relu;
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

// Calls f with a value of the tile configuration's type: the classic tiles
// (the plain GEMM's), or every tile (the convolutions').
template <class F>
void with_tile(Tile t, F&& f) {
  switch (t) {
    case Tile::kL: f(CfgL{}); return;
    case Tile::kM: f(CfgM{}); return;
    case Tile::kS: f(CfgS{}); return;
    case Tile::kThinN: f(CfgThinN{}); return;
    case Tile::kThinM: f(CfgThinM{}); return;
    default: break;
  }
  throw RuntimeError("implicit GEMM: the wide tiles run convolutions only");
}

template <class F>
void with_conv_tile(Tile t, F&& f) {
  switch (t) {
    case Tile::kWN: f(CfgWN{}); return;
    case Tile::kWM: f(CfgWM{}); return;
    case Tile::kWQ: f(CfgWQ{}); return;
    case Tile::kWL: f(CfgWL{}); return;
    default: with_tile(t, f);
  }
}

// Dynamic shared memory of a launch: the wide engine's stages (implicit_gemm_wide.cuh).
template <class Cfg>
constexpr size_t dyn_smem() {
  if constexpr (Cfg::kWide) return Cfg::kSmemBytes;
  else return 0;
}

// A kernel asking for more than the default 48 KB of dynamic shared memory is
// allowed it once per device before its first launch.
template <auto Kernel>
void allow_smem(size_t bytes) {
  if (bytes <= 48 * 1024) return;
  static std::atomic<uint64_t> done{0};  // bit d: device d
  int dev = 0;
  HPMC_CUDA_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = dev >= 0 && dev < 64 ? uint64_t(1) << dev : 0;
  if (bit && (done.load(std::memory_order_relaxed) & bit)) return;
  HPMC_CUDA_CHECK(
      cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  done.fetch_or(bit, std::memory_order_relaxed);
}

size_t round4(size_t n) { return (n + 3) / 4 * 4; }  // keeps what follows 16-byte aligned

unsigned grid_stride_blocks(long long count) {
  return unsigned(std::max<long long>(1, std::min<long long>((count + 255) / 256, 4096)));
}

// wt = w re-laid out for a tap-major pass (weight_taps_kernel).
void relayout_weights(const ConvArgs& a, const float* w, bool for_dgrad, float* wt) {
  weight_taps_kernel<<<grid_stride_blocks((long long)a.K * a.CRS), 256>>>(w, a.K, a.C, a.RS,
                                                                          for_dgrad, wt);
  HPMC_CUDA_LAUNCH_CHECK(for_dgrad ? "implicit conv2d backward_data (weight re-layout)"
                                   : "implicit conv2d forward (weight re-layout)");
}

// out = Σ of the split slices (+ bias), for forward and backward_data.
void reduce_out_slices(const float* ws, int splits, long long count, int plane, int Nch,
                       const float* bias, bool relu, float* out, const char* what) {
  splitk_out_kernel<<<grid_stride_blocks(count), 256>>>(ws, splits, count, plane, Nch, bias, relu,
                                                        out);
  HPMC_CUDA_LAUNCH_CHECK(what);
}

}  // namespace

// ---- planned GEMM path (implicit_conv.h) -------------------------------------------------

int conv_ktiles(const Conv2dShape& s, ConvPass pass) {
  switch (pass) {
    case ConvPass::kForward: return ktiles_of((long long)s.C * s.R * s.S);
    case ConvPass::kBackwardData: return ktiles_of((long long)s.K * s.R * s.S);
    case ConvPass::kWeightGrad: return ktiles_of((long long)s.N * s.P * s.Q);
  }
  return 1;
}

namespace {

// GEMM_M and GEMM_N of the pass.
void gemm_extents(const Conv2dShape& s, ConvPass pass, long long& M, long long& N) {
  switch (pass) {
    case ConvPass::kForward: M = (long long)s.N * s.P * s.Q, N = s.K; return;
    case ConvPass::kBackwardData: M = (long long)s.N * s.H * s.W, N = s.C; return;
    case ConvPass::kWeightGrad: M = s.K, N = (long long)s.C * s.R * s.S; return;
  }
}

bool tap_applies(const Conv2dShape& s, ConvPass pass, Tile t) {
  if (pass == ConvPass::kForward) return tap_major_forward(s.C, s.K);
  if (pass == ConvPass::kBackwardData) return tap_major_backward_data(s.stride, s.C, s.K);
  return tap_major_weight_grad(s.C, t);
}

// The plan's slices cover the pass's k-tiles exactly, none empty.
void check_plan(const Conv2dShape& s, ConvPass pass, const ConvPlan& p) {
  const int kt = std::max(conv_ktiles(s, pass), 1);
  if (p.splits < 1 || p.tps < 1 || (long long)(p.splits - 1) * p.tps >= kt ||
      (long long)p.splits * p.tps < kt || p.splits > 65535)
    throw RuntimeError(str("implicit conv2d: bad split plan (", p.splits, " slices of ", p.tps,
                           " k-tiles for ", kt, ")"));
  if (p.tap && !tap_applies(s, pass, p.tile))
    throw RuntimeError("implicit conv2d: the tap-major mapping does not apply to this shape"
                       " and tile");
}

}  // namespace

ConvPlan plan_conv(const Conv2dShape& s, ConvPass pass) {
  long long M = 0, N = 0;
  gemm_extents(s, pass, M, N);
  const int kt = conv_ktiles(s, pass);
  ConvPlan p;
  if (pass == ConvPass::kWeightGrad) choose_splits(M, N, kt, p.splits, p.tps);
  else choose_out_splits(M, N, kt, p.splits, p.tps);
  p.tile = choose_conv_tile(M, N, p.splits, p.tps, sm_count(),
                            pass == ConvPass::kWeightGrad ? s.C : 0);
  p.tap = tap_applies(s, pass, p.tile);
  return p;
}

ConvPlan make_conv_plan(const Conv2dShape& s, ConvPass pass, Tile tile, int splits, bool tap) {
  const int kt = std::max(conv_ktiles(s, pass), 1);
  ConvPlan p;
  p.tile = tile;
  split_plan(splits, kt, 1, 65535, p.splits, p.tps);
  p.tap = tap;
  check_plan(s, pass, p);
  return p;
}

void conv_forward_planned(const Conv2dShape& s, const ConvPlan& p, const float* x,
                          const float* w, const float* b, float* y, bool relu) {
  check_shape(s);
  const ConvArgs a = make_args(s);
  if (a.NPQ == 0 || a.K == 0) return;
  check_plan(s, ConvPass::kForward, p);
  const long long count = a.NPQ * a.K;
  const size_t wt_floats = p.tap ? round4(size_t(a.K) * size_t(a.CRS)) : 0;
  const size_t slice_floats = p.splits > 1 ? size_t(p.splits) * size_t(count) : 0;
  float* ws = wt_floats + slice_floats > 0 ? scratch().get(wt_floats + slice_floats) : nullptr;
  const float* wb = w;
  if (p.tap) {
    relayout_weights(a, w, false, ws);
    wb = ws;
  }
  const ConvOut e = p.splits > 1
                        ? make_conv_out(ws + wt_floats, nullptr, a.NPQ, a.K, a.PQ, count)
                        : make_conv_out(y, b, a.NPQ, a.K, a.PQ, 0, relu);
  with_conv_tile(p.tile, [&](auto cfg) {
    using Cfg = decltype(cfg);
    const dim3 grid = grid_of<Cfg>(a.NPQ, a.K, p.splits);
    constexpr size_t smem = dyn_smem<Cfg>();
    if (p.tap) {
      allow_smem<conv_fwd_kernel<Cfg, true>>(smem);
      conv_fwd_kernel<Cfg, true><<<grid, Cfg::NT, smem>>>(a, x, wb, p.tps, e);
    } else {
      allow_smem<conv_fwd_kernel<Cfg, false>>(smem);
      conv_fwd_kernel<Cfg, false><<<grid, Cfg::NT, smem>>>(a, x, wb, p.tps, e);
    }
    HPMC_CUDA_LAUNCH_CHECK("implicit conv2d forward");
  });
  if (p.splits > 1)
    reduce_out_slices(ws + wt_floats, p.splits, count, a.PQ, a.K, b, relu, y,
                      "implicit conv2d forward (split-K sum)");
}

void conv_backward_data_planned(const Conv2dShape& s, const ConvPlan& p, const float* dy,
                                const float* w, float* dx) {
  check_shape(s);
  const ConvArgs a = make_args(s);
  if (a.NHW == 0 || a.C == 0) return;
  check_plan(s, ConvPass::kBackwardData, p);
  const long long count = a.NHW * a.C;
  const size_t wt_floats = p.tap ? round4(size_t(a.K) * size_t(a.CRS)) : 0;
  const size_t slice_floats = p.splits > 1 ? size_t(p.splits) * size_t(count) : 0;
  float* ws = wt_floats + slice_floats > 0 ? scratch().get(wt_floats + slice_floats) : nullptr;
  const float* wb = w;
  if (p.tap) {
    relayout_weights(a, w, true, ws);
    wb = ws;
  }
  const ConvOut e = p.splits > 1
                        ? make_conv_out(ws + wt_floats, nullptr, a.NHW, a.C, a.HW, count)
                        : make_conv_out(dx, nullptr, a.NHW, a.C, a.HW, 0);
  with_conv_tile(p.tile, [&](auto cfg) {
    using Cfg = decltype(cfg);
    const dim3 grid = grid_of<Cfg>(a.NHW, a.C, p.splits);
    constexpr size_t smem = dyn_smem<Cfg>();
    if (p.tap) {
      allow_smem<conv_dgrad_kernel<Cfg, true>>(smem);
      conv_dgrad_kernel<Cfg, true><<<grid, Cfg::NT, smem>>>(a, dy, wb, p.tps, e);
    } else {
      allow_smem<conv_dgrad_kernel<Cfg, false>>(smem);
      conv_dgrad_kernel<Cfg, false><<<grid, Cfg::NT, smem>>>(a, dy, wb, p.tps, e);
    }
    HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_data");
  });
  if (p.splits > 1)
    reduce_out_slices(ws + wt_floats, p.splits, count, a.HW, a.C, nullptr, false, dx,
                      "implicit conv2d backward_data (split-K sum)");
}

bool bias_column_fits(const Conv2dShape& s, const ConvPlan& p) {
  const long long crs = (long long)s.C * s.R * s.S;
  return p.splits > 1 && !p.tap && tiles(crs + 1, tile_bn(p.tile)) == tiles(crs, tile_bn(p.tile));
}

void conv_weight_grad_planned(const Conv2dShape& s, const ConvPlan& p, const float* x,
                              const float* dy, float* dw, float* db) {
  check_shape(s);
  const ConvArgs a = make_args(s);
  if (a.NPQ == 0 || a.K == 0 || a.CRS == 0) return;  // nothing to add
  check_plan(s, ConvPass::kWeightGrad, p);
  if (db && !bias_column_fits(s, p))
    throw RuntimeError(
        "implicit conv2d: this weight-gradient plan has no room for the bias column");
  // The slices' row length: C·R·S, plus the bias column when db is asked for.
  const long long ld = a.CRS + (db ? 1 : 0), count = (long long)a.K * ld;
  float* ws = p.splits > 1 ? scratch().get(size_t(p.splits) * size_t(count)) : nullptr;
  // Split slices go to the workspace, in the tap-major column order with p.tap.
  const MatOut e = p.splits > 1 ? make_mat_out(ws, ld, count, a.K, int(ld), false)
                                : make_mat_out(dw, a.CRS, 0, a.K, a.CRS, true);
  with_conv_tile(p.tile, [&](auto cfg) {
    using Cfg = decltype(cfg);
    const dim3 grid = grid_of<Cfg>(a.K, ld, p.splits);
    constexpr size_t smem = dyn_smem<Cfg>();
    if (!p.tap) {
      allow_smem<conv_wgrad_kernel<Cfg, false, MatOut>>(smem);
      conv_wgrad_kernel<Cfg, false, MatOut><<<grid, Cfg::NT, smem>>>(a, x, dy, p.tps, e,
                                                                     db != nullptr);
    } else if (p.splits > 1) {
      allow_smem<conv_wgrad_kernel<Cfg, true, MatOut>>(smem);
      conv_wgrad_kernel<Cfg, true, MatOut><<<grid, Cfg::NT, smem>>>(a, x, dy, p.tps, e, false);
    } else {
      TapWOut t{};
      t.dw = dw;
      t.K = a.K;
      t.C = a.C;
      t.RS = a.RS;
      t.CRS = a.CRS;
      t.fC = FastDiv(a.C);
      allow_smem<conv_wgrad_kernel<Cfg, true, TapWOut>>(smem);
      conv_wgrad_kernel<Cfg, true, TapWOut><<<grid, Cfg::NT, smem>>>(a, x, dy, p.tps, t, false);
    }
    HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_params (weights)");
  });
  if (p.splits > 1) {
    if (db)
      splitk_reduce_bias_kernel<<<grid_stride_blocks(count), 256>>>(ws, p.splits, a.K, a.CRS, dw,
                                                                    db);
    else if (p.tap)
      splitk_reduce_taps_kernel<<<grid_stride_blocks(count), 256>>>(ws, p.splits, count, a.C,
                                                                    a.RS, dw);
    else splitk_reduce_kernel<<<grid_stride_blocks(count), 256>>>(ws, p.splits, count, dw);
    HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_params (split-K reduce)");
  }
}

}  // namespace implicit_detail

namespace implicit {

using namespace implicit_detail;

namespace {

void forward(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y,
             bool relu) {
  check_shape(s);
  if ((long long)s.N * s.P * s.Q == 0 || s.K == 0) return;
  const ThinPath thin =
      choose_thin(s.K, s.R, s.S, s.stride, s.pad, s.W, aligned16(x) && aligned16(y));
  if (thin != ThinPath::kNone) {
    thin_forward(s, thin, x, w, b, y);
    if (relu) {  // the thin kernels have no ReLU of their own: a pass over y
      const long long count = (long long)s.N * s.K * s.P * s.Q;
      relu_inplace_kernel<<<grid_stride_blocks(count), 256>>>(y, count);
      HPMC_CUDA_LAUNCH_CHECK("implicit conv2d forward (fused ReLU)");
    }
    return;
  }
  conv_forward_planned(s, plan_conv(s, ConvPass::kForward), x, w, b, y, relu);
}

}  // namespace

void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* b,
                    float* y) {
  forward(s, x, w, b, y, false);
}

void conv2d_forward_relu(const Conv2dShape& s, const float* x, const float* w, const float* b,
                         float* y) {
  forward(s, x, w, b, y, true);
}

void conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  check_shape(s);
  if ((long long)s.N * s.H * s.W == 0 || s.C == 0) return;
  const ThinPath thin =
      choose_thin(s.K, s.R, s.S, s.stride, s.pad, s.W, aligned16(dy) && aligned16(dx));
  if (thin != ThinPath::kNone) {
    thin_backward_data(s, thin, dy, w, dx);
    return;
  }
  conv_backward_data_planned(s, plan_conv(s, ConvPass::kBackwardData), dy, w, dx);
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
  const ConvPlan p = plan_conv(s, ConvPass::kWeightGrad);
  // db as the GEMM's extra column where it fits in the last tile's padding
  // (conv1 of the CIFAR autoencoder: 27 → 28 of 32): no second pass over dy.
  if (a.CRS > 0 && db && bias_column_fits(s, p)) {
    conv_weight_grad_planned(s, p, x, dy, dw, db);
    return;
  }
  if (a.CRS > 0) conv_weight_grad_planned(s, p, x, dy, dw);
  if (db) {
    const bool vec = a.PQ % 4 == 0 && aligned16(dy);
    bias_grad_kernel<<<unsigned(a.K), kBiasThreads>>>(a, dy, vec, FastDiv(vec ? a.PQ / 4 : a.PQ),
                                                       db);
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
  with_tile(pick_tile(m, n, 1), [&](auto cfg) {
    using Cfg = decltype(cfg);
    const dim3 grid = grid_of<Cfg>(m, n, 1);
    if (trans_a && trans_b) gemm_kernel<Cfg, true, true><<<grid, Cfg::NT>>>(m, n, k, a, lda, b, ldb, e);
    else if (trans_a) gemm_kernel<Cfg, true, false><<<grid, Cfg::NT>>>(m, n, k, a, lda, b, ldb, e);
    else if (trans_b) gemm_kernel<Cfg, false, true><<<grid, Cfg::NT>>>(m, n, k, a, lda, b, ldb, e);
    else gemm_kernel<Cfg, false, false><<<grid, Cfg::NT>>>(m, n, k, a, lda, b, ldb, e);
    HPMC_CUDA_LAUNCH_CHECK("implicit gemm");
  });
}

}  // namespace implicit
}  // namespace hpmc::gpu
