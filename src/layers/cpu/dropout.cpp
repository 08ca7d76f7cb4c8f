// dropout.cpp — DropoutCPU: in training, dropout_ops.h with the mode's
// counters (seed, stream, step, and the batch's first sample); in eval, a copy.
#include "layers/cpu/dropout.h"

#include <cstring>

#include "layers/cpu/dropout_ops.h"

namespace hpmc {

void DropoutCPU::forward_impl(const Tensor& x, Tensor& y) {
  const LayerMode& m = mode();
  if (!m.training) {
    std::memcpy(y.data<float>(), x.data<float>(), x.numel() * sizeof(float));
    return;
  }
  dropout_forward(x.data<float>(), y.data<float>(), x.numel(), p_, m.seed, uint64_t(m.stream),
                  uint64_t(m.step), uint64_t(m.first) * x.shape().per_sample());
}

void DropoutCPU::backward_impl(const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& dy,
                               Tensor* dx) {
  if (!dx) return;
  const LayerMode& m = mode();
  if (!m.training) {
    std::memcpy(dx->data<float>(), dy.data<float>(), dy.numel() * sizeof(float));
    return;
  }
  dropout_backward(dy.data<float>(), dx->data<float>(), dy.numel(), p_, m.seed,
                   uint64_t(m.stream), uint64_t(m.step), uint64_t(m.first) * dy.shape().per_sample());
}

HPMC_REGISTER_CPU(Dropout)

}  // namespace hpmc
