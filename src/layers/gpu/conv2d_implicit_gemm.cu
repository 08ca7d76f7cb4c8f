// conv2d_implicit_gemm.cu — the "im2col" family (namespace hpmc::gpu::implicit):
// Conv2D forward / backward as implicit GEMMs, and the plain GEMM of the
// Linear layers. In training.precision fp32 on exact-FP32 engines
// (implicit_gemm_core.cuh, implicit_gemm_wide.cuh): FFMA only, no TF32, no
// tensor cores, no floating-point atomics. In tf32 and bf16 on tensor cores
// ("precision" below). Never floating-point atomics.
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
//                  In fp32, with HPMC_GEMM_LARGE=auto, large products (m, n ≥ 128
//                  and m·n·k ≥ 2^27) run on the large-GEMM engine instead; with 1,
//                  every product does (gemm_large.h). In tf32 and bf16 every product
//                  runs on the tensor-core engine (gemm_tc.h, split-K where the
//                  tiles leave SMs idle), whatever its size: the precision rounds
//                  every product's operands, and its tiles beat the FFMA engines
//                  even where a 128×128 tile is mostly padding.
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
// The forward and weight gradient of a 3×3 pad-1 (in bf16 also 5×5 pad-2)
// convolution with 1–4 input channels and K > 4 (thin_input_applies,
// implicit_plan.h: an image model's first layer) run on kernels of their own
// (implicit_thin_input_kernels.cuh; in bf16 on tensor cores): the weight
// gradient reads each pixel's dy once for 256 output channels, its slices
// summed by thin_input_reduce_kernel.
// The fold of a thin convolution (K ≤ 4; 3×3 pad 1 or 5×5 pad 2) has kernels of
// its own too (upconv_thin_*, implicit_upconv_kernels.cuh; described there).
//
// ---- upsample fold (implicit::upconv_*, implicit_upconv_kernels.cuh) ------------------
// A nearest ×2 upsample followed by a 3×3 pad-1 stride-1 convolution: output pixel
// (2i+py, 2j+px) reads only the 3×3 low-resolution pixels around (i, j), and of
// them only a 2×2 window per parity p = (py, px), with filter taps summed where
// two upsampled pixels copy the same low-resolution one. So each parity is a
// 2×2 convolution of x_low with summed filters Wc_p, and the three passes are
// GEMMs over the low-resolution pixels with 4 taps instead of 9:
//   forward         per parity (blockIdx.z): GEMM_M = N·h·w, GEMM_N = K, GEMM_K = 4·C
//                   (tap-major), written to y[n][ko][2i+py][2j+px] (FoldOut)
//   backward_data   GEMM_M = N·h·w, GEMM_N = C, GEMM_K = 16·K: for each parity and
//                   tap the output pixel that read (i, j) — the upsample's backward
//                   (the sum over each 2×2 block) included; a ReLU's mask optional
//   backward_params per parity: GEMM_M = K, GEMM_N = 4·C, GEMM_K = N·h·w; the
//                   4·splits slices go to the workspace and upconv_wgrad_reduce_kernel
//                   adds, for each 3×3 tap, the one parity tap it landed in, in double
// Wc_p is computed per call from w (upconv_weights_kernel: sums of 1, 2 or 4
// weights in double, rounded once). Every product is an FP32 FMA; the results
// differ from the unfolded passes by rounding (the forward and backward_data
// multiply by a rounded sum where the unfolded pass adds two products; the
// weight gradient adds the same products in another order).

// ---- precision (core/precision.h: current_precision, set by the layer) ----------------
// fp32        the engines above, bit for bit as they always were.
// tf32, bf16  every GEMM-engine launch (the three passes, the upsample fold, the
//             plain GEMM) runs its configuration's tensor-core stand-in (TcOf,
//             and GatherOf's for the channel-major gathers,
//             implicit_conv_kernels.cuh; implicit_gemm_tc.cuh): the same tile,
//             plan, loaders and epilogue, each operand rounded to tf32 or bf16 as
//             it is read from shared memory, products summed in FP32 by mma.sync.
//             Large plain products (gemm_large.h's rule) run on gemm_tc.h's engine.
//             In bf16 a tap-major forward with C % 32 == 0, a tap-major
//             backward_data with K % 32 == 0 and a weight gradient with C % 128
//             == 0 and K % 32 == 0 (ConvPlan::nhwc, implicit_plan.h's nhwc_*),
//             and the GEMM fold's passes on the same terms (upconv_nhwc_*) run
//             instead on the channels-last kernels (implicit_nhwc_kernels.cuh,
//             implicit_upconv_nhwc_kernels.cuh; conv_nhwc, upconv_nhwc_* below):
//             the operands converted to NHWC bf16 and the weights to bf16 rows
//             of k by passes of their own (dy once for both backward passes
//             inside an implicit::SharedDy), then 16-byte copies and ldmatrix
//             fragments; the same bits as the plan on the FP32-stage engine
//             where the slices agree.
//             The thin kernels (K ≤ 4) and the thin fold keep FP32 products:
//             they are memory-bound, and their results are the more accurate.
//             The few-input-channel forward and weight gradient run on kernels
//             of their own, FP32 FMAs in fp32 and tf32, bf16 tensor cores in bf16
//             (implicit_thin_input_kernels.cuh). Needs compute capability 8.0
//             (check_tensor_cores refuses older GPUs with one line).
// Inputs, outputs, bias and split-K sums stay FP32 in every precision.

// ---- files -------------------------------------------------------------------------
// implicit_gemm_core.cuh    the tiled, multi-stage, register-blocked main loop, the
//                           async copies, the matrix loaders and the row-major epilogue
// implicit_gemm_wide.cuh    the warp-tiled main loop with 8×16 thread tiles
// implicit_gemm_tc.cuh      the tensor-core main loop (tf32, bf16)
// implicit_nhwc_kernels.cuh bf16's channels-last forward, backward_data and weight-gradient
//                           kernels
// implicit_upconv_nhwc_kernels.cuh the upsample fold on those kernels (bf16)
// implicit_conv_kernels.cuh the conv loaders and epilogue, and every __global__ kernel
// implicit_upconv_kernels.cuh the upsample fold's loaders, epilogue and kernels
// implicit_thin_input_kernels.cuh the few-input-channel forward and weight gradient
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
#include <cstdlib>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/precision.h"
#include "layers/conv_shape.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/conv2d_thin.h"
#include "layers/gpu/gemm_large.h"
#include "layers/gpu/gemm_tc.h"
#include "layers/gpu/implicit_fastdiv.h"
#include "layers/gpu/implicit_conv.h"
#include "layers/gpu/implicit_conv_kernels.cuh"
#include "layers/gpu/implicit_gemm_core.cuh"
#include "layers/gpu/implicit_nhwc_kernels.cuh"
#include "layers/gpu/implicit_plan.h"
#include "layers/gpu/implicit_thin_input_kernels.cuh"
#include "layers/gpu/implicit_upconv_kernels.cuh"
#include "layers/gpu/implicit_upconv_nhwc_kernels.cuh"
#include "layers/gpu/scratch.h"

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
bool aligned8(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7u) == 0; }

void check_grid(const char* what, long long gx) {
  if (gx > INT_MAX) throw RuntimeError(str(what, ": ", gx, " blocks is too many for one launch"));
}

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

template <bool ACT>
ConvOutT<ACT> conv_out_fields(float* out, const float* bias, long long M, int Nch, int plane,
                              long long split_stride, const float* mask) {
  ConvOutT<ACT> e{};
  e.out = out;
  e.bias = bias;
  e.split_stride = split_stride;
  e.M = int(M);
  e.Nch = Nch;
  e.plane = plane;
  e.fplane = FastDiv(plane);
  e.vec = plane % 4 == 0 && aligned16(out) && (!mask || aligned16(mask));
  e.mask = mask;
  return e;
}

ConvOut make_conv_out(float* out, const float* bias, long long M, int Nch, int plane,
                      long long split_stride, bool relu = false, const float* mask = nullptr) {
  ConvOut e = conv_out_fields<false>(out, bias, M, Nch, plane, split_stride, mask);
  e.act.relu = relu;
  return e;
}

