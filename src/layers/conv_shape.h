// conv_shape.h — the sizes of one 2-d convolution, shared by every backend.
//
// Layouts: input x is NCHW, weights are KCRS ([out, in, kh, kw], PyTorch's
// layout), output y is NKPQ. The struct is plain data with no dependency on
// OpenMP or CUDA so that the CPU ops and the GPU kernels take the very same
// description; under nvcc its helpers are also callable on the device.
#pragma once

#include <cstddef>

#ifndef HPMC_HOST_DEVICE
#if defined(__CUDACC__)
#define HPMC_HOST_DEVICE __host__ __device__
#else
#define HPMC_HOST_DEVICE
#endif
#endif

namespace hpmc {

// Output length along one axis: floor((in + 2·pad - k) / stride) + 1, or 0
// when the kernel does not fit the padded input (C++ division truncates
// toward zero, which would wrongly give 1 for a slightly negative span).
HPMC_HOST_DEVICE inline int conv_out_size(int in, int k, int stride, int pad) {
  int span = in + 2 * pad - k;
  return span < 0 ? 0 : span / stride + 1;
}

struct Conv2dShape {
  int N, C, H, W;   // input: batch, channels, height, width
  int K, R, S;      // output channels, kernel height, kernel width
  int stride, pad;  // the same along both axes
  int P, Q;         // output height and width

  HPMC_HOST_DEVICE size_t in_sample() const { return size_t(C) * H * W; }
  HPMC_HOST_DEVICE size_t out_sample() const { return size_t(K) * P * Q; }
  HPMC_HOST_DEVICE size_t weight_count() const { return size_t(K) * C * R * S; }
  // The im2col matrix of one image is [C·R·S, P·Q].
  HPMC_HOST_DEVICE int col_rows() const { return C * R * S; }
  HPMC_HOST_DEVICE int col_cols() const { return P * Q; }
  // A 1x1, stride-1, unpadded convolution is a plain matrix product on the
  // image itself: its im2col matrix would be a copy of the input.
  HPMC_HOST_DEVICE bool is_pointwise() const { return R == 1 && S == 1 && stride == 1 && pad == 0; }
};

// A Conv2dShape with P and Q derived from the rest.
HPMC_HOST_DEVICE inline Conv2dShape make_conv2d_shape(int N, int C, int H, int W, int K, int R,
                                                      int S, int stride, int pad) {
  Conv2dShape s{N, C, H, W, K, R, S, stride, pad, 0, 0};
  s.P = conv_out_size(H, R, stride, pad);
  s.Q = conv_out_size(W, S, stride, pad);
  return s;
}

}  // namespace hpmc
