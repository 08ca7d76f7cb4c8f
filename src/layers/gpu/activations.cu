// activations.cu — LeakyReLUGPU, PReLUGPU, SigmoidGPU and TanhGPU: thin
// wrappers over the kernels of activation_kernels.cu, and their registration.
#include "layers/gpu/activations.h"

#include "layers/gpu/activation_kernels.h"

namespace hpmc::gpu {

void LeakyReLUGPU::forward_impl(const Tensor& x, Tensor& y) {
  leaky_relu_forward(x.data<float>(), y.data<float>(), x.numel(), negative_slope());
}

void LeakyReLUGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                 Tensor* dx) {
  if (!dx) return;
  leaky_relu_backward(x.data<float>(), dy.data<float>(), dx->data<float>(), x.numel(),
                      negative_slope());
}

HPMC_REGISTER_GPU(LeakyReLU)

size_t PReLUGPU::workspace_bytes(const Shape& in) const {
  return prelu_backward_workspace_bytes(in.n, in.c);
}

void PReLUGPU::forward_impl(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  prelu_forward(x.data<float>(), param(0), y.data<float>(), s.n, s.c, size_t(s.h) * size_t(s.w));
}

void PReLUGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const Shape& s = x.shape();
  // cudaMalloc'ed, so aligned for doubles.
  void* ws = partials_.floats(prelu_backward_workspace_bytes(s.n, s.c) / sizeof(float));
  prelu_backward(x.data<float>(), param(0), dy.data<float>(), dx ? dx->data<float>() : nullptr,
                 grad(0), s.n, s.c, size_t(s.h) * size_t(s.w), ws);
}

HPMC_REGISTER_GPU(PReLU)

void SigmoidGPU::forward_impl(const Tensor& x, Tensor& y) {
  sigmoid_forward(x.data<float>(), y.data<float>(), x.numel());
}

void SigmoidGPU::backward_impl(const Tensor& /*x*/, const Tensor& y, const Tensor& dy,
                               Tensor* dx) {
  if (!dx) return;
  sigmoid_backward(y.data<float>(), dy.data<float>(), dx->data<float>(), y.numel());
}

HPMC_REGISTER_GPU(Sigmoid)

void TanhGPU::forward_impl(const Tensor& x, Tensor& y) {
  tanh_forward(x.data<float>(), y.data<float>(), x.numel());
}

void TanhGPU::backward_impl(const Tensor& /*x*/, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  tanh_backward(y.data<float>(), dy.data<float>(), dx->data<float>(), y.numel());
}

HPMC_REGISTER_GPU(Tanh)

}  // namespace hpmc::gpu
