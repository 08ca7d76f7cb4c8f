// sgd_formula.cuh — one element of torch.optim.SGD (model/sgd.h) on the GPU,
// shared by the SGD kernel (train_kernels.cu) and the fused MLP step
// (mlp_step.cu), so the two update the same bits. Each operation is rounded on
// its own (the _rn intrinsics are never contracted into an FMA), so the result
// is the textbook formula, independent of compiler flags:
//   g = grad + wd·p;  with momentum: v = μ·v + g, p = p − lr·v;  else p = p − lr·g.
// Without momentum v is not touched. The CPU loop is the same formula, but the
// host compiler may fuse a multiply-add there; the two then differ in the last
// bit (tests compare the GPU bit for bit with a host reference that rounds
// every step, and with the CPU sgd_step to a tolerance).
#pragma once

#include <cuda_runtime.h>

namespace hpmc::gpu {

__device__ __forceinline__ void sgd_update(float& p, float g, float& v, bool momentum, float lr,
                                           float mu, float wd) {
  const float gg = __fadd_rn(g, __fmul_rn(wd, p));
  if (momentum) {
    v = __fadd_rn(__fmul_rn(mu, v), gg);
    p = __fsub_rn(p, __fmul_rn(lr, v));
  } else {
    p = __fsub_rn(p, __fmul_rn(lr, gg));
  }
}

}  // namespace hpmc::gpu
