// batchnorm2d.cu — BatchNorm2dGPU: the kernels of batchnorm_kernels.h with
// the mode (layer.h) choosing batch or running statistics, and
// num_batches_tracked counted on the device.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/device.h"
#include "layers/gpu/batchnorm2d.h"
#include "layers/gpu/batchnorm_kernels.h"

namespace hpmc::gpu {

namespace {

BatchNormDims dims_of(const Shape& s) { return BatchNormDims{s.n, s.c, size_t(s.h) * s.w}; }

__global__ void count_batch_kernel(float* count) { *count += 1.0f; }

}  // namespace

void BatchNorm2dGPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  const float* gamma = cfg_.affine ? param(0) : nullptr;
  const float* beta = cfg_.affine ? param(1) : nullptr;
  if (!mode().training) {
    batchnorm_forward_eval(dims_of(s), x.data<float>(), gamma, beta, buffer(0), buffer(1),
                           cfg_.eps, y.data<float>());
    return;
  }
  check_training_batch(s);
  if (!saved_) saved_ = allocate_shared(2 * size_t(cfg_.channels) * sizeof(double));
  double* mean = static_cast<double*>(saved_.get());
  batchnorm_forward_train(dims_of(s), x.data<float>(), gamma, beta, cfg_.eps, cfg_.momentum,
                          y.data<float>(), buffer(0), buffer(1), mean, mean + cfg_.channels);
  count_batch_kernel<<<1, 1>>>(buffer(2));
  HPMC_CUDA_LAUNCH_CHECK("batchnorm2d num_batches_tracked kernel");
  valid_ = true;
}

void BatchNorm2dGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                   Tensor* dx) {
  const Shape& s = x.shape();
  const float* gamma = cfg_.affine ? param(0) : nullptr;
  float* dgamma = cfg_.affine ? grad(0) : nullptr;
  float* dbeta = cfg_.affine ? grad(1) : nullptr;
  float* dxp = dx ? dx->data<float>() : nullptr;
  if (!mode().training) {
    batchnorm_backward_eval(dims_of(s), x.data<float>(), dy.data<float>(), gamma, buffer(0),
                            buffer(1), cfg_.eps, dxp, dgamma, dbeta);
    return;
  }
  HPMC_CHECK(valid_, "batchnorm2d '", name(), "': training backward before a training forward");
  const double* mean = static_cast<const double*>(saved_.get());
  batchnorm_backward_train(dims_of(s), x.data<float>(), dy.data<float>(), gamma, mean,
                           mean + cfg_.channels, dxp, dgamma, dbeta);
}

HPMC_REGISTER_GPU(BatchNorm2d)

}  // namespace hpmc::gpu
