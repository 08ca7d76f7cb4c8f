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

#include "layers/conv_shape.h"

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
// forward with the ReLU that follows the layer applied to each output as it is
// written: y = relu(conv(x, w) + b), relu(v) = v < 0 ? 0 : v as the ReLU layer
// computes it, so the bits of conv2d_forward then the ReLU (layer.h,
// fuse_relu_forward).
void conv2d_forward_relu(const Conv2dShape& s, const float* x, const float* w, const float* b,
                         float* y);
}  // namespace implicit

}  // namespace hpmc::gpu
