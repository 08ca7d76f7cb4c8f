// epilogue_act.cuh — the device form of an Activation descriptor
// (layers/epilogue_act.h): apply_activation(a, v, c) for the value v of
// output channel c, and act_inplace_kernel, the same applied in place to an
// NCHW tensor (the epilogue of the kernels that have none of their own).
//
// Each kind is the activation layer's own device function (activation.cuh:
// act_forward<K>, the float operations of the CPU layers in the same order,
// none a multiply followed by an add), so an epilogue gives the layer's bits:
// relu, leaky_relu and prelu those of the CPU too, sigmoid and tanh those of
// the GPU layer (CUDA's expf and tanhf; nothing here is built with
// --use_fast_math).
#pragma once

#include <cuda_runtime.h>

#include "layers/epilogue_act.h"
#include "layers/gpu/activation.cuh"

namespace hpmc::gpu {

__device__ __forceinline__ float apply_activation(const Activation& a, float v, int c) {
  switch (a.kind) {
    case ActKind::kRelu: return act_forward<Act::kRelu>(v);
    case ActKind::kLeakyRelu: return act_forward<Act::kLeakyRelu>(v, a.slope);
    case ActKind::kPrelu: return act_forward<Act::kPrelu>(v, __ldg(a.slopes + c));
    case ActKind::kSigmoid: return act_forward<Act::kSigmoid>(v);
    case ActKind::kTanh: return act_forward<Act::kTanh>(v);
    case ActKind::kNone: break;
  }
  return v;
}

// relu and leaky_relu alone (none passes v): a compare and at most one
// multiply, for the GEMM epilogues (gemm_tc.h), whose unrolled stores must
// not carry the other kinds' exp and tanh (with them inlined there, the
// tensor-core GEMM's small products ran twice as long).
__device__ __forceinline__ float apply_relu_family(const Activation& a, float v) {
  if (a.kind == ActKind::kRelu) return act_forward<Act::kRelu>(v);
  if (a.kind == ActKind::kLeakyRelu) return act_forward<Act::kLeakyRelu>(v, a.slope);
  return v;
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
