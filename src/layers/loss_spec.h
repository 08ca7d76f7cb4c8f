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

// bce_with_logits: binary cross-entropy of sigmoid(output) against the input
// image, computed from the logits without overflow (nn.BCEWithLogitsLoss);
// fits a model whose output has its input's shape.
class BceWithLogitsLossSpec : public Loss {
 public:
  static const LossSchema& static_schema();
  const LossSchema& schema() const override { return static_schema(); }
};

// bce: binary cross-entropy of probabilities (the output, e.g. after a
// sigmoid layer) against the input image, each log clamped at −100
// (nn.BCELoss); outputs or targets outside [0, 1] are errors. Fits a model
// whose output has its input's shape.
class BceLossSpec : public Loss {
 public:
  static const LossSchema& static_schema();
  const LossSchema& schema() const override { return static_schema(); }
};

// l1: mean over every element of |output − input image| (nn.L1Loss); fits a
// model whose output has its input's shape.
class L1LossSpec : public Loss {
 public:
  static const LossSchema& static_schema();
  const LossSchema& schema() const override { return static_schema(); }
};

// The fit rule of the losses that compare the output with the input image.
std::string fit_reconstruction(const char* loss, const Shape& in, const Shape& out);

}  // namespace hpmc
