// relu.cpp — ReLUCPU: a thin wrapper over relu_ops.h with T = float.
#include "layers/cpu/relu.h"

#include "layers/cpu/relu_ops.h"

namespace hpmc {

void ReLUCPU::forward_impl(const Tensor& x, Tensor& y) {
  relu_forward(x.data<float>(), y.data<float>(), x.numel());
}

void ReLUCPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  relu_backward(x.data<float>(), dy.data<float>(), dx->data<float>(), x.numel());
}

HPMC_REGISTER_CPU(ReLU)

}  // namespace hpmc