// A forward's output (no split, no mask) with an activation other than none or ReLU.
ConvActOut make_conv_act_out(float* out, const float* bias, long long M, int Nch, int plane,
                             const Activation& act) {
  ConvActOut e = conv_out_fields<true>(out, bias, M, Nch, plane, 0, nullptr);
  e.act.act = act;
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

// training.precision tf32 and bf16 run on mma.sync, which needs compute
// capability 8.0; checked once per device before the first such launch.
void check_tensor_cores() {
  static std::atomic<uint64_t> ok{0};  // bit d: device d has them
  int dev = 0;
  HPMC_CUDA_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = dev >= 0 && dev < 64 ? uint64_t(1) << dev : 0;
  if (bit && (ok.load(std::memory_order_relaxed) & bit)) return;
  int major = 0, minor = 0;
  HPMC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  HPMC_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  if (major < 8)
    throw RuntimeError(str("training.precision ", precision_name(current_precision()),
                           " needs tensor cores of compute capability 8.0 or newer; GPU ", dev,
                           " is ", major, ".", minor, "; use training.precision: fp32"));
  ok.fetch_or(bit, std::memory_order_relaxed);
}

// Calls f with a value of Cfg's type in fp32, else (current_precision(),
// core/precision.h) of its tensor-core stand-in (TcOf, implicit_conv_kernels.cuh).
template <class Cfg, class F>
void with_precision(F&& f) {
  switch (current_precision()) {
    case Precision::kFp32: f(Cfg{}); return;
    case Precision::kTf32:
      check_tensor_cores();
      f(typename TcOf<Cfg, OpTf32>::type{});
      return;
    case Precision::kBf16:
      check_tensor_cores();
      f(typename TcOf<Cfg, OpBf16>::type{});
      return;
  }
  throw RuntimeError(str("implicit GEMM: unknown precision ", int(current_precision())));
}

// Calls f with a value of the tile configuration's type (with_precision): the
// classic tiles (the plain GEMM's), or every tile (the convolutions').
template <class F>
void with_tile(Tile t, F&& f) {
  switch (t) {
    case Tile::kL: with_precision<CfgL>(f); return;
    case Tile::kM: with_precision<CfgM>(f); return;
    case Tile::kS: with_precision<CfgS>(f); return;
    case Tile::kThinN: with_precision<CfgThinN>(f); return;
    case Tile::kThinM: with_precision<CfgThinM>(f); return;
    default: break;
  }
  throw RuntimeError("implicit GEMM: the wide tiles run convolutions only");
}

template <class F>
void with_conv_tile(Tile t, F&& f) {
  switch (t) {
    case Tile::kWN: with_precision<CfgWN>(f); return;
    case Tile::kWM: with_precision<CfgWM>(f); return;
    case Tile::kWQ: with_precision<CfgWQ>(f); return;
    case Tile::kWL: with_precision<CfgWL>(f); return;
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

// ---- wgmma for the channels-last kernels ---------------------------------------------
// The forward and backward_data passes of the channels-last kernels (plain and
// folded) run on wgmma (implicit_nhwc_kernels.cuh: nhwc_wg_tile) where the
// code this process runs has it: a compute capability 9.0 device and this
// file's sm_90a machine code loaded, which a probe kernel of this file says
// (a build without sm_90a, or a driver that took the sm_90 code, answers no).
// HPMC_WGMMA=0 in the environment, or set_nhwc_wgmma(0), keeps them on
// ldmatrix and mma.sync (the same products in the same order).
__global__ void wgmma_probe_kernel(int* out) { *out = HPMC_WGMMA; }

std::atomic<int> g_wgmma_forced{-1};

bool device_runs_wgmma() {
  static std::mutex mu;
  static int known[64];  // per device: 0 unknown, 1 no, 2 yes
  int dev = 0;
  HPMC_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (dev < 0 || dev >= 64) return false;
  if (known[dev] == 0) {
    cudaDeviceProp prop{};
    HPMC_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    int yes = 0;
    if (prop.major == 9 && prop.minor == 0) {
      int* flag = nullptr;
      HPMC_CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
      wgmma_probe_kernel<<<1, 1>>>(flag);
      HPMC_CUDA_LAUNCH_CHECK("wgmma probe");
      HPMC_CUDA_CHECK(cudaMemcpy(&yes, flag, sizeof(int), cudaMemcpyDeviceToHost));
      HPMC_CUDA_CHECK(cudaFree(flag));
    }
    known[dev] = yes ? 2 : 1;
  }
  return known[dev] == 2;
}

bool use_wgmma() {
  const int forced = g_wgmma_forced.load(std::memory_order_relaxed);
  if (forced == 0) return false;
  static const bool env_off = [] {
    const char* v = std::getenv("HPMC_WGMMA");
    return v && std::string(v) == "0";
  }();
  if (forced < 0 && env_off) return false;
  return device_runs_wgmma();
}

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

// db += Σ dy per output channel (bias_grad_kernel).
void add_bias_grad(const ConvArgs& a, const float* dy, float* db, const char* what) {
  const bool vec = a.PQ % 4 == 0 && aligned16(dy);
  bias_grad_kernel<<<unsigned(a.K), kBiasThreads>>>(a, dy, vec, FastDiv(vec ? a.PQ / 4 : a.PQ),
                                                     db);
  HPMC_CUDA_LAUNCH_CHECK(what);
}

// out = Σ of the split slices (+ bias), for forward and backward_data.
void reduce_out_slices(const float* ws, int splits, long long count, int plane, int Nch,
                       const float* bias, bool relu, float* out, const char* what,
                       const float* mask = nullptr) {
  if (count % 4 == 0 && plane % 4 == 0 && count / 4 <= INT_MAX && aligned16(ws) &&
      aligned16(out) && (!mask || aligned16(mask))) {
    const long long quads = count / 4;
    splitk_out4_kernel<<<grid_stride_blocks(quads), 256>>>(
        reinterpret_cast<const float4*>(ws), splits, unsigned(quads), FastDiv(plane / 4),
        FastDiv(Nch), bias, relu, reinterpret_cast<const float4*>(mask),
        reinterpret_cast<float4*>(out));
  } else {
    splitk_out_kernel<<<grid_stride_blocks(count), 256>>>(ws, splits, count, plane, Nch, bias,
                                                          relu, mask, out);
  }
  HPMC_CUDA_LAUNCH_CHECK(what);
}

// A forward's split slices summed (+ bias), then its activation: the original
// kernel for none and ReLU, splitk_out_act_kernel for the others.
void reduce_out_slices_act(const float* ws, int splits, long long count, int plane, int Nch,
                           const float* bias, const Activation& act, float* out,
                           const char* what) {
  if (act.is_plain()) {
    reduce_out_slices(ws, splits, count, plane, Nch, bias, act.kind == ActKind::kRelu, out, what);
    return;
  }
  splitk_out_act_kernel<<<grid_stride_blocks(count), 256>>>(ws, splits, count, plane, Nch, bias,
                                                            act, out);
  HPMC_CUDA_LAUNCH_CHECK(what);
}

// y = act(y) in place over an N·Nch·plane output (the epilogue of a kernel without one).
void activate_inplace(float* y, long long count, int plane, int Nch, const Activation& act,
                      const char* what) {
  if (act.is_none() || count == 0) return;
  if (act.kind == ActKind::kRelu) {
    relu_inplace_kernel<<<grid_stride_blocks(count), 256>>>(y, count);
  } else {
    act_inplace_kernel<<<grid_stride_blocks(count), 256>>>(y, count, plane, Nch, act);
  }
  HPMC_CUDA_LAUNCH_CHECK(what);
}

// A pass's bf16 operands in one launch (nhwc::prep_kernel): `in` (N images of
// cin channels × plane, NCHW FP32, cin % 32 == 0) into `out` in NHWC bf16
// when out is not null, and the weights' layout wop (nhwc::NoWeights: none).
template <class W>
void prep_operands(const float* in, int N, int cin, int plane, uint16_t* out, const W& wop,
                   const char* what) {
  namespace nh = nhwc;
  const int ptiles = (plane + nh::kToNhwcPix - 1) / nh::kToNhwcPix;
  const long long act_blocks = out ? (long long)ptiles * (cin / 32) * N : 0;
  const long long w_blocks =
      std::min<long long>((wop.count() + nh::kToNhwcThreads - 1) / nh::kToNhwcThreads, 1 << 16);
  const long long blocks = act_blocks + w_blocks;
  if (blocks == 0) return;
  check_grid(what, blocks);
  nh::prep_kernel<<<unsigned(blocks), nh::kToNhwcThreads>>>(
      in, cin, plane, ptiles, act_blocks, reinterpret_cast<uint4*>(out), wop);
  HPMC_CUDA_LAUNCH_CHECK(what);
}

// out = in in NHWC bf16 (prep_operands without weights).
void to_nhwc_bf16(const float* in, int N, int cin, int plane, uint16_t* out, const char* what) {
  prep_operands(in, N, cin, plane, out, nhwc::NoWeights{}, what);
}

// Where a pass reads an activation operand in NHWC bf16, and whether it has
// to be converted there first (convert) or is there already.
struct NhwcSlot {
  uint16_t* at;
  bool convert;
  uint16_t* target() const { return convert ? at : nullptr; }  // prep_operands' out
};

// SharedDy's state (conv2d_kernels.h): whether one lives, and the NHWC bf16
// copy of the dy it has seen, in a buffer of its own (the passes' workspace
// is reused by every launch).
struct DyCopy {
  bool scope = false, valid = false;
  const float* src = nullptr;
  int N = 0, cin = 0, plane = 0;
  uint16_t* copy = nullptr;
  Scratch buf;
};
DyCopy& dy_copy() {
  static DyCopy d;
  return d;
}

// dy (N images of cin channels × plane) in NHWC bf16: inside a SharedDy the
// scope's copy (to be converted by the first pass that asks: the caller
// converts when the slot says so, before anything reads it), else ws_copy.
NhwcSlot nhwc_dy(const float* dy, int N, int cin, int plane, uint16_t* ws_copy) {
  DyCopy& d = dy_copy();
  if (!d.scope) return {ws_copy, true};
  if (d.valid && d.src == dy && d.N == N && d.cin == cin && d.plane == plane)
    return {d.copy, false};
  d.valid = false;
  d.copy = reinterpret_cast<uint16_t*>(d.buf.get(round4((size_t(N) * cin * plane + 1) / 2)));
  d.src = dy, d.N = N, d.cin = cin, d.plane = plane;
  d.valid = true;
  return {d.copy, true};
}

}  // namespace
}  // namespace implicit_detail

namespace implicit {
// InputCopy's state (conv2d_kernels.h): the NHWC bf16 copy of the x its last
// forward converted, and which x that was.
struct InputCopy::State {
  DeviceScratch buf;
  uint16_t* copy = nullptr;
  const float* src = nullptr;
  int N = 0, C = 0, plane = 0;
  bool valid = false;
};
}  // namespace implicit

namespace implicit_detail {
namespace {

// The InputCopy of the KeepInput alive on this thread, or null.
implicit::InputCopy::State*& kept_input() {
  static thread_local implicit::InputCopy::State* k = nullptr;
  return k;
}

// A forward's x (N images of C channels × plane) in NHWC bf16, to be
// converted: inside a KeepInput, when the weight gradient's channels-last
// kernel takes the shape (nhwc_weight_grad: the fold's too), into its copy,
// else into ws_copy.
NhwcSlot nhwc_forward_x(const float* x, int N, int C, int K, int plane, uint16_t* ws_copy) {
  implicit::InputCopy::State* k = kept_input();
  if (!k || !nhwc_weight_grad(C, K)) return {ws_copy, true};
  k->valid = false;
  k->copy = reinterpret_cast<uint16_t*>(k->buf.floats(round4((size_t(N) * C * plane + 1) / 2)));
  k->src = x, k->N = N, k->C = C, k->plane = plane;
  k->valid = true;
  return {k->copy, true};
}

// A weight gradient's x in NHWC bf16: the KeepInput's copy where it is of
// this x, else ws_copy, to be converted.
NhwcSlot nhwc_wgrad_x(const float* x, int N, int C, int plane, uint16_t* ws_copy) {
  const implicit::InputCopy::State* k = kept_input();
  if (k && k->valid && k->src == x && k->N == N && k->C == C && k->plane == plane)
    return {k->copy, false};
  return {ws_copy, true};
}

// The channels-last kernels' slices: the plan's k-tiles are 8, theirs 32, so
// a slice takes ⌈tps/4⌉ of the kt32 k-tiles (the same boundaries as the plan
// on the FP32-stage engine when tps % 4 == 0).
void nhwc_slices(int kt32, const ConvPlan& p, int& tps, int& splits) {
  tps = p.splits == 1 ? kt32 : std::max(1, (p.tps + 3) / 4);
  splits = std::max(1, (kt32 + tps - 1) / tps);
}

// The refusal of an nhwc plan outside bf16 (or on a GPU without bf16 tensor cores).
void check_nhwc_precision(const char* what) {
  if (current_precision() != Precision::kBf16)
    throw RuntimeError(str(what, ": the channels-last kernel runs in training.precision bf16,"
                           " not ", precision_name(current_precision())));
  check_tensor_cores();
}

// The channels-last bf16 pass of an nhwc plan (implicit_nhwc_kernels.cuh):
// forward (dgrad false: in = x, out = y with bias b and act) or backward_data
// (in = dy, out = dx). The workspace holds the split slices, then `in` in
// NHWC bf16, then the weights as bf16 rows of k. Slices of ⌈tps/4⌉ k-tiles
// of 32 (the plan's k-tiles are 8): the same slice boundaries, and so the
// same bits as the plan on implicit_gemm_tc.cuh's engine, when tps % 4 == 0.
void conv_nhwc(const ConvArgs& a, bool dgrad, const ConvPlan& p, const float* in,
               const float* w, const float* b, const Activation& act, float* out,
               const char* what) {
  namespace nh = nhwc;
  check_nhwc_precision(what);
  const int kdim = dgrad ? a.KRS : a.CRS;
  int tps = 1, splits = 1;
  nhwc_slices(kdim / nh::kBKN, p, tps, splits);
  const long long M = dgrad ? a.NHW : a.NPQ;
  const int Nch = dgrad ? a.C : a.K, plane = dgrad ? a.HW : a.PQ;
  const int cin = dgrad ? a.K : a.C, in_plane = dgrad ? a.PQ : a.HW;
  const long long count = M * Nch, in_count = (long long)a.N * cin * in_plane;
  const long long w_count = (long long)a.K * a.CRS;
  const size_t slice_floats = splits > 1 ? round4(size_t(splits) * size_t(count)) : 0;
  const size_t in_floats = round4(size_t(in_count + 1) / 2);  // bf16 pairs
  const size_t w_floats = round4(size_t(w_count + 1) / 2);
  float* ws = scratch().get(slice_floats + in_floats + w_floats);
  uint16_t* inh = reinterpret_cast<uint16_t*>(ws + slice_floats);
  uint16_t* wb = reinterpret_cast<uint16_t*>(ws + slice_floats + in_floats);
  const NhwcSlot slot = dgrad ? nhwc_dy(in, a.N, cin, in_plane, inh)
                             : nhwc_forward_x(in, a.N, cin, a.K, in_plane, inh);
  prep_operands(in, a.N, cin, in_plane, slot.target(),
                nh::KmajorWeightsBf16{w, a.K, a.C, a.RS, dgrad, wb}, what);
  const uint16_t* inb = slot.at;

  const dim3 grid{unsigned((M + nh::kBM - 1) / nh::kBM), unsigned((Nch + nh::kBN - 1) / nh::kBN),
                  unsigned(splits)};
  const auto launch = [&](const auto& e, auto dgrad_tag) {
    using Epi = std::decay_t<decltype(e)>;
    constexpr bool D = decltype(dgrad_tag)::value;
    if (use_wgmma()) {
      allow_smem<nh::conv_nhwc_kernel<D, Epi, true>>(nh::kWgSmemBytes);
      nh::conv_nhwc_kernel<D, Epi, true><<<grid, nh::kNT, nh::kWgSmemBytes>>>(a, inb, wb, tps, e);
    } else {
      allow_smem<nh::conv_nhwc_kernel<D, Epi>>(nh::kSmemBytes);
      nh::conv_nhwc_kernel<D, Epi><<<grid, nh::kNT, nh::kSmemBytes>>>(a, inb, wb, tps, e);
    }
    HPMC_CUDA_LAUNCH_CHECK(what);
  };
  if (dgrad) {
    launch(splits > 1 ? make_conv_out(ws, nullptr, M, Nch, plane, count)
                      : make_conv_out(out, nullptr, M, Nch, plane, 0),
           std::true_type{});
    if (splits > 1) reduce_out_slices(ws, splits, count, plane, Nch, nullptr, false, out, what);
    return;
  }
  if (splits > 1) launch(make_conv_out(ws, nullptr, M, Nch, plane, count), std::false_type{});
  else if (act.is_plain())
    launch(make_conv_out(out, b, M, Nch, plane, 0, act.kind == ActKind::kRelu),
           std::false_type{});
  else launch(make_conv_act_out(out, b, M, Nch, plane, act), std::false_type{});
  if (splits > 1) reduce_out_slices_act(ws, splits, count, plane, Nch, b, act, out, what);
}

// A weight gradient's operands in NHWC bf16, in the workspace after its
// slice_floats floats of split slices, converted now where they are not
// already: x (N images of C × x_plane) through nhwc_wgrad_x (a KeepInput's
// copy), dy (K × dy_plane) through nhwc_dy (a SharedDy's).
struct NhwcOperands {
  float* ws;
  const uint16_t* x;
  const uint16_t* dy;
};
NhwcOperands nhwc_wgrad_operands(size_t slice_floats, const float* x, int N, int C, int x_plane,
                                 const float* dy, int K, int dy_plane, const char* what) {
  const size_t x_floats = round4((size_t(N) * C * x_plane + 1) / 2);
  const size_t dy_floats = round4((size_t(N) * K * dy_plane + 1) / 2);
  float* ws = scratch().get(slice_floats + x_floats + dy_floats);
  uint16_t* xh = reinterpret_cast<uint16_t*>(ws + slice_floats);
  uint16_t* dyh = reinterpret_cast<uint16_t*>(ws + slice_floats + x_floats);
  const NhwcSlot xs = nhwc_wgrad_x(x, N, C, x_plane, xh), ds = nhwc_dy(dy, N, K, dy_plane, dyh);
  if (xs.convert) to_nhwc_bf16(x, N, C, x_plane, xs.at, what);
  if (ds.convert) to_nhwc_bf16(dy, N, K, dy_plane, ds.at, what);
  return {ws, xs.at, ds.at};
}

// dw += the slices of a tap-major weight gradient (splitk_reduce_taps_kernel).
void reduce_taps(const ConvArgs& a, const float* ws, int splits, float* dw) {
  const long long count = (long long)a.K * a.CRS;
  const long long tiles = (long long)((a.C + kTapTile - 1) / kTapTile) *
                          ((a.RS + kTapTile - 1) / kTapTile);
  if (tiles > INT_MAX) throw RuntimeError("implicit conv2d: too many split-K reduce tiles");
  for (long long ko0 = 0; ko0 < a.K; ko0 += 65535) {
    const unsigned ks = unsigned(std::min<long long>(65535, a.K - ko0));
    splitk_reduce_taps_kernel<<<dim3(unsigned(tiles), ks), kTapTile * kTapRows>>>(
        ws, splits, count, a.C, a.RS, ko0, dw);
    HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_params (split-K reduce, taps)");
  }
}

// dw += the weight gradient of an nhwc plan (conv_nhwc_wgrad_kernel): x and
// dy converted to NHWC bf16 into the workspace after the split slices; one
// slice adds into dw itself (as TapWOut does), more are summed in double by
// splitk_reduce_taps_kernel. Slices of ⌈tps/4⌉ k-tiles of 32 pixels.
void conv_nhwc_wgrad(const ConvArgs& a, const ConvPlan& p, const float* x, const float* dy,
                     float* dw) {
  namespace nh = nhwc;
  const char* what = "implicit conv2d backward_params (channels-last bf16)";
  check_nhwc_precision(what);
  int tps = 1, splits = 1;
  nhwc_slices(int((a.NPQ + nh::kBKN - 1) / nh::kBKN), p, tps, splits);
  const long long count = (long long)a.K * a.CRS;
  const size_t slice_floats = splits > 1 ? round4(size_t(splits) * size_t(count)) : 0;
  const NhwcOperands o = nhwc_wgrad_operands(slice_floats, x, a.N, a.C, a.HW, dy, a.K, a.PQ, what);
  float* ws = o.ws;
  const dim3 grid{unsigned((a.K + nh::kBM - 1) / nh::kBM), unsigned(a.CRS / nh::kBN),
                  unsigned(splits)};
  allow_smem<nh::conv_nhwc_wgrad_kernel>(nh::kSmemBytes);
  nh::conv_nhwc_wgrad_kernel<<<grid, nh::kNT, nh::kSmemBytes>>>(a, o.x, o.dy, tps,
                                                                splits > 1 ? ws : dw, splits == 1);
  HPMC_CUDA_LAUNCH_CHECK(what);
  if (splits > 1) reduce_taps(a, ws, splits, dw);
}

}  // namespace

bool nhwc_wgmma() { return use_wgmma(); }
void set_nhwc_wgmma(int mode) { g_wgmma_forced.store(mode < 0 ? -1 : mode ? 1 : 0); }

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

bool nhwc_applies(const Conv2dShape& s, ConvPass pass) {
  if (pass == ConvPass::kForward) return nhwc_forward(s.C, s.K);
  if (pass == ConvPass::kBackwardData) return nhwc_backward_data(s.stride, s.C, s.K);
  return nhwc_weight_grad(s.C, s.K);
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
  if (p.nhwc && !(p.tap && nhwc_applies(s, pass)))
    throw RuntimeError("implicit conv2d: the channels-last kernel does not apply to this shape"
                       " (tap-major, 32 channels a k-tile)");
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
  p.nhwc = p.tap && current_precision() == Precision::kBf16 && nhwc_applies(s, pass);
  return p;
}

ConvPlan make_conv_plan(const Conv2dShape& s, ConvPass pass, Tile tile, int splits, bool tap,
                        bool nhwc) {
  const int kt = std::max(conv_ktiles(s, pass), 1);
  ConvPlan p;
  p.tile = tile;
  split_plan(splits, kt, 1, 65535, p.splits, p.tps);
  p.tap = tap;
  p.nhwc = nhwc;
  check_plan(s, pass, p);
  return p;
}

void conv_forward_planned(const Conv2dShape& s, const ConvPlan& p, const float* x,
                          const float* w, const float* b, float* y, const Activation& act) {
  check_shape(s);
  const ConvArgs a = make_args(s);
  if (a.NPQ == 0 || a.K == 0) return;
  check_plan(s, ConvPass::kForward, p);
  if (p.nhwc) {
    conv_nhwc(a, false, p, x, w, b, act, y, "implicit conv2d forward (channels-last bf16)");
    return;
  }
  const long long count = a.NPQ * a.K;
  const size_t wt_floats = p.tap ? round4(size_t(a.K) * size_t(a.CRS)) : 0;
  const size_t slice_floats = p.splits > 1 ? size_t(p.splits) * size_t(count) : 0;
  float* ws = wt_floats + slice_floats > 0 ? scratch().get(wt_floats + slice_floats) : nullptr;
  const float* wb = w;
  if (p.tap) {
    relayout_weights(a, w, false, ws);
    wb = ws;
  }
  // The epilogue: a split's slices without bias or activation (the sum adds
  // them); else ConvOut for none and ReLU, ConvActOut for any other activation.
  const auto launch = [&](const auto& e) {
    using Epi = std::decay_t<decltype(e)>;
    with_conv_tile(p.tile, [&](auto cfg) {
      using Cfg = decltype(cfg);
      const dim3 grid = grid_of<Cfg>(a.NPQ, a.K, p.splits);
      constexpr size_t smem = dyn_smem<Cfg>();
      if (p.tap) {
        allow_smem<conv_fwd_kernel<Cfg, true, Epi>>(smem);
        conv_fwd_kernel<Cfg, true, Epi><<<grid, Cfg::NT, smem>>>(a, x, wb, p.tps, e);
      } else {
        using G = typename GatherOf<Cfg>::type;
        allow_smem<conv_fwd_kernel<G, false, Epi>>(smem);
        conv_fwd_kernel<G, false, Epi><<<grid, G::NT, smem>>>(a, x, wb, p.tps, e);
      }
      HPMC_CUDA_LAUNCH_CHECK("implicit conv2d forward");
    });
  };
  if (p.splits > 1) launch(make_conv_out(ws + wt_floats, nullptr, a.NPQ, a.K, a.PQ, count));
  else if (act.is_plain())
    launch(make_conv_out(y, b, a.NPQ, a.K, a.PQ, 0, act.kind == ActKind::kRelu));
  else launch(make_conv_act_out(y, b, a.NPQ, a.K, a.PQ, act));
  if (p.splits > 1)
    reduce_out_slices_act(ws + wt_floats, p.splits, count, a.PQ, a.K, b, act, y,
                          "implicit conv2d forward (split-K sum)");
}

void conv_backward_data_planned(const Conv2dShape& s, const ConvPlan& p, const float* dy,
                                const float* w, float* dx) {
  check_shape(s);
  const ConvArgs a = make_args(s);
  if (a.NHW == 0 || a.C == 0) return;
  check_plan(s, ConvPass::kBackwardData, p);
  if (p.nhwc) {
    conv_nhwc(a, true, p, dy, w, nullptr, Activation::none(), dx,
              "implicit conv2d backward_data (channels-last bf16)");
    return;
  }
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
      using G = typename GatherOf<Cfg>::type;
      allow_smem<conv_dgrad_kernel<G, false>>(smem);
      conv_dgrad_kernel<G, false><<<grid, G::NT, smem>>>(a, dy, wb, p.tps, e);
    }
    HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_data");
  });
  if (p.splits > 1)
    reduce_out_slices(ws + wt_floats, p.splits, count, a.HW, a.C, nullptr, false, dx,
                      "implicit conv2d backward_data (split-K sum)");
}

