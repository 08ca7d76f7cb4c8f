// conv2d_kernels.h — the three families of Conv2D and GEMM kernels, as plain
// host functions (no CUDA types), all on the default stream.
//
// Layouts: x NCHW, w KCRS, y NKPQ (Conv2dShape holds the sizes). For every
// family:
//   forward          y  = conv(x, w) + b          (b may be null; y overwritten)
//   backward_data    dx = conv_transpose(dy, w)   (dx overwritten)
//   backward_params  dw += corr(x, dy), db += Σ dy (db may be null; accumulate)
//   gemm             C = A·B (+ C if accumulate); row-major, optional transposes
//
// naive   one thread per output element, straight from global memory: the GPU
//         oracle (conv2d_naive.cu, GEMM included).
// tiled   shared-memory tiles of input and weights; weight gradients reduced
//         per block, not with a global atomic per term (conv2d_tiled.cu).
// im2col  implicit GEMM (GEMM_M = N·P·Q, GEMM_N = K, GEMM_K = C·R·S forward;
//         the matching mappings for the gradients) with im2col indices
//         computed on the fly, double-buffered shared-memory tiles and
//         register blocking (conv2d_implicit_gemm.cu).
// All handle any size; no dimension need be a multiple of a tile.
#pragma once

#include <memory>

#include "core/precision.h"
#include "layers/conv_shape.h"
#include "layers/epilogue_act.h"

namespace hpmc::gpu {

#define HPMC_CONV_FAMILY(NS)                                                                   \
  namespace NS {                                                                               \
  void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* b,    \
                      float* y);                                                               \
  void conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx); \
  void conv2d_backward_params(const Conv2dShape& s, const float* x, const float* dy, float* dw, \
                              float* db);                                                      \
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,          \
            const float* b, int ldb, float* c, int ldc, bool accumulate);                      \
  }

HPMC_CONV_FAMILY(naive)
HPMC_CONV_FAMILY(tiled)
HPMC_CONV_FAMILY(implicit)

#undef HPMC_CONV_FAMILY

