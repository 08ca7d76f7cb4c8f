// bce_loss.h — the CPU binary cross-entropy losses for autoencoders:
// "bce_with_logits" (on the last layer's raw output) and "bce" (on
// probabilities, e.g. after a sigmoid layer), each against a float32 target
// of the prediction's shape (the input image, in [0, 1]); the batch loss is
// the mean over every element, as PyTorch's BCEWithLogitsLoss / BCELoss
// ('mean'). The math, the clamps and bce's input errors live in
// bce_loss_ops.h; the accumulation contract is in layers/loss.h.
#pragma once

#include "layers/loss_spec.h"

namespace hpmc {

class BceWithLogitsLossCPU : public LossCPU<BceWithLogitsLossSpec> {
 protected:
  // Adds Σ per-sample loss to acc[0] (acc[1] is left alone); overwrites
  // *dpred with (σ(pred) − target) / (N · per_sample) when dpred is non-null.
  void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) override;
};

class BceLossCPU : public LossCPU<BceLossSpec> {
 protected:
  // As above, with the gradient of bce_loss_ops.h. A target outside [0, 1]
  // throws DataError, a prediction outside [0, 1] (not NaN) ConfigError,
  // before anything is written.
  void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) override;
};

}  // namespace hpmc