bool bias_column_fits(const Conv2dShape& s, const ConvPlan& p) {
  // On tensor cores the column's dy would be rounded: the bias gradient, a
  // reduction, stays FP32 there (add_bias_grad).
  if (current_precision() != Precision::kFp32) return false;
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
  if (p.nhwc) {
    conv_nhwc_wgrad(a, p, x, dy, dw);
    return;
  }
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
      reduce_taps(a, ws, p.splits, dw);
    else splitk_reduce_kernel<<<grid_stride_blocks(count), 256>>>(ws, p.splits, count, dw);
    HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_params (split-K reduce)");
  }
}

// ---- few input channels (implicit_thin_input_kernels.cuh) ------------------------------
// The weight gradient's slices come from the shape alone (kPlanSMs): one block
// of 256 output channels per SM, at least 4 units (of 32 pixels) a slice.
namespace {

// Whether the few-input-channel kernels take s's forward and weight gradient
// in precision p (5×5 in bf16 only: implicit_plan.h).
bool thin_input_takes(const Conv2dShape& s, Precision p) {
  return thin_input_applies(s.C, s.K, s.R, s.S, s.stride, s.pad, p == Precision::kBf16);
}

// pooled: dy is not formed; a.gp, a.code, a.qh, a.qw, a.relu say where it comes from.
void thin_input_weight_grad(const Conv2dShape& s, const float* x, const float* dy, float* dw,
                            float* db, const TiArgs* pooled = nullptr) {
  TiArgs a = pooled ? *pooled : TiArgs{};
  a.N = s.N, a.C = s.C, a.H = s.H, a.W = s.W, a.K = s.K;
  a.HW = s.H * s.W;
  a.CHW = s.C * a.HW;
  a.ld = s.R * s.S * s.C + (db ? 1 : 0);
  const int cb = (s.W + kTiCols - 1) / kTiCols;
  a.units = int((long long)s.N * s.H * cb);  // ≤ N·H·W, which check_shape bounds
  a.fCb = FastDiv(cb);
  a.fH = FastDiv(s.H);
  // In bf16 on thin_input_wgrad_tc_kernel (bf16 tensor cores; pooled, two
  // blocks an SM: twice the slices, pooled or not, so that the pooled form
  // keeps the formed one's bits), elsewhere on thin_input_wgrad_kernel (FP32
  // FMAs). The slices depend on the shape and the precision only.
  const bool tc = current_precision() == Precision::kBf16;
  if (tc) check_tensor_cores();
  HPMC_CHECK(s.R == 3 || tc, "implicit conv2d: the FP32 few-input-channel kernels are 3x3 only");
  const long long gx = (s.K + kTiKB - 1) / kTiKB;
  long long want = std::max(1ll, (long long)kPlanSMs * (tc ? 2 : 1) / gx);
  want = std::min(want, std::max(1ll, (long long)a.units / 4));
  const int per = int((a.units + want - 1) / want), slices = (a.units + per - 1) / per;
  float* ws = scratch().get(size_t(slices) * size_t(s.K) * size_t(a.ld));
  constexpr size_t smem = thin_input_smem_bytes();
  const dim3 grid{unsigned(gx), unsigned(slices)};
  const auto launch_tc = [&](auto pooled_tag, auto r_tag) {
    constexpr bool P = decltype(pooled_tag)::value;
    constexpr int R = decltype(r_tag)::value;
    constexpr size_t tc_smem = sizeof(TiTcSmem<P, R>);
    allow_smem<thin_input_wgrad_tc_kernel<P, R>>(tc_smem);
    thin_input_wgrad_tc_kernel<P, R><<<grid, 32 * kTiTcWarps, tc_smem>>>(a, x, dy, per,
                                                                        db != nullptr, ws);
  };
  const auto launch = [&](auto pooled_tag) {
    constexpr bool P = decltype(pooled_tag)::value;
    if (tc) {
      if (s.R == 5) launch_tc(pooled_tag, std::integral_constant<int, 5>{});
      else launch_tc(pooled_tag, std::integral_constant<int, 3>{});
    } else {
      allow_smem<thin_input_wgrad_kernel<P>>(smem);
      thin_input_wgrad_kernel<P><<<grid, 2 * kTiKG * s.C, smem>>>(a, x, dy, per, db != nullptr,
                                                                ws);
    }
  };
  if (pooled) launch(std::true_type{});
  else launch(std::false_type{});
  HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_params (few input channels)");
  const long long count = (long long)s.K * a.ld;
  check_grid("implicit conv2d backward_params (few input channels, slice sum)", (count + 31) / 32);
  thin_input_reduce_kernel<<<unsigned((count + 31) / 32), 32 * kTiReduceWarps>>>(
      ws, slices, s.K, s.R * s.S * s.C, a.ld, dw, db);
  HPMC_CUDA_LAUNCH_CHECK("implicit conv2d backward_params (few input channels, slice sum)");
}

// The forward's sizes; pooled: the quads are the pool's whole windows.
TfArgs thin_input_fwd_args(const Conv2dShape& s, bool pooled, const float* y) {
  TfArgs a{};
  a.N = s.N, a.H = s.H, a.W = s.W, a.K = s.K;
  a.HW = s.H * s.W;
  a.CHW = s.C * a.HW;
  a.qh = pooled ? s.H / 2 : (s.H + 1) / 2;
  a.qw = pooled ? s.W / 2 : (s.W + 1) / 2;
  a.quads = int((long long)s.N * a.qh * a.qw);  // ≤ N·H·W, which check_shape bounds
  a.fqw = FastDiv(std::max(a.qw, 1));
  a.fqh = FastDiv(std::max(a.qh, 1));
  a.vec = s.W % 2 == 0 && aligned8(y);
  return a;
}

// In bf16 on thin_input_fwd_tc_kernel (bf16 tensor cores), elsewhere on
// thin_input_fwd_kernel (FP32 FMAs).
template <TfOut OUT, class Act>
void launch_thin_input_fwd(const Conv2dShape& s, const TfArgs& a, const float* x, const float* w,
                           const float* b, Act act, float* y, unsigned char* code) {
  if (current_precision() == Precision::kBf16) {
    const auto blocks_x = [&](int qr) {
      return (long long)s.N * ((a.qh + qr - 1) / qr) * ((a.qw + kTcQC - 1) / kTcQC);
    };
    const long long gy = (s.K + kTcKB - 1) / kTcKB;
    const int qr = blocks_x(kTcQR) * gy < 2LL * sm_count() ? 1 : kTcQR;
    const long long gx = blocks_x(qr);
    check_grid("implicit conv2d forward (few input channels, bf16)", gx);
    const dim3 grid{unsigned(gx), unsigned(gy)};
    const auto launch = [&](auto r_tag, auto c_tag) {
      constexpr int R = decltype(r_tag)::value, C = decltype(c_tag)::value;
      constexpr size_t smem = sizeof(TcSmem<R, C>);
      allow_smem<thin_input_fwd_tc_kernel<R, C, OUT>>(smem);
      thin_input_fwd_tc_kernel<R, C, OUT><<<grid, kTcThreads, smem>>>(a, qr, x, w, b, act, y,
                                                                      code);
    };
    const auto with_c = [&](auto r_tag) {
      switch (s.C) {
        case 1: launch(r_tag, std::integral_constant<int, 1>{}); break;
        case 2: launch(r_tag, std::integral_constant<int, 2>{}); break;
        case 3: launch(r_tag, std::integral_constant<int, 3>{}); break;
        default: launch(r_tag, std::integral_constant<int, 4>{}); break;
      }
    };
    if (s.R == 5) with_c(std::integral_constant<int, 5>{});
    else with_c(std::integral_constant<int, 3>{});
    HPMC_CUDA_LAUNCH_CHECK("implicit conv2d forward (few input channels, bf16)");
    return;
  }
  HPMC_CHECK(s.R == 3, "implicit conv2d: the FP32 few-input-channel forward is 3x3 only");
  const long long gx = (a.quads + kTfQuads - 1) / kTfQuads;
  check_grid("implicit conv2d forward (few input channels)", gx);
  const dim3 grid(unsigned(gx), unsigned((s.K + kTfKB - 1) / kTfKB));
  switch (s.C) {
    case 1: thin_input_fwd_kernel<1, OUT><<<grid, kTfThreads>>>(a, x, w, b, act, y, code); break;
    case 2: thin_input_fwd_kernel<2, OUT><<<grid, kTfThreads>>>(a, x, w, b, act, y, code); break;
    case 3: thin_input_fwd_kernel<3, OUT><<<grid, kTfThreads>>>(a, x, w, b, act, y, code); break;
    default: thin_input_fwd_kernel<4, OUT><<<grid, kTfThreads>>>(a, x, w, b, act, y, code); break;
  }
  HPMC_CUDA_LAUNCH_CHECK("implicit conv2d forward (few input channels)");
}

// y = act(conv(x, w) + b) on thin_input_fwd_kernel (thin_input_applies).
void thin_input_forward(const Conv2dShape& s, const float* x, const float* w, const float* b,
                        float* y, const Activation& act) {
  const TfArgs a = thin_input_fwd_args(s, false, y);
  if (a.quads == 0) return;
  if (act.is_none() || act.kind == ActKind::kRelu) {
    EpiAct<false> e{};
    e.relu = act.kind == ActKind::kRelu;
    launch_thin_input_fwd<TfOut::kPlain>(s, a, x, w, b, e, y, nullptr);
  } else {
    EpiAct<true> e{};
    e.act = act;
    launch_thin_input_fwd<TfOut::kAct>(s, a, x, w, b, e, y, nullptr);
  }
}

}  // namespace

