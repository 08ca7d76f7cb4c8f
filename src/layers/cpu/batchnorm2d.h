// batchnorm2d.h — the CPU batch-normalization layer (YAML type
// "batchnorm2d"), PyTorch's nn.BatchNorm2d. Schema, shapes, parameters and
// buffers come from layers/batchnorm_spec.h; the math lives in
// batchnorm_ops.h (T = float, statistics in double).
#pragma once

#include <vector>

#include "layers/batchnorm_spec.h"
#include "layers/layer.h"

namespace hpmc {

class BatchNorm2dCPU : public LayerCPU<BatchNorm2dSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name, BatchNorm2dConfig) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  // The batch statistics of the last training forward, for backward.
  std::vector<double> save_mean_, save_invstd_;
  bool saved_ = false;
};

}  // namespace hpmc
