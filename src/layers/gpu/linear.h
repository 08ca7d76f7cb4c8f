// linear.h — the GPU fully connected layer: the same layer as LinearCPU
// (config, validation, shapes and parameters from linear_spec.h) running the
// gemm of one kernel family of conv2d_kernels.h. No CUDA types.
//
// x [N, in], W [out, in], b [out], y [N, out] (row-major device arrays):
//   forward   y = b (broadcast, if bias) then y (+)= x · Wᵀ
//   backward  dW += dYᵀ · X;  db += Σ_n dY (one thread per feature, summed
//             in batch order: deterministic);  dX = dY · W (if requested)
#pragma once

#include <string>
#include <vector>

#include "layers/gpu/family.h"
#include "layers/layer.h"
#include "layers/linear_spec.h"

namespace hpmc::gpu {

class LinearGPU : public LayerGPU {
 public:
  // Throws ConfigError for an invalid config (see linear_check_config).
  LinearGPU(std::string name, const LinearConfig& cfg, Family family);

  const char* type() const override { return "linear"; }
  const char* impl() const override { return family_name(family_); }
  std::string describe() const override { return linear_describe(cfg_); }
  Shape output_shape(const Shape& in) const override { return linear_output_shape(cfg_, in); }
  std::vector<ParamSpec> param_specs() const override { return linear_param_specs(cfg_); }
  double forward_flops(const Shape& in) const override { return linear_forward_flops(cfg_, in); }
  double backward_flops(const Shape& in, bool input_grad) const override {
    return linear_backward_flops(cfg_, in, input_grad);
  }

  const LinearConfig& config() const { return cfg_; }
  Family family() const { return family_; }

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  LinearConfig cfg_;
  Family family_;
};

}  // namespace hpmc::gpu