// ---- the upsample fold (implicit_upconv_kernels.cuh) ------------------------------------

namespace {

UpArgs make_up_args(const Conv2dShape& s) {
  UpArgs a{};
  a.N = s.N, a.C = s.C, a.K = s.K, a.H = s.H, a.W = s.W;
  a.h = s.H / 2, a.w = s.W / 2;
  a.hw = a.h * a.w;
  a.HW = s.H * s.W;
  a.M = int((long long)s.N * a.hw);
  a.Mp = int((long long)s.N * a.h * ((a.w + 1) / 2));
  a.fhw = FastDiv(a.hw);
  a.fw = FastDiv(a.w);
  a.fh = FastDiv(a.h);
  a.fwp = FastDiv((a.w + 1) / 2);
  const int bands = (a.h + kThinFoldBand - 1) / kThinFoldBand;
  a.Mu = int((long long)s.N * bands * ((a.w + 1) / 2));
  a.fbands = FastDiv(bands);
  return a;
}

// The shape checks of every GEMM fold pass; throws where it does not apply.
UpArgs checked_up_args(const Conv2dShape& s) {
  check_shape(s);
  if (!upconv_gemm_applies(s))
    throw RuntimeError(str("implicit conv2d: the upsample fold does not apply to C=", s.C, " K=", s.K,
                           " ", s.R, "x", s.S, " stride=", s.stride, " pad=", s.pad, " on ", s.H,
                           "x", s.W, " (it needs 3x3, stride 1, pad 1, an even map, C % 8 == 0, "
                           "K % 8 == 0 and K > ", kThinMaxK, ")"));
  check_extent("16·K·C", 16ll * s.K * s.C);
  check_extent("4·K·C", 4ll * s.K * s.C);
  return make_up_args(s);
}

// GEMM_M, GEMM_N of the pass (per parity for forward and the weight gradient).
void up_extents(const Conv2dShape& s, ConvPass pass, long long& M, long long& N) {
  const long long low = (long long)s.N * (s.H / 2) * (s.W / 2);
  switch (pass) {
    case ConvPass::kForward: M = low, N = s.K; return;
    case ConvPass::kBackwardData: M = low, N = s.C; return;
    case ConvPass::kWeightGrad: M = s.K, N = 4ll * s.C; return;
  }
}

bool upconv_nhwc_applies(const Conv2dShape& s, ConvPass pass) {
  if (pass == ConvPass::kForward) return upconv_nhwc_forward(s);
  if (pass == ConvPass::kBackwardData) return upconv_nhwc_backward_data(s);
  return upconv_nhwc_weight_grad(s);
}

void check_upconv_plan(const Conv2dShape& s, ConvPass pass, const ConvPlan& p) {
  const int kt = std::max(upconv_ktiles(s, pass), 1);
  const int parities = pass == ConvPass::kBackwardData ? 1 : 4;
  if (p.splits < 1 || p.tps < 1 || (long long)(p.splits - 1) * p.tps >= kt ||
      (long long)p.splits * p.tps < kt || (long long)p.splits * parities > 65535)
    throw RuntimeError(str("implicit conv2d: bad upsample-fold split plan (", p.splits,
                           " slices of ", p.tps, " k-tiles for ", kt, ")"));
  if (p.nhwc && !upconv_nhwc_applies(s, pass))
    throw RuntimeError(str("implicit conv2d: the channels-last upsample fold does not apply to"
                           " C=", s.C, " K=", s.K, " (it needs whole k-tiles of 32 channels;"
                           " the weight gradient C % 128 == 0 and K % 32 == 0)"));
}

// The parities' summed filters (upconv_weights_kernel) into out[16·K·C].
void fold_weights(const UpArgs& a, const float* w, bool for_dgrad, float* out) {
  upconv_weights_kernel<<<grid_stride_blocks((long long)a.K * a.C), 256>>>(w, a.K, a.C,
                                                                           for_dgrad, out);
  HPMC_CUDA_LAUNCH_CHECK(for_dgrad ? "upsample fold backward_data (summed filters)"
                                   : "upsample fold forward (summed filters)");
}

// The forward's epilogue without split-K (FoldOut or FoldActOut), for y.
template <class E>
E fold_out(const UpArgs& a, float* y, const float* b) {
  E e{};
  e.out = y;
  e.bias = b;
  e.M = a.M;
  e.K = a.K;
  e.w = a.w;
  e.W = a.W;
  e.HW = a.HW;
  e.fhw = a.fhw;
  e.fw = a.fw;
  e.row4 = a.w % 4 == 0;
  return e;
}

// y = act(the sum of the forward's split slices (parity-major, ws) + b).
void fold_out_reduce(const float* ws, int splits, const UpArgs& a, const float* b,
                     const Activation& act, float* y) {
  const long long count = (long long)a.N * a.K * a.HW;
  if (act.is_plain())
    upconv_out_reduce_kernel<<<grid_stride_blocks(count), 256>>>(ws, splits, a, b,
                                                                 act.kind == ActKind::kRelu, y);
  else
    upconv_out_reduce_act_kernel<<<grid_stride_blocks(count), 256>>>(ws, splits, a, b, act, y);
  HPMC_CUDA_LAUNCH_CHECK("upsample fold forward (split-K sum)");
}

// bf16's channels-last fold (implicit_upconv_nhwc_kernels.cuh), one function a
// pass: the workspace holds the split slices, then the input in NHWC bf16
// (x_low, or dy), then the summed filters as bf16 rows of k.
void upconv_nhwc_forward(const UpArgs& a, const ConvPlan& p, const float* x_low,
                         const float* w, const float* b, float* y, const Activation& act) {
  namespace nh = nhwc;
  const char* what = "upsample fold forward (channels-last bf16)";
  check_nhwc_precision(what);
  int tps = 1, splits = 1;
  nhwc_slices(4 * a.C / nh::kBKN, p, tps, splits);
  const long long slab = (long long)a.M * a.K;  // one parity's slice
  const size_t slice_floats = splits > 1 ? round4(4 * size_t(splits) * size_t(slab)) : 0;
  const size_t x_floats = round4((size_t(a.N) * a.C * a.hw + 1) / 2);
  const size_t w_floats = round4((16 * size_t(a.K) * a.C + 1) / 2);
  float* ws = scratch().get(slice_floats + x_floats + w_floats);
  uint16_t* xh = reinterpret_cast<uint16_t*>(ws + slice_floats);
  uint16_t* wb = reinterpret_cast<uint16_t*>(ws + slice_floats + x_floats);
  const NhwcSlot xs = nhwc_forward_x(x_low, a.N, a.C, a.K, a.hw, xh);
  prep_operands(x_low, a.N, a.C, a.hw, xs.target(), nh::FoldWeightsBf16{w, a.K, a.C, false, wb},
                what);
  const dim3 grid{unsigned((a.M + nh::kBM - 1) / nh::kBM), unsigned((a.K + nh::kBN - 1) / nh::kBN),
                  unsigned(4 * splits)};
  const auto launch = [&](const auto& e) {
    using Epi = std::decay_t<decltype(e)>;
    if (use_wgmma()) {
      allow_smem<nh::upconv_nhwc_kernel<false, Epi, true>>(nh::kWgSmemBytes);
      nh::upconv_nhwc_kernel<false, Epi, true>
          <<<grid, nh::kNT, nh::kWgSmemBytes>>>(a, xs.at, wb, splits, tps, e);
    } else {
      allow_smem<nh::upconv_nhwc_kernel<false, Epi>>(nh::kSmemBytes);
      nh::upconv_nhwc_kernel<false, Epi><<<grid, nh::kNT, nh::kSmemBytes>>>(a, xs.at, wb,
                                                                            splits, tps, e);
    }
    HPMC_CUDA_LAUNCH_CHECK(what);
  };
  if (splits > 1) {
    launch(make_conv_out(ws, nullptr, a.M, a.K, a.hw, slab));
    fold_out_reduce(ws, splits, a, b, act, y);
  } else if (act.is_plain()) {
    FoldOut e = fold_out<FoldOut>(a, y, b);
    e.act.relu = act.kind == ActKind::kRelu;
    launch(e);
  } else {
    FoldActOut e = fold_out<FoldActOut>(a, y, b);
    e.act.act = act;
    launch(e);
  }
}

void upconv_nhwc_backward_data(const UpArgs& a, const ConvPlan& p, const float* dy,
                               const float* w, const float* relu_mask, float* dx_low) {
  namespace nh = nhwc;
  const char* what = "upsample fold backward_data (channels-last bf16)";
  check_nhwc_precision(what);
  int tps = 1, splits = 1;
  nhwc_slices(16 * a.K / nh::kBKN, p, tps, splits);
  const long long count = (long long)a.M * a.C;
  const size_t slice_floats = splits > 1 ? round4(size_t(splits) * size_t(count)) : 0;
  const size_t dy_floats = round4((size_t(a.N) * a.K * a.HW + 1) / 2);
  const size_t w_floats = round4((16 * size_t(a.K) * a.C + 1) / 2);
  float* ws = scratch().get(slice_floats + dy_floats + w_floats);
  uint16_t* dyh = reinterpret_cast<uint16_t*>(ws + slice_floats);
  uint16_t* wb = reinterpret_cast<uint16_t*>(ws + slice_floats + dy_floats);
  const NhwcSlot ds = nhwc_dy(dy, a.N, a.K, a.HW, dyh);
  prep_operands(dy, a.N, a.K, a.HW, ds.target(), nh::FoldWeightsBf16{w, a.K, a.C, true, wb},
                what);
  const uint16_t* dyb = ds.at;
  const ConvOut e = splits > 1
                        ? make_conv_out(ws, nullptr, a.M, a.C, a.hw, count)
                        : make_conv_out(dx_low, nullptr, a.M, a.C, a.hw, 0, false, relu_mask);
  const dim3 grid{unsigned((a.M + nh::kBM - 1) / nh::kBM), unsigned((a.C + nh::kBN - 1) / nh::kBN),
                  unsigned(splits)};
  if (use_wgmma()) {
    allow_smem<nh::upconv_nhwc_kernel<true, ConvOut, true>>(nh::kWgSmemBytes);
    nh::upconv_nhwc_kernel<true, ConvOut, true>
        <<<grid, nh::kNT, nh::kWgSmemBytes>>>(a, dyb, wb, splits, tps, e);
  } else {
    allow_smem<nh::upconv_nhwc_kernel<true, ConvOut>>(nh::kSmemBytes);
    nh::upconv_nhwc_kernel<true, ConvOut><<<grid, nh::kNT, nh::kSmemBytes>>>(a, dyb, wb, splits,
                                                                             tps, e);
  }
  HPMC_CUDA_LAUNCH_CHECK(what);
  if (splits > 1)
    reduce_out_slices(ws, splits, count, a.hw, a.C, nullptr, false, dx_low,
                      "upsample fold backward_data (split-K sum)", relu_mask);
}

void upconv_nhwc_weight_grad(const UpArgs& a, const ConvPlan& p, const float* x_low,
                             const float* dy, float* dw) {
  namespace nh = nhwc;
  const char* what = "upsample fold backward_params (channels-last bf16)";
  check_nhwc_precision(what);
  int tps = 1, splits = 1;
  nhwc_slices((a.M + nh::kBKN - 1) / nh::kBKN, p, tps, splits);
  const long long slab = 4ll * a.K * a.C;  // one parity's slice: [K][4·C]
  const size_t slice_floats = round4(4 * size_t(splits) * size_t(slab));
  const NhwcOperands o =
      nhwc_wgrad_operands(slice_floats, x_low, a.N, a.C, a.hw, dy, a.K, a.HW, what);
  float* ws = o.ws;
  const dim3 grid{unsigned((a.K + nh::kBM - 1) / nh::kBM), unsigned(4 * a.C / nh::kBN),
                  unsigned(4 * splits)};
  allow_smem<nh::upconv_nhwc_wgrad_kernel>(nh::kSmemBytes);
  nh::upconv_nhwc_wgrad_kernel<<<grid, nh::kNT, nh::kSmemBytes>>>(a, o.x, o.dy, splits, tps, ws);
  HPMC_CUDA_LAUNCH_CHECK(what);
  upconv_wgrad_reduce_kernel<<<grid_stride_blocks(9ll * a.K * a.C), 256>>>(ws, splits, a.K, a.C,
                                                                         dw);
  HPMC_CUDA_LAUNCH_CHECK("upsample fold backward_params (sum of parities and slices)");
}

}  // namespace

