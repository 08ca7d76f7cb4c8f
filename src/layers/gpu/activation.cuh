// activation.cuh — the element-wise activations as __device__ inline
// functions, for the activation kernels (activation_kernels.cu) and for any
// kernel that applies an activation in its epilogue (a fused conv + activation):
//   act_forward<K>(v, slope)          y from the pre-activation v;
//   act_backward<K>(in, dy, slope)    dx, where `in` is the OUTPUT y when
//                                     act_backward_reads_output<K> (sigmoid,
//                                     tanh) and the INPUT x otherwise;
// slope is leaky_relu's slope or prelu's slope of the element's channel,
// ignored by the others. Each is the formula of layers/cpu/activation_ops.h
// (relu: relu_ops.h and simple_layers.cu) with the same float operations in
// the same order, so an epilogue gives the bits the plain layers give:
//   relu        v < 0 ? 0 : v (NaN passes);            x > 0 ? dy : 0
//   leaky_relu  v > 0 ? v : v·slope;                    x > 0 ? dy : dy·slope
//   prelu       as leaky_relu with the channel's slope (its slope gradient
//               needs x, see activation_kernels.cu)
//   sigmoid     z = expf(−|v|), v ≥ 0 ? 1/(1+z) : z/(1+z);  dy·(1−y)·y
//   tanh        tanhf(v);                               dy·((1−y)·(1+y))
// None contains a multiply followed by an add, so FMA contraction cannot
// change a result. expf and tanhf are CUDA's accurate versions (max 2 ulp;
// nothing here is built with --use_fast_math), so sigmoid and tanh forward
// agree with the CPU's glibc functions to a few ulp, not bit for bit.
//
// For an epilogue that keeps only y: relu's mask is the same from y (y > 0 ⇔
// x > 0), and so is leaky_relu's, whose slope the layer keeps ≥ 0; prelu's
// learned slopes may turn negative, and its slope gradient needs x anyway.
#pragma once

#include <cuda_runtime.h>

#include "layers/gpu/activation_kernels.h"  // enum class Act

namespace hpmc::gpu {

template <Act K>
constexpr bool act_backward_reads_output = K == Act::kSigmoid || K == Act::kTanh;

template <Act K>
__device__ __forceinline__ float act_forward(float v, float slope = 0.0f) {
  if constexpr (K == Act::kRelu) {
    return v < 0.0f ? 0.0f : v;
  } else if constexpr (K == Act::kLeakyRelu || K == Act::kPrelu) {
    return v > 0.0f ? v : v * slope;
  } else if constexpr (K == Act::kSigmoid) {
    const float z = expf(-fabsf(v));
    return v >= 0.0f ? 1.0f / (1.0f + z) : z / (1.0f + z);
  } else {
    static_assert(K == Act::kTanh, "an activation without a device form");
    return tanhf(v);
  }
}

template <Act K>
__device__ __forceinline__ float act_backward(float in, float dy, float slope = 0.0f) {
  if constexpr (K == Act::kRelu) {
    return in > 0.0f ? dy : 0.0f;
  } else if constexpr (K == Act::kLeakyRelu || K == Act::kPrelu) {
    return in > 0.0f ? dy : dy * slope;
  } else if constexpr (K == Act::kSigmoid) {
    return dy * (1.0f - in) * in;
  } else {
    static_assert(K == Act::kTanh, "an activation without a device form");
    return dy * ((1.0f - in) * (1.0f + in));
  }
}

}  // namespace hpmc::gpu