namespace implicit {
// forward with an activation applied to each output as it is written:
// y = act(conv(x, w) + b), act as layers/epilogue_act.h computes it (the
// activation layer's float operations), so for ReLU the bits of
// conv2d_forward then the ReLU layer. None and ReLU run the kernels of
// conv2d_forward (a ReLU flag in their epilogue); the other activations an
// instantiation of the same kernels with the descriptor in the epilogue. The
// thin kernels (K ≤ 4) have no epilogue: the activation is a pass over y. A
// convolution of 1–4 input channels (thin_input_applies) runs on its direct
// FP32 kernel (in bf16 on its tensor-core kernel), with the activation in its
// stores.
void conv2d_forward_act(const Conv2dShape& s, const float* x, const float* w, const float* b,
                        float* y, const Activation& act);

// ---- a first layer's convolution with the 2×2 max pool after it ----
// A 3×3, stride-1, pad-1 convolution of 1–4 input channels to K > 4
// (implicit_plan.h's thin_input_applies; H, W ≥ 2) runs on a direct FP32
// kernel (in bf16 on bf16 tensor cores, which take a 5×5, pad-2 one too;
// implicit_thin_input_kernels.cuh), and can pool its output in the same
// kernel: the convolution's output is never written. p: the precision the
// passes will run in (the caller's layer's; the passes read it from
// current_precision()).
bool conv_pool_applies(const Conv2dShape& s, Precision p);
// y_pool = maxpool2d 2×2 stride 2 (relu ? relu(conv(x, w) + b) : conv(x, w) + b),
// [N][K][⌊H/2⌋][⌊W/2⌋], the bits of conv2d_forward_act then the MaxPool2D
// layer; code (one byte per pooled output, same layout) records each window's
// choice for maxpool2x2_backward_codes. Throws unless conv_pool_applies(s).
void conv2d_forward_pool(const Conv2dShape& s, const float* x, const float* w, const float* b,
                         bool relu, float* y_pool, unsigned char* code);
// dx [N][K][H][W] (overwritten) = the pool's backward of dy_pool from the codes,
// with the ReLU's mask when relu: the bits of the MaxPool2D layer's backward
// (with the fused ReLU's mask) on the convolution's output.
void maxpool2x2_backward_codes(const Conv2dShape& s, const unsigned char* code,
                               const float* dy_pool, bool relu, float* dx);
// Whether conv2d_backward_params_pool takes the shape: conv_pool_applies and
// ⌊W/2⌋ % 4 == 0 (the codes' rows are whole 4-byte words).
bool conv_pool_wgrad_applies(const Conv2dShape& s, Precision p);
// dw += corr(x, dy), db += Σ dy (db may be null) for dy the input gradient
// maxpool2x2_backward_codes would write — without forming it: the weight
// gradient's kernel builds each row of dy from dy_pool and the codes as it
// stages it (implicit_thin_input_kernels.cuh). The same bits as
// maxpool2x2_backward_codes then conv2d_backward_params. Throws unless
// conv_pool_wgrad_applies(s).
void conv2d_backward_params_pool(const Conv2dShape& s, const float* x, const unsigned char* code,
                                 const float* dy_pool, bool relu, float* dw, float* db);

// ---- a nearest-neighbour ×2 upsample folded into the 3×3 convolution after it ----
// s is the convolution's shape on the upsampled input (H = 2h, W = 2w); x_low
// and dx_low are the upsample's input and input gradient, [N][C][h][w]. The
// upsampled tensor is never formed: output pixel (2i+py, 2j+px) of a 3×3 pad-1
// convolution of up(x) is a 2×2 convolution of x around (i, j) whose weights
// are sums of the 3×3 weights (rows {0}, {1,2} for py = 0; {0,1}, {2} for
// py = 1; the same along columns), so the passes do 4/9 of the multiply-adds
// (conv2d_implicit_gemm.cu, "upsample fold"). Every product is an FP32 FMA;
// the summed weights are rounded once from double; the results differ from
// conv(up(x)) by rounding only (tests/test_gpu_upconv.cpp bounds the error
// against a double reference).
//
// Whether the fold takes this convolution: implicit_detail::upconv_fold_applies
// (implicit_plan.h: stride 1, H and W even and positive, and either 3×3 pad 1
// with C % 8 == 0, K % 8 == 0 and K > 4 (the GEMM fold: the tap-major loaders)
// or 1 ≤ K ≤ 4 with any C, 3×3 pad 1 or 5×5 pad 2 (the thin fold: kernels of
// their own for an autoencoder's last layer; a 5×5 filter folds to a 3×3 one
// per parity, 9/25 of the multiply-adds, implicit_upconv_kernels.cuh)).
bool upconv_applies(const Conv2dShape& s);
// y = act(conv(up(x_low), w) + b) (as conv2d_forward_act; the thin fold
// applies a ReLU in its kernel, any other activation in a pass over y).
void upconv_forward(const Conv2dShape& s, const float* x_low, const float* w, const float* b,
                    float* y, const Activation& act);
// dx_low = up_backward(conv_transpose(dy, w)): each low-resolution pixel gets
// the sum over the 2×2 block it was copied to. relu_mask (may be null) is the
// fold's input when a ReLU precedes the upsample: dx_low = relu_mask > 0 ?
// dx_low : 0 (the ReLU's backward, run here by a fused layer, fused_spec.h).
// Overwrites dx_low.
void upconv_backward_data(const Conv2dShape& s, const float* dy, const float* w,
                          const float* relu_mask, float* dx_low);
// dw += corr(up(x_low), dy), db += Σ dy (db may be null).
void upconv_backward_params(const Conv2dShape& s, const float* x_low, const float* dy, float* dw,
                            float* db);

// ---- one channels-last copy of dy for a layer's two backward passes ----
// In bf16 the channels-last passes (weight gradient, input gradient; plain
// and folded) read dy in NHWC bf16, converted by a pass of its own. While a
// SharedDy lives, the first such pass keeps its copy in a buffer of its own
// and a later pass on the same dy (pointer and extents) reads that copy
// instead of converting again: the same bits, one conversion fewer. The
// caller must not change dy while it lives. One at a time on the thread that
// issues the work (a second throws); outside bf16 it changes nothing.
class SharedDy {
 public:
  SharedDy();
  ~SharedDy();
  SharedDy(const SharedDy&) = delete;
  SharedDy& operator=(const SharedDy&) = delete;
};

// ---- a layer's channels-last copy of a convolution's input, forward to backward ----
// In bf16 the channels-last forward (plain and folded) converts its input x
// to NHWC bf16 in a pass of its own, and the weight gradient needs the same
// x in the same form. A layer that owns an InputCopy per convolution and
// opens a KeepInput on it around that convolution's forward and again
// around its backward has the forward convert x into the copy, and the
// weight gradient read the copy instead of converting x again when it is of
// the same x (pointer and extents; else it converts as before): the same
// bits, one conversion fewer. The layer must not change x between the two
// (its backward reads x anyway, and y is the output of that forward). One
// KeepInput at a time on the thread that issues the work (a second throws);
// the thin kernels and the FP32-stage engine (every pass outside bf16's
// channels-last plans) read x as it is and ignore it. The copy is device
// memory of half x's size, held until the InputCopy goes.
class InputCopy {
 public:
  InputCopy();
  ~InputCopy();
  InputCopy(const InputCopy&) = delete;
  InputCopy& operator=(const InputCopy&) = delete;
  struct State;  // conv2d_implicit_gemm.cu

 private:
  friend class KeepInput;
  std::unique_ptr<State> state_;
};

class KeepInput {
 public:
  explicit KeepInput(InputCopy& copy);
  ~KeepInput();
  KeepInput(const KeepInput&) = delete;
  KeepInput& operator=(const KeepInput&) = delete;
};

// The most an InputCopy holds for convolution s in precision p (its forward's
// x in NHWC bf16 where a channels-last plan may take it, else 0); fold: s is
// an upsample fold's shape (conv2d_kernels.h's upconv_*), its x the low
// resolution. For Layer::workspace_bytes.
size_t input_copy_bytes(const Conv2dShape& s, bool fold, Precision p);
}  // namespace implicit

}  // namespace hpmc::gpu
