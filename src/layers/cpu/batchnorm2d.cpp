// batchnorm2d.cpp — BatchNorm2dCPU: a thin wrapper over batchnorm_ops.h with
// T = float; the mode (layer.h) chooses batch or running statistics.
#include "layers/cpu/batchnorm2d.h"

#include "core/error.h"
#include "layers/cpu/batchnorm_ops.h"

namespace hpmc {

namespace {
BatchNormDims dims_of(const Shape& s) { return BatchNormDims{s.n, s.c, size_t(s.h) * s.w}; }
}  // namespace

void BatchNorm2dCPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  const float* gamma = cfg_.affine ? param(0) : nullptr;
  const float* beta = cfg_.affine ? param(1) : nullptr;
  if (!mode().training) {
    batchnorm_forward_eval(dims_of(s), x.data<float>(), gamma, beta, buffer(0), buffer(1),
                           cfg_.eps, y.data<float>());
    return;
  }
  check_training_batch(s);
  save_mean_.assign(size_t(cfg_.channels), 0.0);
  save_invstd_.assign(size_t(cfg_.channels), 0.0);
  batchnorm_forward_train(dims_of(s), x.data<float>(), gamma, beta, cfg_.eps, cfg_.momentum,
                          y.data<float>(), buffer(0), buffer(1), save_mean_.data(),
                          save_invstd_.data());
  buffer(2)[0] += 1.0f;  // num_batches_tracked
  saved_ = true;
}

void BatchNorm2dCPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
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
  HPMC_CHECK(saved_, "batchnorm2d '", name(), "': training backward before a training forward");
  batchnorm_backward_train(dims_of(s), x.data<float>(), dy.data<float>(), gamma, save_mean_.data(),
                           save_invstd_.data(), dxp, dgamma, dbeta);
}

HPMC_REGISTER_CPU(BatchNorm2d)

}  // namespace hpmc
