// batchnorm_kernels.h — 2-d batch normalization on the GPU, as plain host
// functions (no CUDA types) on the default stream; the kernels are in
// batchnorm_kernels.cu.
//
// Same contract and layouts as the CPU ops in layers/cpu/batchnorm_ops.h
// (x, y, dy, dx NCHW on the device; γ, β, running statistics: C floats on the
// device, γ and β may be null; save_mean, save_invstd: C doubles on the
// device, written by the training forward and read by the training backward;
// parameter gradients accumulate, dx is overwritten and may be null).
//
// Mapping: one block of 256 threads per channel for everything that reduces
// (training forward, both backwards). Thread t sums elements t, t + 256, ...
// of the channel in double, then the block adds the 256 partial sums in a
// fixed tree in shared memory: no atomics, the same bits on every run, and
// within a few double ulps of the CPU's sequential sums (so float outputs
// agree to about an ulp). The per-channel constants and per-element formulas
// are the CPU's own (layers/batchnorm_math.h). Eval forward has no reduction:
// a (blocks × C) grid, each thread computing its channel's constants, gives
// the CPU's bits.
#pragma once

#include "layers/batchnorm_math.h"

namespace hpmc::gpu {

void batchnorm_forward_train(const BatchNormDims& d, const float* x, const float* gamma,
                             const float* beta, double eps, double momentum, float* y,
                             float* running_mean, float* running_var, double* save_mean,
                             double* save_invstd);
void batchnorm_forward_eval(const BatchNormDims& d, const float* x, const float* gamma,
                            const float* beta, const float* running_mean,
                            const float* running_var, double eps, float* y);
void batchnorm_backward_train(const BatchNormDims& d, const float* x, const float* dy,
                              const float* gamma, const double* save_mean,
                              const double* save_invstd, float* dx, float* dgamma, float* dbeta);
void batchnorm_backward_eval(const BatchNormDims& d, const float* x, const float* dy,
                             const float* gamma, const float* running_mean,
                             const float* running_var, double eps, float* dx, float* dgamma,
                             float* dbeta);

}  // namespace hpmc::gpu
