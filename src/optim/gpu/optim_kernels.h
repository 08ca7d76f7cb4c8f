// optim_kernels.h — the optimizers' GPU kernels, one per update rule, each a
// single grid-stride pass over whole device buffers, and the gradient
// clipping kernels. Plain C++: no CUDA type appears here. A build without
// CUDA links optim_nocuda.cpp, whose functions throw.
//
// Every pointer is a device pointer. Lengths need not be multiples of
// anything; where every pointer used is 16-byte aligned the kernels move
// float4s, else scalars (the same operations either way). Each operation is
// rounded on its own (_rn intrinsics, never contracted into an FMA):
//   * sgd_pass: sgd_formula.cuh's formula, the one the fused MLP step
//     uses, plus Nesterov; the CPU's plain-SGD loop may fuse a multiply-add,
//     so CPU and GPU agree to rounding.
//   * adam_pass: update_args.h's order, which the CPU loop keeps too
//     (adam.cpp has no contraction): bit for bit the CPU's result.
//   * the clipping norm: clip.h's fixed reduction order, the CPU's too: bit
//     for bit the CPU's norm and scale.
#pragma once

#include <cstddef>

#include "optim/update_args.h"

namespace hpmc::gpu {

// v may be null when args.momentum is 0 (it is then not touched).
void sgd_pass(float* p, const float* g, float* v, size_t n, const SgdArgs& args);

void adam_pass(float* p, const float* g, float* m, float* v, size_t n, const AdamArgs& args);

// Doubles of device scratch clip_grad_norm needs for n gradients (the
// partial sums, then the norm and the scale).
size_t clip_scratch_doubles(size_t n);

// PyTorch's clip_grad_norm_ over g[0, n): norm = ‖g‖₂ (in double, clip.h's
// order), coef = max_norm / (norm + 1e-6), and g ·= float(coef) where
// coef < 1. No host synchronisation: scratch[clip_scratch_doubles(n) − 2]
// receives the norm and [.. − 1] the applied scale (1 when not clipped).
void clip_grad_norm(float* g, size_t n, double max_norm, double* scratch);

}  // namespace hpmc::gpu
