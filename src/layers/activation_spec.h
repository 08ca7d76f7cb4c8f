// activation_spec.h — the element-wise activation layer types, each defined
// once for every device: schema and shape (the output has the input's shape).
// The CPU classes in layers/cpu and the GPU classes in layers/gpu derive from
// these and add only the passes.
#pragma once

#include <string>

#include "layers/layer.h"

namespace hpmc {

// relu: y = max(x, 0) (nn.ReLU); NaN passes.
class ReLUSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  explicit ReLUSpec(std::string name) : Layer(std::move(name)) {}
  explicit ReLUSpec(const LayerArgs& a) : ReLUSpec(a.name) {}

  const LayerSchema& schema() const override { return static_schema(); }
  Shape output_shape(const Shape& in) const override { return in; }
};

}  // namespace hpmc
