// update_args.h — the scalars of one optimizer step, shared by the CPU loops
// (sgd.cpp, adam.cpp) and the GPU kernels (gpu/optim_kernels.cu), so that
// both round the same float32 values. Host-side quantities (bias
// corrections, 1 − β, AdamW's decay factor) are computed in double and
// rounded once, as PyTorch computes them in Python floats: 1 − β2 rounded
// from float32 β2 would be off by 1e-5 relative.
#pragma once

#include <cstdint>

namespace hpmc {

// torch.optim.SGD, dampening 0, per element:
//   g = grad + wd·p;  v = μ·v + g;  p = p − lr·(nesterov ? g + μ·v : v)
// and without momentum (μ = 0, no state) p = p − lr·g.
struct SgdArgs {
  float lr = 0, momentum = 0, weight_decay = 0;
  bool nesterov = false;
};

// torch.optim.Adam / AdamW (amsgrad off), per element, each operation
// rounded to float32 in this order:
//   adamw: p = p·decay                    decay = 1 − lr·wd (adam: 1, skipped)
//   adam:  g = grad + l2·p                l2 = wd (adamw: 0, skipped)
//   m = β1·m + c1·g                       c1 = 1 − β1
//   v = β2·v + (c2·g)·g                   c2 = 1 − β2
//   d = √v / bc2_sqrt + eps               bc2_sqrt = √(1 − β2^t)
//   p = p − step_size·(m / d)             step_size = lr / (1 − β1^t)
// t is the step's number, from 1. Padding (p = g = m = v = 0) stays 0.
struct AdamArgs {
  float beta1 = 0, c1 = 0, beta2 = 0, c2 = 0, eps = 0;
  float l2 = 0, decay = 1;
  float step_size = 0, bc2_sqrt = 1;
  bool decoupled = false;  // adamw
};

// The arguments of step t (≥ 1) at learning rate lr.
AdamArgs adam_args(double lr, double beta1, double beta2, double eps, double weight_decay,
                   bool decoupled, int64_t t);

}  // namespace hpmc
