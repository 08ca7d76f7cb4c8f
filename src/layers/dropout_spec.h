// dropout_spec.h — the dropout layer type, defined once for every device:
// schema, the probability p, shape rule (unchanged) and description.
// DropoutCPU and gpu::DropoutGPU add only the passes.
//
// Training mode (mode().training): inverted dropout, y = keep ? x / (1 − p) : 0,
// with the keep mask a pure function of (training.seed, the layer's stream =
// its index in the model, the global step, the element's flat index in the
// N·C·H·W batch) through layers/dropout_mask.h, so CPU and GPU drop the same
// elements, backward recomputes the mask, and --resume repeats it exactly
// without saved generator state. Eval mode: the identity (y = x, dx = dy).
#pragma once

#include <string>

#include "core/shape.h"
#include "layers/layer.h"

namespace hpmc {

class DropoutSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // Throws ConfigError naming the layer for p outside [0, 1].
  DropoutSpec(std::string name, double p);
  explicit DropoutSpec(const LayerArgs& a) : DropoutSpec(a.name, a.f("p")) {}

  const LayerSchema& schema() const override { return static_schema(); }
  std::string describe() const override;  // "p 0.5"
  Shape output_shape(const Shape& in) const override { return in; }
  double p() const { return p_; }

 protected:
  double p_;
};

}  // namespace hpmc