int upconv_ktiles(const Conv2dShape& s, ConvPass pass) {
  switch (pass) {
    case ConvPass::kForward: return ktiles_of(4ll * s.C);
    case ConvPass::kBackwardData: return ktiles_of(16ll * s.K);
    case ConvPass::kWeightGrad: return ktiles_of((long long)s.N * (s.H / 2) * (s.W / 2));
  }
  return 1;
}

// Forward: the four parities' blocks together are one GEMM of 4·M rows for the
// plain forward's split rule, and choose_tile's pick (on the H100 at batch 64,
// conv4: L 0.138 ms, WL 0.141, M 0.172; every split slower). Backward data:
// as many slices as fill two 128×128 blocks per SM on kPlanSMs SMs, of at least
// kWideMinTiles k-tiles, at most kMaxOutSplits, on WL where the slices are that
// long (conv4: WL/8 0.116 ms, WL/4 0.124, L/4 0.126, M/4 0.153). Weight
// gradient: the plain weight gradient's split rule with the four parities'
// tiles counted, choose_tile's pick (conv4: L/8 0.153 ms; WM/8 0.146, WN/8
// 0.152, L/4 0.175). hpmc_conv_bench times them all.
ConvPlan plan_upconv(const Conv2dShape& s, ConvPass pass) {
  long long M = 0, N = 0;
  up_extents(s, pass, M, N);
  const int kt = upconv_ktiles(s, pass);
  ConvPlan p;
  switch (pass) {
    case ConvPass::kForward:
      choose_out_splits(4 * M, N, kt, p.splits, p.tps);
      p.tile = choose_tile(4 * M, N, p.splits, sm_count());
      break;
    case ConvPass::kBackwardData: {
      const long long blocks = std::max(1ll, tiles(M, 128) * tiles(N, 128));
      split_plan(kWgradSplitTarget / blocks, kt, kWideMinTiles, kMaxOutSplits, p.splits, p.tps);
      p.tile = p.tps >= kWideMinTiles && M > 32 && N > 32 ? Tile::kWL
                                                           : choose_tile(M, N, p.splits, sm_count());
      break;
    }
    case ConvPass::kWeightGrad:
      choose_splits(M, 4 * N, kt, p.splits, p.tps);
      p.tile = choose_tile(M, N, 4 * p.splits, sm_count());
      break;
  }
  p.tap = true;
  p.nhwc = current_precision() == Precision::kBf16 && upconv_nhwc_applies(s, pass);
  return p;
}

