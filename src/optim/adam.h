// adam.h — torch.optim.Adam and AdamW over the whole parameter buffer
// (update_args.h gives the rule and its rounding order). State: "m" and "v"
// (exp_avg, exp_avg_sq), zero at the start; the bias corrections use the
// optimizer's step count.
//
// adam.cpp is compiled with -ffp-contract=off (CMakeLists.txt), and the
// GPU kernel rounds each operation with _rn intrinsics, so the CPU and the
// GPU compute the same float32 operations in the same order: bit for bit
// the same result.
#pragma once

#include <cstddef>

#include "optim/optimizer.h"
#include "optim/update_args.h"

namespace hpmc {

// One step over n floats of host memory.
void adam_update_cpu(float* p, const float* g, float* m, float* v, size_t n, const AdamArgs& a);

class Adam : public Optimizer {
 public:
  Adam(const OptimizerConfig& cfg, ParamStore& store);  // cfg.type adam or adamw

 private:
  void update(double lr) override;
};

}  // namespace hpmc
