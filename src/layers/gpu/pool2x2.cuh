// pool2x2.cuh — the 2×2 max-pool window's choice, shared by the MaxPool2D
// kernels (simple_layers.cu) and the convolution that pools in its own
// epilogue (implicit_thin_input_kernels.cuh), so that both pick the same
// element: the CPU's scan (layers/cpu/maxpool2d_ops.h), unrolled.
#pragma once

#include <cuda_runtime.h>

namespace hpmc::gpu {

// Position (0..3, row-major) of the first maximum of the 2×2 window (a, b / c, d),
// or of its first NaN.
__device__ __forceinline__ int argmax2x2(float a, float b, float c, float d) {
  if (isnan(a)) return 0;
  int best = 0;
  float bv = a;
  if (isnan(b)) return 1;
  if (b > bv) bv = b, best = 1;
  if (isnan(c)) return 2;
  if (c > bv) bv = c, best = 2;
  if (isnan(d)) return 3;
  if (d > bv) best = 3;
  return best;
}

__device__ __forceinline__ float pick4(int i, float a, float b, float c, float d) {
  return i == 0 ? a : i == 1 ? b : i == 2 ? c : d;
}

// A pooled window's code, one byte: the position of its maximum (bits 0-1)
// and bit 2 set when that maximum is not > 0 (a ReLU before the pool gives it
// no gradient). The backward from codes (maxpool2x2_backward_codes) writes
// 0 + dy at the position, 0 elsewhere: the bits of the pool's backward.
constexpr unsigned char kPoolNotPositive = 4;

__device__ __forceinline__ unsigned char pool_code(int pos, float max) {
  return (unsigned char)(pos | (max > 0.0f ? 0 : kPoolNotPositive));
}

}  // namespace hpmc::gpu
