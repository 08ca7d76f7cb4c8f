// activations.h — the GPU layers leaky_relu, prelu, sigmoid and tanh (relu is
// in simple_layers.h). No CUDA type appears here; the passes call the kernels
// of activation_kernels.h, which say how each agrees with the CPU layer
// (layers/cpu/activations.h): leaky_relu and prelu bit for bit (prelu's slope
// gradient to 1 ulp on planes of 256 elements or more), sigmoid and tanh
// backward bit for bit given the same y, their forward within a few ulp.
// One kernel serves every GPU impl. All run on the default stream; dx is
// overwritten and a null dx skips it; prelu adds its slope gradient into
// grad(0), deterministically (no atomics).
#pragma once

#include "layers/activation_spec.h"
#include "layers/gpu/scratch.h"

namespace hpmc::gpu {

class LeakyReLUGPU : public LayerGPU<LeakyReLUSpec> {
 public:
  using LayerGPU::LayerGPU;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

class PReLUGPU : public LayerGPU<PReLUSpec> {
 public:
  using LayerGPU::LayerGPU;
  // The slope gradient's per-(sample, channel) partial sums: n·c doubles.
  size_t workspace_bytes(const Shape& in) const override;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  DeviceScratch partials_;
};

class SigmoidGPU : public LayerGPU<SigmoidSpec> {
 public:
  using LayerGPU::LayerGPU;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

class TanhGPU : public LayerGPU<TanhSpec> {
 public:
  using LayerGPU::LayerGPU;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc::gpu
