// linear.cpp — LinearCPU: the shared rules of linear_spec.h and the float32
// calls into linear_ops.h, in the layer's precision (fp32 or bf16).
#include "layers/cpu/linear.h"

#include "layers/cpu/linear_ops.h"

namespace hpmc {

void LinearCPU::forward_impl(const Tensor& x, Tensor& y) {
  const float* b = cfg_.bias ? param(1) : nullptr;
  cpu::linear_forward(x.shape().n, cfg_.in_features, cfg_.out_features, x.data<float>(), param(0),
                      b, y.data<float>(), precision());
}

void LinearCPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const int n = x.shape().n, in = cfg_.in_features, out = cfg_.out_features;
  float* db = cfg_.bias ? grad(1) : nullptr;
  cpu::linear_backward_params(n, in, out, x.data<float>(), dy.data<float>(), grad(0), db,
                              precision());
  if (dx)
    cpu::linear_backward_data(n, in, out, dy.data<float>(), param(0), dx->data<float>(),
                              precision());
}

HPMC_REGISTER_CPU(Linear)

}  // namespace hpmc
