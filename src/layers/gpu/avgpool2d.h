// avgpool2d.h — the GPU 2-d average-pooling layer (YAML type "avgpool2d");
// no CUDA types here. Schema, checks and shapes from layers/pool_spec.h,
// shared with AvgPool2dCPU; the kernels (resample_kernels.h, a gather
// backward without atomics) give the CPU's bits.
#pragma once

#include "layers/layer.h"
#include "layers/pool_spec.h"

namespace hpmc::gpu {

class AvgPool2dGPU : public LayerGPU<AvgPool2dSpec> {
 public:
  using LayerGPU::LayerGPU;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc::gpu
