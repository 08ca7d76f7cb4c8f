// activations.cpp — LeakyReLUCPU, PReLUCPU, SigmoidCPU and TanhCPU: thin
// wrappers over activation_ops.h with T = float.
#include "layers/cpu/activations.h"

#include "layers/cpu/activation_ops.h"

namespace hpmc {

void LeakyReLUCPU::forward_impl(const Tensor& x, Tensor& y) {
  leaky_relu_forward(x.data<float>(), y.data<float>(), x.numel(), negative_slope());
}

void LeakyReLUCPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                 Tensor* dx) {
  if (!dx) return;
  leaky_relu_backward(x.data<float>(), dy.data<float>(), dx->data<float>(), x.numel(),
                      negative_slope());
}

HPMC_REGISTER_CPU(LeakyReLU)

void PReLUCPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  prelu_forward(x.data<float>(), param(0), y.data<float>(), s.n, s.c, size_t(s.h) * size_t(s.w));
}

void PReLUCPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const Shape& s = x.shape();
  prelu_backward(x.data<float>(), param(0), dy.data<float>(), dx ? dx->data<float>() : nullptr,
                 grad(0), s.n, s.c, size_t(s.h) * size_t(s.w));
}

HPMC_REGISTER_CPU(PReLU)

void SigmoidCPU::forward_impl(const Tensor& x, Tensor& y) {
  sigmoid_forward(x.data<float>(), y.data<float>(), x.numel());
}

void SigmoidCPU::backward_impl(const Tensor& /*x*/, const Tensor& y, const Tensor& dy,
                               Tensor* dx) {
  if (!dx) return;
  sigmoid_backward(y.data<float>(), dy.data<float>(), dx->data<float>(), y.numel());
}

HPMC_REGISTER_CPU(Sigmoid)

void TanhCPU::forward_impl(const Tensor& x, Tensor& y) {
  tanh_forward(x.data<float>(), y.data<float>(), x.numel());
}

void TanhCPU::backward_impl(const Tensor& /*x*/, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  tanh_backward(y.data<float>(), dy.data<float>(), dx->data<float>(), y.numel());
}

HPMC_REGISTER_CPU(Tanh)

}  // namespace hpmc
