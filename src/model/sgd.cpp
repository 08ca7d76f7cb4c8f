#include "model/sgd.h"

#include "layers/gpu/factory.h"

namespace hpmc {

void sgd_step(ParamStore& store, const SgdConfig& cfg) {
  if (store.device() == Device::kGPU) {
    gpu::sgd_step(store.params().data<float>(), store.grads().data<float>(),
                  store.momentum().data<float>(), store.padded(), cfg.lr, cfg.momentum,
                  cfg.weight_decay);
    return;
  }
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
