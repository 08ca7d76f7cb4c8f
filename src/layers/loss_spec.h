// loss_spec.h — the losses, each defined once for every device: its schema
// (name, one-line description, whether it is a classifier's) and the rule
// for which models it fits. The CPU classes in layers/cpu and the GPU classes
// in layers/gpu derive from these and add only compute_impl.
#pragma once

#include "layers/loss.h"

namespace hpmc {

// mse: mean over every element of (pred − target)², target = the input image
// (nn.MSELoss); fits a model whose output has its input's shape.
class MseLossSpec : public Loss {
 public:
  static const LossSchema& static_schema();
  const LossSchema& schema() const override { return static_schema(); }
};

// softmax_cross_entropy: softmax over K logits, then the mean over the batch
// of −log p[label] (nn.CrossEntropyLoss); fits a model whose output is K
// logits, K the number of classes the data has.
class SoftmaxCrossEntropySpec : public Loss {
 public:
  static const LossSchema& static_schema();
  const LossSchema& schema() const override { return static_schema(); }
};

// The fit rule of the losses that compare the output with the input image.
std::string fit_reconstruction(const char* loss, const Shape& in, const Shape& out);

}  // namespace hpmc
