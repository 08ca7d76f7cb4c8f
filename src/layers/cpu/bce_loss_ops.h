// bce_loss_ops.h — binary cross-entropy on logits (YAML "bce_with_logits")
// and on probabilities ("bce"), templated on the scalar so tests can run them
// in double for finite-difference checks; the CPU losses call them with
// T = float. The GPU kernels (layers/gpu/elementwise_loss_kernels.cu)
// restate the same formulas, and the GPU loss reports a bad input with
// bce_range_error.
//
// Layout: n samples of `per_sample` contiguous elements each, for the
// prediction p, the target t and the gradient dp alike (an autoencoder's
// target is its input image, in [0, 1]).
// Loss, per element, in double (PyTorch's, torch 1.13):
//   bce_with_logits  l = max(x, 0) − x·t + log1p(e^−|x|)  (x = p, a logit):
//                    no exp overflows for any x, and l is exact to rounding
//                    for large |x| (1000 with t = 0 gives 1000).
//   bce              l = −(t · max(log p, −100) + (1 − t) · max(log(1 − p), −100)),
//                    evaluated as (t − 1)·max(log(1 − p), −100) − t·max(log p, −100):
//                    each log clamped at −100 as PyTorch does, so p = 0 or 1
//                    gives a finite loss (100 per wrong element).
// Per-sample loss l_s = (1 / per_sample) · Σ_e l (summed in double); batch
// loss L = (1 / n) · Σ_s l_s — the 'mean' reduction of PyTorch's
// BCEWithLogitsLoss and BCELoss. The functions return Σ_s l_s (the caller
// accumulates it and divides once).
// Gradient dL/dp, written only when dp is non-null and then overwritten,
// computed in double and rounded once to T (m = n · per_sample):
//   bce_with_logits  (σ(x) − t) / m, σ evaluated without overflow as in
//                    activation_ops.h's sigmoid_value;
//   bce              (p − t) / max((1 − p)·p, ε) / m with PyTorch's EPSILON
//                    ε = float(1e−12): p = 0 with t = 1 gives about −1e12 / m,
//                    not −inf.
// Input checks (bce only). A target outside [0, 1] (NaN included) and a
// prediction outside [0, 1] that is not NaN are errors: bce_loss throws
// (DataError for a target, ConfigError for a prediction: the model's last
// layer is wrong), naming the first bad element, before it writes anything
// to dp. A NaN prediction is not an error (PyTorch rejects it): it gives a
// NaN loss, which the trainer reports as divergence, as it does for every
// other loss. bce_with_logits accepts any finite or infinite value; a NaN in
// either input makes the loss NaN.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iomanip>
#include <vector>

#include "core/error.h"

