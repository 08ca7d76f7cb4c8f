#include "optim/sgd.h"

#include "optim/gpu/optim_kernels.h"

namespace hpmc {

void sgd_update_cpu(float* p, const float* g, float* v, size_t n_in, const SgdArgs& a) {
  const long n = long(n_in);
  const float lr = a.lr, mu = a.momentum, wd = a.weight_decay;
  // The first two loops are hpmc's SGD as it always was (same bits).
  if (mu == 0.0f) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
  } else if (!a.nesterov) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; ++i) {
      float vi = mu * v[i] + (g[i] + wd * p[i]);
      v[i] = vi;
      p[i] -= lr * vi;
    }
  } else {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; ++i) {
      const float gi = g[i] + wd * p[i];
      const float vi = mu * v[i] + gi;
      v[i] = vi;
      p[i] -= lr * (gi + mu * vi);
    }
  }
}

Sgd::Sgd(const OptimizerConfig& cfg, ParamStore& store)
    : Optimizer(cfg, store, cfg.momentum != 0 ? std::vector<std::string>{"momentum"}
                                              : std::vector<std::string>{}) {}

void Sgd::update(double lr) {
  SgdArgs a;
  a.lr = float(lr);
  a.momentum = float(cfg_.momentum);
  a.weight_decay = float(cfg_.weight_decay);
  a.nesterov = cfg_.nesterov;
  float* v = a.momentum != 0.0f ? state(0).data<float>() : nullptr;
  float* p = store_.params().data<float>();
  const float* g = store_.grads().data<float>();
  if (store_.device() == Device::kGPU)
    gpu::sgd_pass(p, g, v, store_.padded(), a);
  else
    sgd_update_cpu(p, g, v, store_.padded(), a);
}

}  // namespace hpmc
