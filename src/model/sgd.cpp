#include "model/sgd.h"

namespace hpmc {

void sgd_step(ParamStore& store, const SgdConfig& cfg) {
  HPMC_CHECK(store.device() == Device::kCPU, "the GPU SGD kernel is not part of this build");
  float* p = store.params().data<float>();
  const float* g = store.grads().data<float>();
  float* v = store.momentum().data<float>();
  const long n = long(store.padded());
  const float lr = cfg.lr, mu = cfg.momentum, wd = cfg.weight_decay;
  if (mu == 0.0f) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
  } else {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; ++i) {
      float vi = mu * v[i] + (g[i] + wd * p[i]);
      v[i] = vi;
      p[i] -= lr * vi;
    }
  }
}

}  // namespace hpmc
