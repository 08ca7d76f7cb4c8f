// sgd.h — stochastic gradient descent over the whole parameter buffer.
//
// PyTorch's torch.optim.SGD (dampening 0, no Nesterov), element by element:
//   g = grad + weight_decay · p
//   v = momentum · v + g          (v starts at 0, so the first v is g)
//   p = p − lr · v                 (with momentum 0: p = p − lr · g)
// One pass over the contiguous buffers; padding gaps are zero and stay zero.
#pragma once

#include "model/params.h"

namespace hpmc {

struct SgdConfig {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
};

void sgd_step(ParamStore& store, const SgdConfig& cfg);

}  // namespace hpmc
