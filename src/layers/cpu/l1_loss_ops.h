// l1_loss_ops.h — mean absolute error (YAML "l1"), templated on the scalar so
// tests can run it in double for finite-difference checks; the CPU loss calls
// it with T = float. The GPU kernel (layers/gpu/elementwise_loss_kernels.cu)
// restates these formulas.
//
// Layout: n samples of `per_sample` contiguous elements each, for the
// prediction p, the target t and the gradient dp alike.
// Loss:     per-sample  l_s = (1 / per_sample) · Σ_e |p − t|  (in double);
//           batch loss  L   = (1 / n) · Σ_s l_s  — PyTorch's L1Loss('mean').
//           Returns Σ_s l_s.
// Gradient: dL/dp = sign(p − t) / (n · per_sample), with sign 0 where p = t
//           (PyTorch's, as for a NaN input: torch.sign(NaN) is 0 in torch
//           1.13, and the loss is NaN), written only when dp is non-null and
//           then overwritten.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpmc {

// sign(p − t) · scale with sign 0 for p = t or a NaN: p − t is never rounded
// to 0 unless p = t (no underflow without flush-to-zero), so comparing p with
// t gives the sign of the difference exactly.
template <typename T>
inline T l1_grad_element(T p, T t, T scale) {
  return p > t ? scale : (p < t ? -scale : T(0));
}

template <typename T>
double l1_loss(const T* p, const T* t, T* dp, int64_t n, size_t per_sample) {
  if (n <= 0 || per_sample == 0) return 0.0;
  const T scale = T(1.0 / (double(n) * double(per_sample)));
  // Per-sample sums land in a vector and are added serially afterwards, so
  // the result does not depend on the thread count.
  std::vector<double> sample_loss(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n; ++s) {
    const size_t base = size_t(s) * per_sample;
    double sum = 0.0;
    for (size_t e = 0; e < per_sample; ++e) {
      sum += std::fabs(double(p[base + e]) - double(t[base + e]));
      if (dp) dp[base + e] = l1_grad_element(p[base + e], t[base + e], scale);
    }
    sample_loss[size_t(s)] = sum / double(per_sample);
  }
  double total = 0.0;
  for (double l : sample_loss) total += l;
  return total;
}

}  // namespace hpmc
