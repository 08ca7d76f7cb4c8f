// upsample2d.h — the CPU nearest-neighbour up-sampling layer (YAML type
// "upsample2d"): (N,C,H,W) → (N,C,H·s,W·s). The math lives in
// upsample2d_ops.h; see there for forward and backward.
#pragma once

#include <string>

#include "layers/layer.h"

namespace hpmc {

class UpSample2dCPU : public LayerCPU {
 public:
  // Throws ConfigError for scale < 1.
  explicit UpSample2dCPU(std::string name, int scale = 2);
  const char* type() const override { return "upsample2d"; }
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;

  int scale() const { return scale_; }
  int upsample_scale() const override { return scale_; }

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  int scale_;
};

}  // namespace hpmc
