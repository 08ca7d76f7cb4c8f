// batchnorm_ops.h — 2-d batch normalization math (PyTorch's nn.BatchNorm2d),
// templated on the scalar so tests can run it in double for finite-difference
// checks; the CPU layer calls it with T = float.
//
// Layout: x, y, dy, dx are NCHW with HW = H·W; one channel's M = N·HW values
// are N runs of HW contiguous values, C·HW apart. Per-channel arrays (γ, β,
// running mean/var, the saved statistics) have C entries. γ and β may be null
// (affine = false: γ = 1, β = 0, no parameter gradients).
// The formulas are in layers/batchnorm_math.h. Every reduction is a plain
// sequential sum in double over n then hw, one channel per OpenMP iteration:
// deterministic for any thread count, and accurate (the float inputs are exact
// in double; the variance is the two-pass Σ(x − mean)²).
//
// Training forward: normalizes with the batch statistics, stores mean and
//   invstd (double, C each) for backward, and updates the running statistics
//   with the unbiased variance (when running_mean is non-null). Needs M > 1
//   (PyTorch refuses a single value per channel in training; the layer checks).
// Eval forward: normalizes with the running statistics.
// Backward: parameter gradients ACCUMULATE (dγ += ..., dβ += ...); dx is
//   OVERWRITTEN and may be null (skipped). Training backward reads the
//   statistics its forward stored; eval backward is the gradient of the fixed
//   affine map y = γ·(x − running_mean)·invstd + β.
#pragma once

#include <cstddef>
#include <cstdint>

#include "layers/batchnorm_math.h"

namespace hpmc {

template <typename T>
void batchnorm_forward_train(const BatchNormDims& d, const T* x, const T* gamma, const T* beta,
                             double eps, double momentum, T* y, T* running_mean, T* running_var,
                             double* save_mean, double* save_invstd) {
  const int64_t m = d.per_channel();
  const size_t cstride = size_t(d.c) * d.hw;
#pragma omp parallel for schedule(static)
  for (int c = 0; c < d.c; ++c) {
    double sum = 0;
    for (int n = 0; n < d.n; ++n) {
      const T* xc = x + size_t(n) * cstride + size_t(c) * d.hw;
      for (size_t i = 0; i < d.hw; ++i) sum += double(xc[i]);
    }
    const double mean = sum / double(m);
    double sq = 0;
    for (int n = 0; n < d.n; ++n) {
      const T* xc = x + size_t(n) * cstride + size_t(c) * d.hw;
      for (size_t i = 0; i < d.hw; ++i) {
        const double u = double(xc[i]) - mean;
        sq += u * u;
      }
    }
    const double var = sq / double(m);
    const double invstd = bn_invstd(var, eps);
    const double a = gamma ? double(gamma[c]) * invstd : invstd;
    const double b = beta ? double(beta[c]) : 0.0;
    for (int n = 0; n < d.n; ++n) {
      const size_t off = size_t(n) * cstride + size_t(c) * d.hw;
      for (size_t i = 0; i < d.hw; ++i) y[off + i] = T(bn_normalize(double(x[off + i]), mean, a, b));
    }
    save_mean[c] = mean;
    save_invstd[c] = invstd;
    if (running_mean) {
      running_mean[c] = T(bn_running_update(double(running_mean[c]), mean, momentum));
      running_var[c] = T(bn_running_update(double(running_var[c]), bn_unbiased(var, m), momentum));
    }
  }
}

template <typename T>
void batchnorm_forward_eval(const BatchNormDims& d, const T* x, const T* gamma, const T* beta,
                            const T* running_mean, const T* running_var, double eps, T* y) {
  const size_t cstride = size_t(d.c) * d.hw;
#pragma omp parallel for schedule(static)
  for (int c = 0; c < d.c; ++c) {
    const double invstd = bn_invstd(double(running_var[c]), eps);
    const double a = gamma ? double(gamma[c]) * invstd : invstd;
    const double b = beta ? double(beta[c]) : 0.0;
    const double mean = double(running_mean[c]);
    for (int n = 0; n < d.n; ++n) {
      const size_t off = size_t(n) * cstride + size_t(c) * d.hw;
      for (size_t i = 0; i < d.hw; ++i) y[off + i] = T(bn_normalize(double(x[off + i]), mean, a, b));
    }
  }
}

template <typename T>
void batchnorm_backward_train(const BatchNormDims& d, const T* x, const T* dy, const T* gamma,
                              const double* save_mean, const double* save_invstd, T* dx,
                              T* dgamma, T* dbeta) {
  const int64_t m = d.per_channel();
  const size_t cstride = size_t(d.c) * d.hw;
#pragma omp parallel for schedule(static)
  for (int c = 0; c < d.c; ++c) {
    const double mean = save_mean[c], invstd = save_invstd[c];
    double sdy = 0, sdyx = 0;
    for (int n = 0; n < d.n; ++n) {
      const size_t off = size_t(n) * cstride + size_t(c) * d.hw;
      for (size_t i = 0; i < d.hw; ++i) {
        const double g = double(dy[off + i]);
        sdy += g;
        sdyx += g * (double(x[off + i]) - mean);
      }
    }
    if (dgamma) dgamma[c] += T(sdyx * invstd);
    if (dbeta) dbeta[c] += T(sdy);
    if (!dx) continue;
    const BatchNormGradConsts k =
        bn_grad_consts(sdy, sdyx, invstd, gamma ? double(gamma[c]) : 1.0, m);
    for (int n = 0; n < d.n; ++n) {
      const size_t off = size_t(n) * cstride + size_t(c) * d.hw;
      for (size_t i = 0; i < d.hw; ++i)
        dx[off + i] = T(bn_train_dx(double(x[off + i]), double(dy[off + i]), mean, k));
    }
  }
}

template <typename T>
void batchnorm_backward_eval(const BatchNormDims& d, const T* x, const T* dy, const T* gamma,
                             const T* running_mean, const T* running_var, double eps, T* dx,
                             T* dgamma, T* dbeta) {
  const size_t cstride = size_t(d.c) * d.hw;
#pragma omp parallel for schedule(static)
  for (int c = 0; c < d.c; ++c) {
    const double mean = double(running_mean[c]);
    const double invstd = bn_invstd(double(running_var[c]), eps);
    if (dgamma || dbeta) {
      double sdy = 0, sdyx = 0;
      for (int n = 0; n < d.n; ++n) {
        const size_t off = size_t(n) * cstride + size_t(c) * d.hw;
        for (size_t i = 0; i < d.hw; ++i) {
          const double g = double(dy[off + i]);
          sdy += g;
          sdyx += g * (double(x[off + i]) - mean);
        }
      }
      if (dgamma) dgamma[c] += T(sdyx * invstd);
      if (dbeta) dbeta[c] += T(sdy);
    }
    if (!dx) continue;
    const double g = gamma ? double(gamma[c]) * invstd : invstd;
    for (int n = 0; n < d.n; ++n) {
      const size_t off = size_t(n) * cstride + size_t(c) * d.hw;
      for (size_t i = 0; i < d.hw; ++i) dx[off + i] = T(mul_rn(double(dy[off + i]), g));
    }
  }
}

}  // namespace hpmc
