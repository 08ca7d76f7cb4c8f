// softmax_ce_loss.h — the CPU fused softmax cross-entropy loss (YAML name
// "softmax_cross_entropy") for classifiers: logits (N, K, 1, 1), int32 labels
// (N, 1, 1, 1); the batch loss is the mean over samples (PyTorch's
// CrossEntropyLoss('mean')). The math lives in softmax_ce_loss_ops.h; the
// accumulation contract is in layers/loss.h.
#pragma once

#include "layers/loss_spec.h"

namespace hpmc {

class SoftmaxCrossEntropyCPU : public LossCPU<SoftmaxCrossEntropySpec> {
 protected:
  // Adds Σ per-sample loss to acc[0] and the number of correct argmax
  // predictions to acc[1]; overwrites *dpred with d(mean loss)/d pred when
  // dpred is non-null. Throws DataError for a label outside [0, K).
  void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) override;
};

}  // namespace hpmc
