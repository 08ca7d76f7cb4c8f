// Compiled with -ffp-contract=off -fno-math-errno (CMakeLists.txt): every
// operation below is rounded on its own, as the GPU kernel rounds it, and
// sqrt is the IEEE square root, vectorised.
#include "optim/adam.h"

#include <cmath>

#include "core/error.h"
#include "optim/gpu/optim_kernels.h"

namespace hpmc {

void adam_update_cpu(float* p, const float* g, float* m, float* v, size_t n_in,
                     const AdamArgs& a) {
  const long n = long(n_in);
  const float b1 = a.beta1, c1 = a.c1, b2 = a.beta2, c2 = a.c2, eps = a.eps, l2 = a.l2,
              decay = a.decay, step = a.step_size, bc2 = a.bc2_sqrt;
  const bool decoupled = a.decoupled;
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    float pi = p[i];
    float gi = g[i];
    if (decoupled) pi = pi * decay;
    else gi = gi + l2 * pi;
    const float mi = b1 * m[i] + c1 * gi;
    const float vi = b2 * v[i] + (c2 * gi) * gi;
    const float d = std::sqrt(vi) / bc2 + eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - step * (mi / d);
  }
}

Adam::Adam(const OptimizerConfig& cfg, ParamStore& store) : Optimizer(cfg, store, {"m", "v"}) {
  HPMC_CHECK(cfg.type == "adam" || cfg.type == "adamw", "Adam built for '", cfg.type, "'");
}

void Adam::update(double lr) {
  const AdamArgs a = adam_args(lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay,
                               cfg_.type == "adamw", steps() + 1);
  float* p = store_.params().data<float>();
  const float* g = store_.grads().data<float>();
  float* m = state(0).data<float>();
  float* v = state(1).data<float>();
  if (store_.device() == Device::kGPU)
    gpu::adam_pass(p, g, m, v, store_.padded(), a);
  else
    adam_update_cpu(p, g, m, v, store_.padded(), a);
}

}  // namespace hpmc
