// batchnorm2d.h — the GPU batch-normalization layer (YAML type
// "batchnorm2d"); no CUDA types here. Schema, shapes, parameters and buffers
// come from layers/batchnorm_spec.h, shared with BatchNorm2dCPU; the kernels
// (batchnorm_kernels.h: one block per channel, double sums in a fixed tree,
// no atomics) match the CPU's to about a float ulp in training and bit for
// bit in eval forward.
#pragma once

#include <memory>

#include "layers/batchnorm_spec.h"
#include "layers/layer.h"

namespace hpmc::gpu {

class BatchNorm2dGPU : public LayerGPU<BatchNorm2dSpec> {
 public:
  using LayerGPU::LayerGPU;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  // The batch mean and invstd (2·C doubles on the device) of the last
  // training forward, for backward; allocated on the first one.
  std::shared_ptr<void> saved_;
  bool valid_ = false;
};

}  // namespace hpmc::gpu
