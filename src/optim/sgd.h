// sgd.h — torch.optim.SGD over the whole parameter buffer (update_args.h
// gives the rule). With momentum 0 it keeps no state; otherwise one buffer,
// "momentum" (v starts at 0, so the first v is g, as PyTorch's first step).
//
// The CPU loop of plain SGD is the loop hpmc always had, compiled with the
// host compiler's defaults (it may fuse a multiply-add), so existing runs
// keep their bits; the GPU kernel rounds every operation (sgd_formula.cuh),
// so the two agree to the last bit or two, not bit for bit.
#pragma once

#include <cstddef>

#include "optim/optimizer.h"
#include "optim/update_args.h"

namespace hpmc {

// One step over n floats of host memory; v is unused (may be null) when
// args.momentum is 0.
void sgd_update_cpu(float* p, const float* g, float* v, size_t n, const SgdArgs& args);

class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerConfig& cfg, ParamStore& store);

 private:
  void update(double lr) override;
};

}  // namespace hpmc
