// batchnorm_kernels.cu — the kernels of batchnorm_kernels.h (what they compute
// and how they map the problem is described there).
//
// A channel's element m (0 ≤ m < M = N·HW) is at n·C·HW + c·HW + i with
// n = m / HW, i = m mod HW, so the threads of a block read contiguous runs of
// HW values. The block size is fixed (kThreads): the partial sums, and so the
// results, do not depend on the GPU.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "layers/gpu/batchnorm_kernels.h"

namespace hpmc::gpu {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ size_t channel_offset(const BatchNormDims& d, int c, int64_t m) {
  const int64_t n = m / int64_t(d.hw);
  const int64_t i = m - n * int64_t(d.hw);
  return (size_t(n) * size_t(d.c) + size_t(c)) * d.hw + size_t(i);
}

// Adds the NV per-thread values of every thread of the block in a fixed tree
// (partners tid and tid + s for s = 128, 64, ..., 1); every thread returns
// with the block's totals in v. sh holds NV·kThreads doubles.
template <int NV>
__device__ __forceinline__ void block_sum(double (&v)[NV], double* sh) {
  const int t = threadIdx.x;
  for (int k = 0; k < NV; ++k) sh[k * kThreads + t] = v[k];
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s)
      for (int k = 0; k < NV; ++k) sh[k * kThreads + t] += sh[k * kThreads + t + s];
    __syncthreads();
  }
  for (int k = 0; k < NV; ++k) v[k] = sh[k * kThreads];
  __syncthreads();  // before sh is written again
}

// Block c: the batch mean and biased variance (two passes), then y, the saved
// statistics and the running statistics.
__global__ void __launch_bounds__(kThreads)
    bn_forward_train_kernel(BatchNormDims d, const float* __restrict__ x,
                            const float* __restrict__ gamma, const float* __restrict__ beta,
                            double eps, double momentum, float* __restrict__ y,
                            float* __restrict__ running_mean, float* __restrict__ running_var,
                            double* __restrict__ save_mean, double* __restrict__ save_invstd) {
  __shared__ double sh[kThreads];
  const int c = blockIdx.x;
  const int64_t m = d.per_channel();
  double s[1] = {0.0};
  for (int64_t e = threadIdx.x; e < m; e += kThreads) s[0] += double(x[channel_offset(d, c, e)]);
  block_sum(s, sh);
  const double mean = s[0] / double(m);
  double q[1] = {0.0};
  for (int64_t e = threadIdx.x; e < m; e += kThreads) {
    const double u = double(x[channel_offset(d, c, e)]) - mean;
    q[0] = add_rn(q[0], mul_rn(u, u));
  }
  block_sum(q, sh);
  const double var = q[0] / double(m);
  const double invstd = bn_invstd(var, eps);
  const double a = gamma ? double(gamma[c]) * invstd : invstd;
  const double b = beta ? double(beta[c]) : 0.0;
  for (int64_t e = threadIdx.x; e < m; e += kThreads) {
    const size_t off = channel_offset(d, c, e);
    y[off] = float(bn_normalize(double(x[off]), mean, a, b));
  }
  if (threadIdx.x == 0) {
    save_mean[c] = mean;
    save_invstd[c] = invstd;
    if (running_mean) {
      running_mean[c] = float(bn_running_update(double(running_mean[c]), mean, momentum));
      running_var[c] =
          float(bn_running_update(double(running_var[c]), bn_unbiased(var, m), momentum));
    }
  }
}

// Grid (blocks, C): each thread derives its channel's constants (the CPU's
// formulas), then normalizes a grid-stride share of the channel.
__global__ void bn_forward_eval_kernel(BatchNormDims d, const float* __restrict__ x,
                                       const float* __restrict__ gamma,
                                       const float* __restrict__ beta,
                                       const float* __restrict__ running_mean,
                                       const float* __restrict__ running_var, double eps,
                                       float* __restrict__ y) {
  const int c = blockIdx.y;
  const int64_t m = d.per_channel();
  const double invstd = bn_invstd(double(running_var[c]), eps);
  const double a = gamma ? double(gamma[c]) * invstd : invstd;
  const double b = beta ? double(beta[c]) : 0.0;
  const double mean = double(running_mean[c]);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < m; e += stride) {
    const size_t off = channel_offset(d, c, e);
    y[off] = float(bn_normalize(double(x[off]), mean, a, b));
  }
}