namespace hpmc {

// PyTorch's clamp of each log in BCELoss, and its floor of p·(1 − p) in the
// gradient: a float constant 1e-12 in ATen (9.99999996e-13 in double).
constexpr double kBceLogFloor = -100.0;
constexpr double kBceGradEpsilon = double(1e-12f);

// `a < b ? b : a`: std::max's NaN behaviour (a NaN `a` is kept), which
// PyTorch's clamps inherit; fmax would drop the NaN.
inline double bce_max(double a, double b) { return a < b ? b : a; }

// σ(x) in double without overflow.
inline double bce_sigmoid(double x) {
  const double z = std::exp(-std::fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + z) : z / (1.0 + z);
}

inline double bce_with_logits_element(double x, double t) {
  return bce_max(x, 0.0) - x * t + std::log1p(std::exp(-std::fabs(x)));
}

inline double bce_element(double p, double t) {
  return (t - 1.0) * bce_max(std::log(1.0 - p), kBceLogFloor) -
         t * bce_max(std::log(p), kBceLogFloor);
}

inline double bce_grad_element(double p, double t) {
  return (p - t) / bce_max((1.0 - p) * p, kBceGradEpsilon);
}

// Whether bce accepts the value: a target in [0, 1]; a prediction in [0, 1]
// or NaN.
inline bool bce_target_ok(double t) { return t >= 0.0 && t <= 1.0; }
inline bool bce_pred_ok(double p) { return std::isnan(p) || (p >= 0.0 && p <= 1.0); }

// The error for a bad bce input: sample s of the batch, element e within the
// sample. `where` is appended (the GPU says it found it there).
[[noreturn]] inline void bce_range_error(int64_t s, size_t e, bool is_target, double value,
                                         const char* where = "") {
  if (is_target)
    throw DataError(str("bce: target ", std::setprecision(9), value, " at sample ", s,
                        " of the batch, element ", e,
                        ", is outside [0, 1]; bce needs targets in [0, 1] (images scaled to "
                        "[0, 1]), or use mse",
                        where));
  throw ConfigError(str("bce: prediction ", std::setprecision(9), value, " at sample ", s,
                        " of the batch, element ", e,
                        ", is outside [0, 1]; bce takes probabilities: end the model with a "
                        "sigmoid layer, or use bce_with_logits on the last layer's output",
                        where));
}

template <typename T>
double bce_with_logits_loss(const T* p, const T* t, T* dp, int64_t n, size_t per_sample) {
  if (n <= 0 || per_sample == 0) return 0.0;
  const double inv_m = 1.0 / (double(n) * double(per_sample));
  // Per-sample sums land in a vector and are added serially afterwards, so
  // the result does not depend on the thread count.
  std::vector<double> sample_loss(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n; ++s) {
    const size_t base = size_t(s) * per_sample;
    double sum = 0.0;
    for (size_t e = 0; e < per_sample; ++e) {
      const double x = double(p[base + e]), tv = double(t[base + e]);
      sum += bce_with_logits_element(x, tv);
      if (dp) dp[base + e] = T((bce_sigmoid(x) - tv) * inv_m);
    }
    sample_loss[size_t(s)] = sum / double(per_sample);
  }
  double total = 0.0;
  for (double l : sample_loss) total += l;
  return total;
}

// Throws before writing anything if an input is out of range (see above).
template <typename T>
double bce_loss(const T* p, const T* t, T* dp, int64_t n, size_t per_sample) {
  if (n <= 0 || per_sample == 0) return 0.0;
  const double inv_m = 1.0 / (double(n) * double(per_sample));
  // Pass 1 finds each sample's first bad element (an exception must not
  // leave an OpenMP region); the first bad sample's is reported.
  constexpr size_t kNone = ~size_t(0);
  std::vector<size_t> bad(static_cast<size_t>(n), kNone);
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n; ++s) {
    const size_t base = size_t(s) * per_sample;
    for (size_t e = 0; e < per_sample; ++e)
      if (!bce_target_ok(double(t[base + e])) || !bce_pred_ok(double(p[base + e]))) {
        bad[size_t(s)] = e;
        break;
      }
  }
  for (int64_t s = 0; s < n; ++s) {
    const size_t e = bad[size_t(s)];
    if (e == kNone) continue;
    const size_t i = size_t(s) * per_sample + e;
    const bool is_target = !bce_target_ok(double(t[i]));
    bce_range_error(s, e, is_target, is_target ? double(t[i]) : double(p[i]));
  }
  std::vector<double> sample_loss(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n; ++s) {
    const size_t base = size_t(s) * per_sample;
    double sum = 0.0;
    for (size_t e = 0; e < per_sample; ++e) {
      const double pv = double(p[base + e]), tv = double(t[base + e]);
      sum += bce_element(pv, tv);
      if (dp) dp[base + e] = T(bce_grad_element(pv, tv) * inv_m);
    }
    sample_loss[size_t(s)] = sum / double(per_sample);
  }
  double total = 0.0;
  for (double l : sample_loss) total += l;
  return total;
}

}  // namespace hpmc
