// mse_loss.h — the CPU mean-squared-error loss (YAML name "mse") for
// autoencoders: a float32 target of the prediction's shape; the batch loss is
// the mean over every element (PyTorch's MSELoss('mean')). The math lives in
// mse_loss_ops.h; the accumulation contract is in layers/loss.h.
#pragma once

#include "layers/loss_spec.h"

namespace hpmc {

class MseLossCPU : public LossCPU<MseLossSpec> {
 protected:
  // Adds Σ per-sample loss to acc[0] (acc[1] is left alone); overwrites
  // *dpred with d(mean loss)/d pred when dpred is non-null.
  void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) override;
};

}  // namespace hpmc