ConvPlan make_upconv_plan(const Conv2dShape& s, ConvPass pass, Tile tile, int splits,
                          bool nhwc) {
  const int kt = std::max(upconv_ktiles(s, pass), 1);
  ConvPlan p;
  p.tile = tile;
  split_plan(splits, kt, 1, 65535 / 4, p.splits, p.tps);
  p.tap = true;
  p.nhwc = nhwc;
  check_upconv_plan(s, pass, p);
  return p;
}

void upconv_forward_planned(const Conv2dShape& s, const ConvPlan& p, const float* x_low,
                            const float* w, const float* b, float* y, const Activation& act) {
  const UpArgs a = checked_up_args(s);
  if (a.M == 0) return;
  check_upconv_plan(s, ConvPass::kForward, p);
  if (p.nhwc) return upconv_nhwc_forward(a, p, x_low, w, b, y, act);
  const long long slab = (long long)a.M * a.K;  // one parity's slice
  const size_t wf_floats = round4(16 * size_t(a.K) * size_t(a.C));
  const size_t slice_floats = p.splits > 1 ? 4 * size_t(p.splits) * size_t(slab) : 0;
  float* ws = scratch().get(wf_floats + slice_floats);
  fold_weights(a, w, false, ws);
  // The epilogue: FoldOut for none and ReLU, FoldActOut for any other
  // activation; a split's slices (ConvOut, no bias or activation) are summed after.
  const auto launch = [&](const auto& e, int splits) {
    using Epi = std::decay_t<decltype(e)>;
    with_conv_tile(p.tile, [&](auto cfg) {
      using Cfg = decltype(cfg);
      const dim3 grid = grid_of<Cfg>(a.M, a.K, 4 * p.splits);
      constexpr size_t smem = dyn_smem<Cfg>();
      allow_smem<upconv_fwd_kernel<Cfg, Epi>>(smem);
      upconv_fwd_kernel<Cfg, Epi><<<grid, Cfg::NT, smem>>>(a, x_low, ws, splits, p.tps, e);
      HPMC_CUDA_LAUNCH_CHECK("upsample fold forward");
    });
  };
  if (p.splits > 1) {
    launch(make_conv_out(ws + wf_floats, nullptr, a.M, a.K, a.hw, slab), p.splits);
    fold_out_reduce(ws + wf_floats, p.splits, a, b, act, y);
  } else if (act.is_plain()) {
    FoldOut e = fold_out<FoldOut>(a, y, b);
    e.act.relu = act.kind == ActKind::kRelu;
    launch(e, 1);
  } else {
    FoldActOut e = fold_out<FoldActOut>(a, y, b);
    e.act.act = act;
    launch(e, 1);
  }
}