// Block c: Σdy and Σ dy·(x − mean), then the parameter gradients (thread 0)
// and dx. Training mode (eval false): mean and invstd are the saved batch
// statistics and dx is the full gradient; eval mode: the running statistics,
// and dx = dy·γ·invstd.
__global__ void __launch_bounds__(kThreads)
    bn_backward_kernel(BatchNormDims d, const float* __restrict__ x,
                       const float* __restrict__ dy, const float* __restrict__ gamma,
                       const double* __restrict__ save_mean,
                       const double* __restrict__ save_invstd,
                       const float* __restrict__ running_mean,
                       const float* __restrict__ running_var, double eps, bool eval,
                       float* __restrict__ dx, float* __restrict__ dgamma,
                       float* __restrict__ dbeta) {
  __shared__ double sh[2 * kThreads];
  const int c = blockIdx.x;
  const int64_t m = d.per_channel();
  const double mean = eval ? double(running_mean[c]) : save_mean[c];
  const double invstd = eval ? bn_invstd(double(running_var[c]), eps) : save_invstd[c];
  double s[2] = {0.0, 0.0};
  if (!eval || dgamma || dbeta) {
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
      const size_t off = channel_offset(d, c, e);
      const double g = double(dy[off]);
      s[0] += g;
      s[1] = add_rn(s[1], mul_rn(g, double(x[off]) - mean));
    }
    block_sum(s, sh);
  }
  if (threadIdx.x == 0) {
    if (dgamma) dgamma[c] += float(s[1] * invstd);
    if (dbeta) dbeta[c] += float(s[0]);
  }
  if (!dx) return;
  const double gam = gamma ? double(gamma[c]) : 1.0;
  if (eval) {
    const double g = gam * invstd;
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
      const size_t off = channel_offset(d, c, e);
      dx[off] = float(mul_rn(double(dy[off]), g));
    }
  } else {
    const BatchNormGradConsts k = bn_grad_consts(s[0], s[1], invstd, gam, m);
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
      const size_t off = channel_offset(d, c, e);
      dx[off] = float(bn_train_dx(double(x[off]), double(dy[off]), mean, k));
    }
  }
}

}  // namespace

void batchnorm_forward_train(const BatchNormDims& d, const float* x, const float* gamma,
                             const float* beta, double eps, double momentum, float* y,
                             float* running_mean, float* running_var, double* save_mean,
                             double* save_invstd) {
  if (d.c == 0 || d.per_channel() == 0) return;
  bn_forward_train_kernel<<<d.c, kThreads>>>(d, x, gamma, beta, eps, momentum, y, running_mean,
                                             running_var, save_mean, save_invstd);
  HPMC_CUDA_LAUNCH_CHECK("batchnorm2d training forward kernel");
}

void batchnorm_forward_eval(const BatchNormDims& d, const float* x, const float* gamma,
                            const float* beta, const float* running_mean,
                            const float* running_var, double eps, float* y) {
  const int64_t m = d.per_channel();
  if (d.c == 0 || m == 0) return;
  // Enough blocks per channel to fill the GPU for a few channels, few enough
  // that each thread normalizes several values for many channels.
  const unsigned per_c = grid_for(size_t(m));
  const dim3 grid(per_c < 1024u ? per_c : 1024u, unsigned(d.c));
  bn_forward_eval_kernel<<<grid, kBlock>>>(d, x, gamma, beta, running_mean, running_var, eps, y);
  HPMC_CUDA_LAUNCH_CHECK("batchnorm2d eval forward kernel");
}

void batchnorm_backward_train(const BatchNormDims& d, const float* x, const float* dy,
                              const float* gamma, const double* save_mean,
                              const double* save_invstd, float* dx, float* dgamma, float* dbeta) {
  if (d.c == 0 || d.per_channel() == 0) return;
  bn_backward_kernel<<<d.c, kThreads>>>(d, x, dy, gamma, save_mean, save_invstd, nullptr,
                                        nullptr, 0.0, false, dx, dgamma, dbeta);
  HPMC_CUDA_LAUNCH_CHECK("batchnorm2d training backward kernel");
}

void batchnorm_backward_eval(const BatchNormDims& d, const float* x, const float* dy,
                             const float* gamma, const float* running_mean,
                             const float* running_var, double eps, float* dx, float* dgamma,
                             float* dbeta) {
  if (d.c == 0 || d.per_channel() == 0) return;
  bn_backward_kernel<<<d.c, kThreads>>>(d, x, dy, gamma, nullptr, nullptr, running_mean,
                                        running_var, eps, true, dx, dgamma, dbeta);
  HPMC_CUDA_LAUNCH_CHECK("batchnorm2d eval backward kernel");
}

}  // namespace hpmc::gpu
