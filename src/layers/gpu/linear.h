// linear.h — the GPU fully connected layer: the same layer as LinearCPU
// (schema, config, validation, shapes and parameters from LinearSpec) running the
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

class LinearGPU : public LayerGPU<LinearSpec> {
 public:
  // Throws ConfigError for an invalid config (see linear_check_config).
  LinearGPU(std::string name, const LinearConfig& cfg, Family family)
      : LayerGPU(std::move(name), cfg), family_(family) {}
  // The family that args.impl names.
  explicit LinearGPU(const LayerArgs& args)
      : LayerGPU(args), family_(family_of(args.impl, args.name)) {}

  const char* impl() const override { return family_name(family_); }
  Family family() const { return family_; }

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  Family family_;
};

}  // namespace hpmc::gpu