void upconv_backward_data_planned(const Conv2dShape& s, const ConvPlan& p, const float* dy,
                                  const float* w, const float* relu_mask, float* dx_low) {
  const UpArgs a = checked_up_args(s);
  if (a.M == 0) return;
  check_upconv_plan(s, ConvPass::kBackwardData, p);
  if (p.nhwc) return upconv_nhwc_backward_data(a, p, dy, w, relu_mask, dx_low);
  const long long count = (long long)a.M * a.C;
  const size_t wd_floats = round4(16 * size_t(a.K) * size_t(a.C));
  const size_t slice_floats = p.splits > 1 ? size_t(p.splits) * size_t(count) : 0;
  float* ws = scratch().get(wd_floats + slice_floats);
  fold_weights(a, w, true, ws);
  const ConvOut e = p.splits > 1
                        ? make_conv_out(ws + wd_floats, nullptr, a.M, a.C, a.hw, count)
                        : make_conv_out(dx_low, nullptr, a.M, a.C, a.hw, 0, false, relu_mask);
  with_conv_tile(p.tile, [&](auto cfg) {
    using Cfg = decltype(cfg);
    const dim3 grid = grid_of<Cfg>(a.M, a.C, p.splits);
    constexpr size_t smem = dyn_smem<Cfg>();
    allow_smem<upconv_dgrad_kernel<Cfg>>(smem);
    upconv_dgrad_kernel<Cfg><<<grid, Cfg::NT, smem>>>(a, dy, ws, p.tps, e);
    HPMC_CUDA_LAUNCH_CHECK("upsample fold backward_data");
  });
  if (p.splits > 1)
    reduce_out_slices(ws + wd_floats, p.splits, count, a.hw, a.C, nullptr, false, dx_low,
                      "upsample fold backward_data (split-K sum)", relu_mask);
}

void upconv_weight_grad_planned(const Conv2dShape& s, const ConvPlan& p, const float* x_low,
                                const float* dy, float* dw) {
  const UpArgs a = checked_up_args(s);
  if (a.M == 0) return;  // nothing to add
  check_upconv_plan(s, ConvPass::kWeightGrad, p);
  if (p.nhwc) return upconv_nhwc_weight_grad(a, p, x_low, dy, dw);
  const long long slab = 4ll * a.K * a.C;  // one parity's slice: [K][4·C]
  float* ws = scratch().get(4 * size_t(p.splits) * size_t(slab));
  const MatOut e = make_mat_out(ws, 4ll * a.C, slab, a.K, 4 * a.C, false);
  with_conv_tile(p.tile, [&](auto cfg) {
    using Cfg = decltype(cfg);
    const dim3 grid = grid_of<Cfg>(a.K, 4ll * a.C, 4 * p.splits);
    constexpr size_t smem = dyn_smem<Cfg>();
    allow_smem<upconv_wgrad_kernel<Cfg>>(smem);
    upconv_wgrad_kernel<Cfg><<<grid, Cfg::NT, smem>>>(a, x_low, dy, p.splits, p.tps, e);
    HPMC_CUDA_LAUNCH_CHECK("upsample fold backward_params (weights)");
  });
  upconv_wgrad_reduce_kernel<<<grid_stride_blocks(9ll * a.K * a.C), 256>>>(ws, p.splits, a.K, a.C,
                                                                         dw);
  HPMC_CUDA_LAUNCH_CHECK("upsample fold backward_params (sum of parities and slices)");
}

// ---- the thin fold (K ≤ 4; implicit_upconv_kernels.cuh) ---------------------------------
// The weight gradient's slices come from the shape alone (kPlanSMs), so its
// bits do not depend on the device: at most 2 blocks of 8 channels per SM (one
// wave at two blocks an SM), at least 64 units (2 a lane) a slice.
namespace {

constexpr long long kThinFoldBlocks = 2 * kPlanSMs;
constexpr long long kThinFoldMinUnits = 64;

UpArgs checked_thin_args(const Conv2dShape& s) {
  check_shape(s);
  if (!upconv_thin_applies(s))
    throw RuntimeError(str("implicit conv2d: the thin upsample fold does not apply to C=", s.C,
                           " K=", s.K, " ", s.R, "x", s.S, " stride=", s.stride, " pad=", s.pad,
                           " on ", s.H, "x", s.W));
  return make_up_args(s);
}

// f(R, KC) with the filter size and output channels as constants.
template <class F>
void with_thin_rk(int R, int K, F&& f) {
  const auto with_k = [&](auto r) {
    switch (K) {
      case 1: f(r, std::integral_constant<int, 1>{}); return;
      case 2: f(r, std::integral_constant<int, 2>{}); return;
      case 3: f(r, std::integral_constant<int, 3>{}); return;
      case 4: f(r, std::integral_constant<int, 4>{}); return;
    }
    throw RuntimeError(str("implicit conv2d: thin upsample fold with K = ", K));
  };
  if (R == 3) return with_k(std::integral_constant<int, 3>{});
  if (R == 5) return with_k(std::integral_constant<int, 5>{});
  throw RuntimeError(str("implicit conv2d: thin upsample fold of a ", R, "x", R, " filter"));
}

// The packed summed filters, PT·K·C floats in the scratch buffer.
template <int R>
const float4* thin_fold_weights(const UpArgs& a, const float* w) {
  const long long count = (long long)kFoldPT<R> * a.K * a.C;
  float* ws = scratch().get(size_t(count));
  upconv_thin_weights_kernel<R><<<grid_stride_blocks(count), 256>>>(w, a.K, a.C, ws);
  HPMC_CUDA_LAUNCH_CHECK("thin upsample fold (summed filters)");
  return reinterpret_cast<const float4*>(ws);
}

}  // namespace

void thin_fold_forward(const Conv2dShape& s, const float* x_low, const float* w, const float* b,
                       float* y, const Activation& act) {
  // The kernel applies a ReLU itself; any other activation is a pass over y.
  const bool relu = act.kind == ActKind::kRelu;
  const UpArgs a = checked_thin_args(s);
  if (a.M == 0) return;
  const long long gx = (a.Mp + 31) / 32;
  check_grid("thin upsample fold forward", gx);
  const bool vec = a.w % 2 == 0 && aligned16(y);
  with_thin_rk(s.R, a.K, [&](auto r, auto kc) {
    constexpr int R = decltype(r)::value, KC = decltype(kc)::value;
    const float4* wc = thin_fold_weights<R>(a, w);
    upconv_thin_fwd_kernel<R, KC>
        <<<unsigned(gx), kThinFoldThreads>>>(a, x_low, wc, b, relu, vec, y);
  });
  HPMC_CUDA_LAUNCH_CHECK("thin upsample fold forward");
  if (!act.is_plain())
    activate_inplace(y, (long long)a.N * a.K * a.HW, a.HW, a.K, act,
                     "thin upsample fold forward (activation)");
}

void thin_fold_backward_data(const Conv2dShape& s, const float* dy, const float* w,
                             const float* relu_mask, float* dx_low) {
  const UpArgs a = checked_thin_args(s);
  if (a.M == 0) return;
  const long long gx = (a.Mp + kThinFoldThreads - 1) / kThinFoldThreads;
  const int gy = (a.C + kThinFoldChannels - 1) / kThinFoldChannels;
  check_grid("thin upsample fold backward_data", gx);
  const bool vec = a.w % 2 == 0 && aligned8(dx_low) && (!relu_mask || aligned8(relu_mask));
  with_thin_rk(s.R, a.K, [&](auto r, auto kc) {
    constexpr int R = decltype(r)::value, KC = decltype(kc)::value;
    const float4* wc = thin_fold_weights<R>(a, w);
    upconv_thin_dgrad_kernel<R, KC><<<dim3(unsigned(gx), unsigned(gy)), kThinFoldThreads>>>(
        a, dy, wc, relu_mask, vec, dx_low);
  });
  HPMC_CUDA_LAUNCH_CHECK("thin upsample fold backward_data");
}

void thin_fold_backward_params(const Conv2dShape& s, const float* x_low, const float* dy,
                               float* dw, float* db) {
  const UpArgs a = checked_thin_args(s);
  if (a.M == 0) return;  // nothing to add
  const long long gx = (a.C + kThinFoldWarps - 1) / kThinFoldWarps;
  long long want = std::max(1ll, kThinFoldBlocks / gx);  // rounded down: one wave
  want = std::min<long long>({want, std::max(1ll, (long long)a.Mu / kThinFoldMinUnits), 65535});
  const int per = int((a.Mu + want - 1) / want), slices = (a.Mu + per - 1) / per;
  const long long pt = s.R == 3 ? kFoldPT<3> : kFoldPT<5>;
  const long long stride = (pt * a.C + kThinFoldWarps) * a.K;
  float* ws = scratch().get(size_t(slices) * size_t(stride));
  check_grid("thin upsample fold backward_params", gx);
  const bool vec = a.w % 2 == 0 && aligned16(dy);
  const long long elems = (long long)s.R * s.R * a.K * a.C + a.K;
  const unsigned rblocks =
      unsigned(std::min<long long>((elems + kThinReduceThreads - 1) / kThinReduceThreads, 65535));
  with_thin_rk(s.R, a.K, [&](auto r, auto kc) {
    constexpr int R = decltype(r)::value, KC = decltype(kc)::value;
    upconv_thin_wgrad_kernel<R, KC><<<dim3(unsigned(gx), unsigned(slices)), kThinFoldThreads>>>(
        a, x_low, dy, per, vec, ws);
    HPMC_CUDA_LAUNCH_CHECK("thin upsample fold backward_params");
    upconv_thin_wgrad_reduce_kernel<R>
        <<<rblocks, kThinReduceThreads>>>(ws, slices, a.K, a.C, dw, db);
  });
  HPMC_CUDA_LAUNCH_CHECK("thin upsample fold backward_params (sum of the slices and parities)");
}

}  // namespace implicit_detail

