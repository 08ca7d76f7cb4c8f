// epilogue_act.cuh — the device form of an Activation descriptor
// (layers/epilogue_act.h): apply_activation(a, v, c) for the value v of
// output channel c, and act_inplace_kernel, the same applied in place to an
// NCHW tensor (the epilogue of the kernels that have none of their own).
//
// Each kind is the formula of its activation layer with the same float
// operations in the same order, none a multiply followed by an add (so FMA
// contraction cannot change a result): relu, leaky_relu and prelu give the
// layers' bits; sigmoid and tanh use CUDA's expf and tanhf (accurate versions,
// nothing here is built with --use_fast_math), as the GPU layers do.
#pragma once

#include <cuda_runtime.h>

#include "layers/epilogue_act.h"

namespace hpmc::gpu {

__device__ __forceinline__ float apply_activation(const Activation& a, float v, int c) {
  switch (a.kind) {
    case ActKind::kRelu: return v < 0.0f ? 0.0f : v;
    case ActKind::kLeakyRelu: return v > 0.0f ? v : v * a.slope;
    case ActKind::kPrelu: return v > 0.0f ? v : v * __ldg(a.slopes + c);
    case ActKind::kSigmoid: {
      const float z = expf(-fabsf(v));
      return v >= 0.0f ? 1.0f / (1.0f + z) : z / (1.0f + z);
    }
    case ActKind::kTanh: return tanhf(v);
    case ActKind::kNone: break;
  }
  return v;
}

// dx for an activation's output y and output gradient dy, for the kinds whose
// backward needs only y (relu: y > 0 ⇔ x > 0; leaky_relu with slope ≥ 0
// likewise; sigmoid and tanh are defined from y): the activation layers'
// formulas with y in place of x where they test the sign.
//   relu        y > 0 ? dy : 0            leaky_relu  y > 0 ? dy : dy · slope
//   sigmoid     dy · (1 − y) · y          tanh        dy · ((1 − y) · (1 + y))
// prelu (its slope gradient needs x) and none have no such form: dy passes.
__device__ __forceinline__ float activation_grad_from_output(const Activation& a, float y,
                                                             float dy) {
  switch (a.kind) {
    case ActKind::kRelu: return y > 0.0f ? dy : 0.0f;
    case ActKind::kLeakyRelu: return y > 0.0f ? dy : dy * a.slope;
    case ActKind::kSigmoid: return dy * (1.0f - y) * y;
    case ActKind::kTanh: return dy * ((1.0f - y) * (1.0f + y));
    case ActKind::kPrelu:
    case ActKind::kNone: break;
  }
  return dy;
}

namespace {  // each .cu that includes this header gets its own copy of the kernel

// y[i] = act(y[i]) over an NCHW tensor of `count` elements with planes of
// `plane` elements and `channels` channels (channel of i: (i / plane) mod channels).
__global__ void __launch_bounds__(256)
    act_inplace_kernel(float* __restrict__ y, long long count, long long plane, int channels,
                       const __grid_constant__ Activation a) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = apply_activation(a, y[i], int((i / plane) % channels));
}

}  // namespace

}  // namespace hpmc::gpu
