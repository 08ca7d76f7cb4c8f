// dropout.h — the GPU dropout layer (YAML type "dropout"); no CUDA types
// here. Schema and shape from layers/dropout_spec.h, shared with DropoutCPU.
// In training the kernel of dropout_kernels.h draws the mask from the mode's
// counters exactly as the CPU does (bit-identical outputs); in eval, a
// device-to-device copy.
#pragma once

#include "layers/dropout_spec.h"
#include "layers/layer.h"

namespace hpmc::gpu {

class DropoutGPU : public LayerGPU<DropoutSpec> {
 public:
  using LayerGPU::LayerGPU;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc::gpu