namespace implicit {

using namespace implicit_detail;

namespace {

void forward(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y,
             const Activation& act) {
  check_shape(s);
  if ((long long)s.N * s.P * s.Q == 0 || s.K == 0) return;
  const ThinPath thin =
      choose_thin(s.K, s.R, s.S, s.stride, s.pad, s.W, aligned16(x) && aligned16(y));
  if (thin != ThinPath::kNone) {
    thin_forward(s, thin, x, w, b, y);
    // The thin kernels have no activation of their own: a pass over y.
    activate_inplace(y, (long long)s.N * s.K * s.P * s.Q, s.P * s.Q, s.K, act,
                     act.kind == ActKind::kRelu ? "implicit conv2d forward (fused ReLU)"
                                                : "implicit conv2d forward (activation)");
    return;
  }
  if (thin_input_takes(s, current_precision())) {
    thin_input_forward(s, x, w, b, y, act);
    return;
  }
  conv_forward_planned(s, plan_conv(s, ConvPass::kForward), x, w, b, y, act);
}

}  // namespace

void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* b,
                    float* y) {
  forward(s, x, w, b, y, Activation::none());
}

void conv2d_forward_act(const Conv2dShape& s, const float* x, const float* w, const float* b,
                        float* y, const Activation& act) {
  forward(s, x, w, b, y, act);
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
  if (thin_input_takes(s, current_precision())) {
    thin_input_weight_grad(s, x, dy, dw, db);
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
  if (db) add_bias_grad(a, dy, db, "implicit conv2d backward_params (bias)");
}

// Not a function of the batch: the codes' backward runs in chunks of images
// whose windows fit its 32-bit index (one image's: K·P·Q < 2^30, check_shape).
bool conv_pool_applies(const Conv2dShape& s, Precision p) {
  return thin_input_takes(s, p) && s.H >= 2 && s.W >= 2;
}

bool conv_pool_wgrad_applies(const Conv2dShape& s, Precision p) {
  return conv_pool_applies(s, p) && (s.W / 2) % 4 == 0;
}

void conv2d_forward_pool(const Conv2dShape& s, const float* x, const float* w, const float* b,
                         bool relu, float* y_pool, unsigned char* code) {
  check_shape(s);
  if (!conv_pool_applies(s, current_precision()))
    throw RuntimeError(str("implicit conv2d forward with pool: not for ", s.C, " -> ", s.K,
                           " channels, ", s.R, "x", s.S, " stride ", s.stride, " pad ", s.pad,
                           " on ", s.H, "x", s.W, " (conv_pool_applies)"));
  const TfArgs a = thin_input_fwd_args(s, true, y_pool);
  if (a.quads == 0 || s.K == 0) return;
  EpiAct<false> e{};
  e.relu = relu;
  launch_thin_input_fwd<TfOut::kPool>(s, a, x, w, b, e, y_pool, code);
}

void maxpool2x2_backward_codes(const Conv2dShape& s, const unsigned char* code,
                               const float* dy_pool, bool relu, float* dx) {
  if (!conv_pool_applies(s, current_precision()))
    throw RuntimeError("maxpool2x2_backward_codes: the shape is not conv_pool_applies'");
  check_shape(s);
  const int ch = (s.H + 1) / 2, cw = (s.W + 1) / 2;
  const long long per_image = (long long)s.K * ch * cw;  // windows, and quads of dx
  if (per_image == 0 || s.N == 0) return;
  const bool vec = s.W % 2 == 0 && aligned8(dx);
  const long long chunk = std::max(1ll, (long long)INT_MAX / per_image);  // images a launch
  const size_t pooled = size_t(s.K) * (s.H / 2) * (s.W / 2), plane = size_t(s.K) * s.H * s.W;
  for (long long n0 = 0; n0 < s.N; n0 += chunk) {
    const long long quads = std::min(chunk, s.N - n0) * per_image;
    maxpool2x2_backward_codes_kernel<<<grid_stride_blocks(quads), 256>>>(
        code + n0 * pooled, dy_pool + n0 * pooled, dx + n0 * plane, unsigned(quads), FastDiv(cw),
        FastDiv(ch), s.H, s.W, s.H / 2, s.W / 2, relu, vec);
    HPMC_CUDA_LAUNCH_CHECK("maxpool2d backward from the pooled convolution's codes");
  }
}

void conv2d_backward_params_pool(const Conv2dShape& s, const float* x, const unsigned char* code,
                                 const float* dy_pool, bool relu, float* dw, float* db) {
  check_shape(s);
  if (!conv_pool_wgrad_applies(s, current_precision()))
    throw RuntimeError("conv2d_backward_params_pool: the shape is not conv_pool_wgrad_applies'");
  if ((long long)s.N * s.H * s.W == 0 || s.K == 0) return;
  TiArgs p{};
  p.gp = dy_pool;
  p.code = code;
  p.qh = s.H / 2;
  p.qw = s.W / 2;
  p.relu = relu;
  thin_input_weight_grad(s, x, nullptr, dw, db, &p);
}

bool upconv_applies(const Conv2dShape& s) { return upconv_fold_applies(s); }

SharedDy::SharedDy() {
  DyCopy& d = dy_copy();
  if (d.scope) throw RuntimeError("implicit conv2d: a SharedDy is already alive on this thread");
  d.scope = true;
  d.valid = false;
}

SharedDy::~SharedDy() {
  DyCopy& d = dy_copy();
  d.scope = false;
  d.valid = false;
}

InputCopy::InputCopy() : state_(std::make_unique<State>()) {}
InputCopy::~InputCopy() = default;

KeepInput::KeepInput(InputCopy& copy) {
  InputCopy::State*& k = kept_input();
  if (k) throw RuntimeError("implicit conv2d: a KeepInput is already alive on this thread");
  k = copy.state_.get();
}

KeepInput::~KeepInput() { kept_input() = nullptr; }

size_t input_copy_bytes(const Conv2dShape& s, bool fold, Precision p) {
  if (p != Precision::kBf16 || !nhwc_weight_grad(s.C, s.K)) return 0;  // as nhwc_forward_x
  if (fold)
    return upconv_nhwc_forward(s) ? size_t(s.N) * s.C * (s.H / 2) * (s.W / 2) * 2 : 0;
  return nhwc_forward(s.C, s.K) ? size_t(s.N) * s.C * s.H * s.W * 2 : 0;
}

void upconv_forward(const Conv2dShape& s, const float* x_low, const float* w, const float* b,
                    float* y, const Activation& act) {
  if (upconv_thin_applies(s)) {
    thin_fold_forward(s, x_low, w, b, y, act);
    return;
  }
  upconv_forward_planned(s, plan_upconv(s, ConvPass::kForward), x_low, w, b, y, act);
}

void upconv_backward_data(const Conv2dShape& s, const float* dy, const float* w,
                          const float* relu_mask, float* dx_low) {
  if (upconv_thin_applies(s)) {
    thin_fold_backward_data(s, dy, w, relu_mask, dx_low);
    return;
  }
  upconv_backward_data_planned(s, plan_upconv(s, ConvPass::kBackwardData), dy, w, relu_mask,
                               dx_low);
}

void upconv_backward_params(const Conv2dShape& s, const float* x_low, const float* dy, float* dw,
                            float* db) {
  if (upconv_thin_applies(s)) {
    thin_fold_backward_params(s, x_low, dy, dw, db);
    return;
  }
  upconv_weight_grad_planned(s, plan_upconv(s, ConvPass::kWeightGrad), x_low, dy, dw);
  const ConvArgs a = make_args(s);
  if (db && a.NPQ > 0 && a.K > 0) add_bias_grad(a, dy, db, "upsample fold backward_params (bias)");
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
  switch (current_precision()) {  // tf32 and bf16: every product on the tensor cores (gemm_tc.h)
    case Precision::kFp32: break;
    case Precision::kTf32:
      gemm_tc::gemm(gemm_tc::Operands::kTf32, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
                    accumulate);
      return;
    case Precision::kBf16:
      gemm_tc::gemm(gemm_tc::Operands::kBf16, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
                    accumulate);
      return;
  }
  if (gemm_large::use_large(m, n, k)) {  // the shape rule, or HPMC_GEMM_LARGE (gemm_large.h)
    gemm_large::gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
    return;
  }
  const Tile t = pick_tile(m, n, 1);
  int splits = 1, tps = 1;
  choose_gemm_splits(m, n, ktiles_of(k), tile_bm(t), tile_bn(t), splits, tps);
  // With split-K each slice writes its m×n partial product to the scratch
  // (row stride n, slices 4-float aligned) and splitk_mat_kernel sums them into c.
  const long long stride = ((long long)m * n + 3) / 4 * 4;
  float* ws = splits > 1 ? scratch().get(size_t(stride) * splits) : nullptr;
  const MatOut e = splits > 1 ? make_mat_out(ws, n, stride, m, n, false)
                              : make_mat_out(c, ldc, 0, m, n, accumulate);
  with_tile(t, [&](auto cfg) {
    using Cfg = decltype(cfg);
    const dim3 grid = grid_of<Cfg>(m, n, splits);
    if (trans_a && trans_b) gemm_kernel<Cfg, true, true><<<grid, Cfg::NT>>>(m, n, k, a, lda, b, ldb, e, tps);
    else if (trans_a) gemm_kernel<Cfg, true, false><<<grid, Cfg::NT>>>(m, n, k, a, lda, b, ldb, e, tps);
    else if (trans_b) gemm_kernel<Cfg, false, true><<<grid, Cfg::NT>>>(m, n, k, a, lda, b, ldb, e, tps);
    else gemm_kernel<Cfg, false, false><<<grid, Cfg::NT>>>(m, n, k, a, lda, b, ldb, e, tps);
    HPMC_CUDA_LAUNCH_CHECK("implicit gemm");
  });
  if (splits > 1) {
    splitk_mat_kernel<<<grid_stride_blocks((long long)m * n), 256>>>(ws, splits, stride, m, n, c,
                                                                      ldc, accumulate);
    HPMC_CUDA_LAUNCH_CHECK("implicit gemm split-K sum");
  }
}

}  // namespace implicit
}  // namespace hpmc::gpu
