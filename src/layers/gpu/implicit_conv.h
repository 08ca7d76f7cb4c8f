// implicit_conv.h — the GEMM path of the implicit-GEMM convolutions with an
// explicit plan (tile configuration, split-K, GEMM_K order), internal to the
// im2col family: conv2d_implicit_gemm.cu runs its public functions through
// these with plan_conv's choice; the tests force every variant on small shapes
// and the kernel benchmark (bench/conv_variants.cu) times them. No thin
// kernels here: any shape runs on the GEMM path. Default stream; y and dx
// overwritten, dw accumulated (conv2d_kernels.h).
#pragma once

#include "layers/conv_shape.h"
#include "layers/epilogue_act.h"
#include "layers/gpu/implicit_plan.h"

namespace hpmc::gpu::implicit_detail {

enum class ConvPass { kForward, kBackwardData, kWeightGrad };

struct ConvPlan {
  Tile tile = Tile::kS;
  int splits = 1;    // split-K slices (blockIdx.z)
  int tps = 1;       // k-tiles per slice: slice z covers [z·tps, min((z+1)·tps, ktiles))
  bool tap = false;  // tap-major GEMM_K (forward, backward_data; implicit_plan.h)
  // bf16 only, with tap: the channels-last kernels (implicit_nhwc_kernels.cuh,
  // and implicit_upconv_nhwc_kernels.cuh for the fold; implicit_plan.h's
  // nhwc_* and upconv_nhwc_* rules), their own 128×128 tile (tile ignored)
  // and k-tiles of 32: slices of ⌈tps/4⌉ of them.
  bool nhwc = false;
};

// Whether bf16's channels-last forward and backward_data passes (plain and
// folded) run on wgmma here: a compute capability 9.0 device running this
// build's sm_90a code, unless HPMC_WGMMA=0 is in the environment or
// set_nhwc_wgmma(0) turned it off (1: on wherever it runs, whatever the
// environment; −1: the rule again). Else on ldmatrix and mma.sync: the same
// products, summed in the same order. Tests compare both main loops.
bool nhwc_wgmma();
void set_nhwc_wgmma(int mode);
// set_nhwc_wgmma(mode) for a scope, then the automatic rule again (tests).
struct ScopedNhwcWgmma {
  explicit ScopedNhwcWgmma(int mode) { set_nhwc_wgmma(mode); }
  ~ScopedNhwcWgmma() { set_nhwc_wgmma(-1); }
  ScopedNhwcWgmma(const ScopedNhwcWgmma&) = delete;
  ScopedNhwcWgmma& operator=(const ScopedNhwcWgmma&) = delete;
};

// GEMM_K of the pass in k-tiles of 8.
int conv_ktiles(const Conv2dShape& s, ConvPass pass);

// The plan of the public functions: the split from the shape alone, the tile
// for the current device's SM count, the tap-major mapping where it applies,
// in bf16 (current_precision) the channels-last kernel where it applies.
ConvPlan plan_conv(const Conv2dShape& s, ConvPass pass);

// A forced plan: `splits` is rounded so that no slice is empty. Throws when
// tap is asked for where it does not apply (tap_major_forward / _backward_data)
// or for the weight gradient, and nhwc without tap or where it does not apply;
// the planned functions refuse an nhwc plan outside bf16.
ConvPlan make_conv_plan(const Conv2dShape& s, ConvPass pass, Tile tile, int splits, bool tap,
                        bool nhwc = false);

// act: the activation of the epilogue (conv2d_forward_act, conv2d_kernels.h).
void conv_forward_planned(const Conv2dShape& s, const ConvPlan& p, const float* x,
                          const float* w, const float* b, float* y,
                          const Activation& act = Activation::none());
void conv_backward_data_planned(const Conv2dShape& s, const ConvPlan& p, const float* dy,
                                const float* w, float* dx);
// dw += the weight gradient; db (when not null) += the bias gradient, as the
// GEMM's extra column of ones, which needs bias_column_fits.
void conv_weight_grad_planned(const Conv2dShape& s, const ConvPlan& p, const float* x,
                              const float* dy, float* dw, float* db = nullptr);
// Whether the plan's last column tile has room for the bias column: split-K,
// channel-major columns, and C·R·S + 1 columns in as many tiles as C·R·S;
// never in tf32 and bf16 (current_precision), where the bias gradient stays
// an FP32 reduction.
bool bias_column_fits(const Conv2dShape& s, const ConvPlan& p);

// ---- the upsample fold (conv2d_kernels.h, implicit::upconv_*) with an explicit plan ----
// s: the convolution's shape on the upsampled input; the GEMM fold's conditions
// (upconv_applies, K > 4) must hold — the thin fold has no plans.
// GEMMs, per pass (h×w the low resolution, four output parities (py, px)):
//   forward         per parity: M = N·h·w, N = K, K = 4·C      (blockIdx.z: parity·splits + slice)
//   backward_data   M = N·h·w, N = C, K = 16·K (parity, tap, channel)  (blockIdx.z: slice)
//   weight grad     per parity: M = K, N = 4·C, K = N·h·w      (blockIdx.z: parity·splits + slice)
// tap is ignored (every fold pass is tap-major). `splits` is rounded so that no
// slice is empty. nhwc: bf16's channels-last fold (implicit_plan.h's
// upconv_nhwc_*; plan_upconv takes it in bf16 where it applies): its own
// 128×128 tile, slices of ⌈tps/4⌉ k-tiles of 32; make_upconv_plan throws
// where it does not apply, and the planned functions outside bf16.
int upconv_ktiles(const Conv2dShape& s, ConvPass pass);
ConvPlan plan_upconv(const Conv2dShape& s, ConvPass pass);
ConvPlan make_upconv_plan(const Conv2dShape& s, ConvPass pass, Tile tile, int splits,
                          bool nhwc = false);
void upconv_forward_planned(const Conv2dShape& s, const ConvPlan& p, const float* x_low,
                            const float* w, const float* b, float* y, const Activation& act);
void upconv_backward_data_planned(const Conv2dShape& s, const ConvPlan& p, const float* dy,
                                  const float* w, const float* relu_mask, float* dx_low);
// dw += the weight gradient (no bias: upconv_backward_params adds it).
void upconv_weight_grad_planned(const Conv2dShape& s, const ConvPlan& p, const float* x_low,
                                const float* dy, float* dw);

}  // namespace hpmc::gpu::implicit_detail
