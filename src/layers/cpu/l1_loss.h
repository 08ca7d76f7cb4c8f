// l1_loss.h — the CPU mean-absolute-error loss (YAML name "l1") for
// autoencoders: a float32 target of the prediction's shape; the batch loss is
// the mean over every element (PyTorch's L1Loss('mean')). The math lives in
// l1_loss_ops.h; the accumulation contract is in layers/loss.h.
#pragma once

#include "layers/loss_spec.h"

namespace hpmc {

class L1LossCPU : public LossCPU<L1LossSpec> {
 protected:
  // Adds Σ per-sample loss to acc[0] (acc[1] is left alone); overwrites
  // *dpred with sign(pred − target) / (N · per_sample) (sign 0 at 0) when
  // dpred is non-null.
  void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) override;
};

}  // namespace hpmc
