// batchnorm_spec.h — the batchnorm2d layer type, defined once for every
// device: schema, config, shape rule, parameters (weight γ, bias β), buffers
// (running_mean, running_var, num_batches_tracked: PyTorch's names) and the
// one-line description. BatchNorm2dCPU and gpu::BatchNorm2dGPU add only the
// passes; the math is in layers/batchnorm_math.h and layers/cpu/batchnorm_ops.h.
//
// Layout: x and y NCHW with C = the layer's channels; γ, β and the running
// statistics have C entries; num_batches_tracked is one value (a float here,
// an int64 in PyTorch).
// Training mode (mode().training): normalizes with the batch statistics over
// N·H·W, updates the running statistics (momentum, unbiased variance) and
// adds 1 to num_batches_tracked; needs N·H·W > 1 (a ShapeError otherwise, as
// PyTorch refuses). Eval mode: normalizes with the running statistics.
#pragma once

#include <string>
#include <vector>

#include "core/shape.h"
#include "layers/layer.h"

namespace hpmc {

struct BatchNorm2dConfig {
  int channels = 0;
  double eps = 1e-5;       // added to the variance
  double momentum = 0.1;   // weight of the batch statistics in the running ones
  bool affine = true;      // learn γ and β
};

class BatchNorm2dSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // The config the keys give; channels from the input shape.
  static BatchNorm2dConfig config_from(const LayerArgs& a);
  // Throws ConfigError naming the layer for channels < 1, eps < 0 or a
  // momentum outside [0, 1].
  BatchNorm2dSpec(std::string name, const BatchNorm2dConfig& cfg);
  explicit BatchNorm2dSpec(const LayerArgs& a) : BatchNorm2dSpec(a.name, config_from(a)) {}

  const LayerSchema& schema() const override { return static_schema(); }
  // "16 ch eps 1e-05 momentum 0.1", with " no-affine" appended without γ, β.
  std::string describe() const override;
  // The input's shape; throws ShapeError unless it has the layer's channels.
  Shape output_shape(const Shape& in) const override;
  // weight {C} = 1, bias {C} = 0 (PyTorch's init); none without affine.
  std::vector<ParamSpec> param_specs() const override;
  // running_mean {C} = 0, running_var {C} = 1, num_batches_tracked {} = 0.
  std::vector<ParamSpec> buffer_specs() const override;
  // The batch mean and 1/sqrt(var + eps) per channel that training forward
  // keeps for backward: 2·C doubles.
  size_t workspace_bytes(const Shape& in) const override;
  const BatchNorm2dConfig& config() const { return cfg_; }

 protected:
  // Throws ShapeError when a training pass would see one value per channel.
  void check_training_batch(const Shape& in) const;

  BatchNorm2dConfig cfg_;
};

}  // namespace hpmc
