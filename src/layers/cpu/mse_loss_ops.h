// mse_loss_ops.h — mean-squared-error math, templated on the scalar so tests
// can run it in double for finite-difference checks; MseLossCPU calls it
// with T = float.
//
// Layout: n samples of `per_sample` contiguous elements each, for the
// prediction p, the target t and the gradient dp alike.
// Loss:     per-sample  l_s = (1 / per_sample) · Σ_e (p − t)²  (summed in double);
//           batch loss  L   = (1 / n) · Σ_s l_s  — PyTorch's MSELoss('mean').
// Gradient: dL/dp = 2 (p − t) / (n · per_sample), written only when dp is
//           non-null and then overwritten.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpmc {

// Returns Σ_s l_s, the SUM of the per-sample losses (the caller accumulates
// it over an epoch and divides once).
template <typename T>
double mse_loss(const T* p, const T* t, T* dp, int64_t n, size_t per_sample) {
  if (n <= 0 || per_sample == 0) return 0.0;
  const T gscale = T(2.0 / (double(n) * double(per_sample)));
  // Per-sample sums land in a vector and are added serially afterwards, so
  // the result does not depend on the thread count (an OpenMP reduction's
  // combination order is unspecified).
  std::vector<double> sample_loss(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n; ++s) {
    const T* ps = p + size_t(s) * per_sample;
    const T* ts = t + size_t(s) * per_sample;
    double sum = 0.0;
    for (size_t e = 0; e < per_sample; ++e) {
      const double d = double(ps[e]) - double(ts[e]);
      sum += d * d;
    }
    sample_loss[size_t(s)] = sum / double(per_sample);
    if (dp) {
      T* ds = dp + size_t(s) * per_sample;
      for (size_t e = 0; e < per_sample; ++e) ds[e] = gscale * (ps[e] - ts[e]);
    }
  }
  double total = 0.0;
  for (double l : sample_loss) total += l;
  return total;
}

}  // namespace hpmc
