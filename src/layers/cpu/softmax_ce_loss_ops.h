// softmax_ce_loss_ops.h — fused softmax + cross-entropy math, templated on
// the scalar so tests can run it in double for finite-difference checks;
// SoftmaxCrossEntropyCPU calls it with T = float.
//
// Layout: n rows of k contiguous logits z (a (N, K, 1, 1) tensor), n int32
// labels y, and dz laid out like z.
// Loss:     per-sample  l = logsumexp(z) − z[y], evaluated as
//           log Σ_j exp(z_j − m) − (z[y] − m) with m = max_j z_j, so no exp
//           overflows (logits of 1000 are fine) and the log never sees 0;
//           batch loss  L = (1 / n) · Σ l — PyTorch's CrossEntropyLoss('mean').
// Gradient: dL/dz = (softmax(z) − onehot(y)) / n, written only when dz is
//           non-null and then overwritten.
// Accuracy: a sample is correct when its argmax (the first maximum on ties)
//           equals its label.
// A NaN logit makes that sample's loss NaN (no exception), so the trainer's
// divergence check sees it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"

namespace hpmc {

struct SoftmaxCeResult {
  double loss_sum = 0.0;  // Σ over the batch of the per-sample losses
  int64_t correct = 0;    // samples whose argmax equals the label
};

// Throws DataError naming the sample, the label and k when a label lies
// outside [0, k).
template <typename T>
SoftmaxCeResult softmax_ce_loss(const T* z, const int32_t* y, T* dz, int64_t n, int k) {
  SoftmaxCeResult r;
  if (n <= 0) return r;
  // Labels are validated serially before the parallel loop: an exception must
  // not escape an OpenMP region (it would terminate the process), and dz is
  // left untouched when the batch is rejected.
  for (int64_t s = 0; s < n; ++s)
    if (y[s] < 0 || y[s] >= k)
      throw DataError(str("softmax_cross_entropy: sample ", s, " of the batch has label ", y[s],
                          ", outside [0, ", k, ") for a model with ", k,
                          " outputs; check the dataset's labels or the last layer's width"));
  const T inv_n = T(1.0 / double(n));
  // Per-sample losses are summed serially afterwards so the total does not
  // depend on the thread count.
  std::vector<double> sample_loss(static_cast<size_t>(n));
  int64_t correct = 0;
#pragma omp parallel for schedule(static) reduction(+ : correct)
  for (int64_t s = 0; s < n; ++s) {
    const T* zs = z + size_t(s) * size_t(k);
    int arg = 0;
    for (int j = 1; j < k; ++j)
      if (zs[j] > zs[arg]) arg = j;
    const double m = double(zs[arg]);
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += std::exp(double(zs[j]) - m);
    const int label = y[s];
    sample_loss[size_t(s)] = std::log(sum) - (double(zs[label]) - m);
    if (arg == label) ++correct;
    if (dz) {
      T* ds = dz + size_t(s) * size_t(k);
      const double inv_sum = 1.0 / sum;
      for (int j = 0; j < k; ++j) {
        const T softmax = T(std::exp(double(zs[j]) - m) * inv_sum);
        ds[j] = (softmax - T(j == label ? 1 : 0)) * inv_n;
      }
    }
  }
  for (double l : sample_loss) r.loss_sum += l;
  r.correct = correct;
  return r;
}

}  // namespace hpmc
