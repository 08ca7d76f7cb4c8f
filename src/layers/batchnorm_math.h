// batchnorm_math.h — the per-channel constants and per-element formulas of
// 2-d batch normalization, shared by the CPU ops (layers/cpu/batchnorm_ops.h)
// and the GPU kernels (layers/gpu/batchnorm_kernels.cu): everything except
// the reductions is computed by these same functions, in double, with no
// contraction into FMAs (core/fp_exact.h), so the two sides differ only by
// the order of the double-precision sums. Eval mode has no sums in forward,
// and gives the same bits.
//
// Notation for one channel: M = N·H·W values x, mean = Σx / M,
// var = Σ(x − mean)² / M (biased, the one that normalizes),
// invstd = 1 / sqrt(var + eps), xhat = (x − mean) · invstd,
// y = γ · xhat + β (γ = 1, β = 0 without the affine parameters).
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "core/fp_exact.h"
#include "layers/conv_shape.h"  // HPMC_HOST_DEVICE

namespace hpmc {

// The sizes of one NCHW tensor as batch normalization sees it: N, C and
// HW = H·W; one channel's M = N·HW values are N runs of HW contiguous values,
// C·HW apart.
struct BatchNormDims {
  int n, c;
  size_t hw;
  HPMC_HOST_DEVICE int64_t per_channel() const { return int64_t(n) * int64_t(hw); }
};

// PyTorch's nn.BatchNorm2d defaults.
constexpr double kBatchNormEps = 1e-5;
constexpr double kBatchNormMomentum = 0.1;

HPMC_HOST_DEVICE inline double bn_invstd(double var, double eps) { return 1.0 / sqrt(var + eps); }

// y = (x − mean) · a + b with a = γ · invstd, b = β: forward in either mode
// (batch statistics in training, running statistics in eval).
HPMC_HOST_DEVICE inline double bn_normalize(double x, double mean, double a, double b) {
  return add_rn(mul_rn(x - mean, a), b);
}

// The running statistics after one training step (PyTorch, momentum m):
// running_mean ← (1 − m)·running_mean + m·mean,
// running_var  ← (1 − m)·running_var + m·var·M / (M − 1)  (unbiased; M > 1).
HPMC_HOST_DEVICE inline double bn_running_update(double running, double batch, double momentum) {
  return add_rn(mul_rn(1.0 - momentum, running), mul_rn(momentum, batch));
}
HPMC_HOST_DEVICE inline double bn_unbiased(double var, int64_t m) {
  return var * double(m) / double(m - 1);
}

// The training-mode gradient of one channel, from its sums Σdy and
// Σ dy·(x − mean):
//   dβ = Σdy, dγ = invstd · Σ dy·(x − mean),
//   dx = γ·invstd · ((dy − Σdy/M) − (x − mean) · invstd²·Σ dy·(x − mean)/M),
// the full gradient through the batch mean and variance.
struct BatchNormGradConsts {
  double mean_dy;  // Σdy / M
  double k;        // invstd² · Σ dy·(x − mean) / M
  double g;        // γ · invstd
};
HPMC_HOST_DEVICE inline BatchNormGradConsts bn_grad_consts(double sum_dy, double sum_dy_xmu,
                                                           double invstd, double gamma,
                                                           int64_t m) {
  return BatchNormGradConsts{sum_dy / double(m), invstd * invstd * sum_dy_xmu / double(m),
                             gamma * invstd};
}
HPMC_HOST_DEVICE inline double bn_train_dx(double x, double dy, double mean,
                                           const BatchNormGradConsts& c) {
  return mul_rn(c.g, add_rn(dy - c.mean_dy, -mul_rn(x - mean, c.k)));
}

}  // namespace hpmc
