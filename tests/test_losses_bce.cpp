// The element-wise losses' ops: bce_with_logits and bce (bce_loss_ops.h) and
// l1 (l1_loss_ops.h). Known values by hand (logits of ±1000, predictions of
// exactly 0 and 1 with PyTorch's log clamp and gradient floor, p = t for l1);
// d(mean loss)/d pred against central finite differences in double; the
// double ops against PyTorch float64 (tests/golden_activations.h) and the
// float ops to float rounding; bce's input errors (one line, naming the loss,
// the element and what to do; nothing written); NaN; the return convention
// (Σ per-sample losses; dp overwritten; a null dp skipped).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "golden_activations.h"
#include "layers/cpu/bce_loss_ops.h"
#include "layers/cpu/l1_loss_ops.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::ulp_distance;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kLog2 = 0.6931471805599453;

enum class Kind { kBceWithLogits, kBce, kL1 };

template <typename T>
double run(Kind k, const T* p, const T* t, T* dp, int64_t n, size_t per) {
  switch (k) {
    case Kind::kBceWithLogits: return bce_with_logits_loss(p, t, dp, n, per);
    case Kind::kBce: return bce_loss(p, t, dp, n, per);
    case Kind::kL1: return l1_loss(p, t, dp, n, per);
  }
  return 0;
}

const char* name(Kind k) {
  return k == Kind::kBceWithLogits ? "bce_with_logits" : k == Kind::kBce ? "bce" : "l1";
}

// ---- hand-computed values ---------------------------------------------------------

TEST(LossesBce, BceWithLogitsKnownValuesAndLargeLogits) {
  // One sample of 6 elements (m = 6).
  const std::vector<float> x = {0.0f, 1000.0f, -1000.0f, -1000.0f, 1000.0f, 2.0f};
  const std::vector<float> t = {0.5f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f};
  std::vector<float> dp(6, 99.f);
  const double sum = bce_with_logits_loss(x.data(), t.data(), dp.data(), 1, 6);
  // log 2; 1000 (a naive log(1 − σ(1000)) is log 0); 0; 1000; 0;
  // log(1 + e^−2) = 0.1269280110429725.
  const double want = (kLog2 + 1000 + 0 + 1000 + 0 + 0.1269280110429725) / 6;
  EXPECT_NEAR(sum, want, 1e-13);
  // (σ(x) − t) / 6.
  const std::vector<float> want_dp = {0.0f, float(1.0 / 6), 0.0f, float(-1.0 / 6), 0.0f,
                                      float((0.8807970779778823 - 1) / 6)};
  for (size_t i = 0; i < 6; ++i) EXPECT_LE(ulp_distance(dp[i], want_dp[i]), 1) << i;
  // Two samples: the sum of the per-sample means.
  const std::vector<float> x2 = {0, 0, 1000, 1000}, t2 = {0.5f, 0.5f, 0, 0};
  EXPECT_NEAR(bce_with_logits_loss(x2.data(), t2.data(), static_cast<float*>(nullptr), 2, 2),
              kLog2 + 1000, 1e-12);
}

TEST(LossesBce, BceKnownValuesClampAndGradientFloor) {
  const std::vector<float> p = {0.5f, 0.0f, 1.0f, 1.0f, 0.25f, 0.0f};
  const std::vector<float> t = {0.5f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  std::vector<float> dp(6, 99.f);
  const double sum = bce_loss(p.data(), t.data(), dp.data(), 1, 6);
  // log 2; log 0 clamped to −100 → 100; 0; 100; −log 0.25; 0.
  EXPECT_NEAR(sum, (kLog2 + 100 + 0 + 100 + 1.3862943611198906 + 0) / 6, 1e-13);
  // (p − t) / max((1 − p)·p, float(1e−12)) / 6: p = 0, t = 1 gives
  // −1/9.99999996e−13/6 instead of −inf; p = t at the ends gives 0.
  const double eps = double(1e-12f);
  EXPECT_EQ(dp[0], 0.0f);
  EXPECT_EQ(dp[1], float(-1.0 / eps * (1.0 / 6)));
  EXPECT_EQ(dp[2], 0.0f);
  EXPECT_EQ(dp[3], float(1.0 / eps * (1.0 / 6)));
  EXPECT_EQ(dp[4], float(-4.0 / 6));  // (0.25 − 1) / (0.75 · 0.25)
  EXPECT_EQ(dp[5], 0.0f);
}

TEST(LossesBce, L1KnownValuesAndSignAtZero) {
  const std::vector<float> p = {1.0f, -2.0f, 0.5f, 3.0f, 0.0f, -0.0f};
  const std::vector<float> t = {0.0f, 1.0f, 0.5f, 5.0f, -0.0f, 0.0f};
  std::vector<float> dp(6, 99.f);
  // Two samples of 3: (1 + 3 + 0)/3 + (2 + 0 + 0)/3 = 2.
  EXPECT_DOUBLE_EQ(l1_loss(p.data(), t.data(), dp.data(), 2, 3), 2.0);
  const float s = float(1.0 / 6);
  EXPECT_EQ(dp, (std::vector<float>{s, -s, 0.0f, -s, 0.0f, 0.0f}));
}

TEST(LossesBce, GradientIsOverwrittenAndNullSkipsIt) {
  Rng rng(1701);
  for (Kind k : {Kind::kBceWithLogits, Kind::kBce, Kind::kL1}) {
    const size_t count = 24;
    std::vector<float> p(count), t(count);
    for (auto& v : p) v = rng.uniform(0.05f, 0.95f);
    for (auto& v : t) v = rng.uniform01();
    std::vector<float> a(count, 99.f), b(count, -5.f);
    const double s1 = run(k, p.data(), t.data(), a.data(), 4, 6);
    const double s2 = run(k, p.data(), t.data(), b.data(), 4, 6);
    const double s3 = run<float>(k, p.data(), t.data(), nullptr, 4, 6);
    EXPECT_EQ(a, b) << name(k) << ": dp depends on its previous contents";
    EXPECT_EQ(s1, s2) << name(k);
    EXPECT_EQ(s1, s3) << name(k) << ": a null dp changes the loss";
    EXPECT_EQ(run<float>(k, p.data(), t.data(), nullptr, 0, 6), 0.0) << name(k);
  }
}

// ---- finite differences in double --------------------------------------------------

TEST(LossesBce, GradientsMatchFiniteDifferences) {
  Rng rng(1702);
  struct Case {
    int n;
    size_t per;
  };
  for (Kind k : {Kind::kBceWithLogits, Kind::kBce, Kind::kL1}) {
    for (const Case& c : {Case{1, 1}, Case{1, 35}, Case{4, 9}, Case{3, 10}}) {
      const size_t count = size_t(c.n) * c.per;
      std::vector<double> p, t = testing::random_vector(count, rng, 0, 1);
      if (k == Kind::kBce)
        p = testing::random_vector(count, rng, 0.03, 0.97);
      else
        p = testing::random_vector(count, rng, -4, 4);
      if (k == Kind::kBceWithLogits && count > 4) p[0] = 17.5, p[1] = -23.0, p[2] = 0.0;
      std::vector<bool> kink(count);
      if (k == Kind::kL1)
        for (size_t i = 0; i < count; ++i) kink[i] = std::fabs(p[i] - t[i]) < 1e-4;
      auto mean_loss = [&](const std::vector<double>& pv) {
        return run<double>(k, pv.data(), t.data(), nullptr, c.n, c.per) / c.n;
      };
      std::vector<double> analytic(count, 777.0);
      run(k, p.data(), t.data(), analytic.data(), c.n, c.per);
      testing::expect_gradients_close(analytic, testing::numerical_gradient(mean_loss, p), 1e-7,
                                      std::string(name(k)) + " n=" + std::to_string(c.n) +
                                          " per=" + std::to_string(c.per),
                                      kink);
    }
  }
}

// ---- PyTorch float64 ---------------------------------------------------------------

TEST(LossesBce, MatchPyTorchFloat64) {
  constexpr int n = 3;
  constexpr size_t per = 4, count = n * per;
  struct Golden {
    Kind kind;
    const double *p, *t, *loss, *grad;
  };
  const Golden cases[] = {
      {Kind::kBceWithLogits, kLogits, kLogitTargets, kBceWithLogitsLoss, kBceWithLogitsGrad},
      {Kind::kBce, kProbs, kProbTargets, kBceLoss, kBceGrad},
      {Kind::kL1, kL1Pred, kL1Target, kL1Loss, kL1Grad}};
  for (const Golden& g : cases) {
    const std::string what = name(g.kind);
    std::vector<double> dp(count);
    const double mean = run<double>(g.kind, g.p, g.t, dp.data(), n, per) / n;
    EXPECT_NEAR(mean, g.loss[0], 1e-14 * std::fabs(g.loss[0])) << what << " double loss";
    for (size_t i = 0; i < count; ++i)
      EXPECT_NEAR(dp[i], g.grad[i], 1e-14 * std::fabs(g.grad[i]) + 1e-300)
          << what << " double grad[" << i << "]";
    // Float inputs are the same values; the loss is summed in double, the
    // gradient computed in double and rounded once: within an ulp.
    std::vector<float> pf(g.p, g.p + count), tf(g.t, g.t + count), dpf(count);
    const double meanf = run<float>(g.kind, pf.data(), tf.data(), dpf.data(), n, per) / n;
    EXPECT_NEAR(meanf, g.loss[0], 1e-14 * std::fabs(g.loss[0])) << what << " float loss";
    for (size_t i = 0; i < count; ++i)
      EXPECT_LE(ulp_distance(dpf[i], float(g.grad[i])), 1)
          << what << " float grad[" << i << "]: " << dpf[i] << " vs " << g.grad[i];
  }
}

// ---- bce's input errors and NaN ----------------------------------------------------

template <typename E>
std::string expect_throw_message(const std::vector<float>& p, const std::vector<float>& t,
                                 int n, size_t per) {
  std::vector<float> dp(p.size(), 42.f);
  try {
    bce_loss(p.data(), t.data(), dp.data(), n, per);
  } catch (const E& e) {
    for (float v : dp) EXPECT_EQ(v, 42.f) << "bce wrote dp before throwing";
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "bce accepted an input outside [0, 1]";
  return "";
}

void expect_has(const std::string& m, const char* part) {
  EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' not in: " << m;
}

TEST(LossesBce, BceRejectsTargetsOutsideUnitIntervalWithADataError) {
  std::vector<float> p(8, 0.5f), t(8, 0.25f);
  t[6] = 1.5f;  // sample 1, element 2
  t[7] = -1.0f;
  const std::string m = expect_throw_message<DataError>(p, t, 2, 4);
  expect_has(m, "bce: target 1.5 at sample 1");
  expect_has(m, "element 2");
  expect_has(m, "[0, 1]");
  t[6] = kNaN;
  expect_has(expect_throw_message<DataError>(p, t, 2, 4), "target nan at sample 1");
  // Slightly above 1 is told apart from 1 in the message.
  t[6] = 1.00000012f, t[7] = 0.5f;
  expect_has(expect_throw_message<DataError>(p, t, 2, 4), "target 1.00000012 ");
}

TEST(LossesBce, BceRejectsPredictionsOutsideUnitIntervalWithAConfigError) {
  std::vector<float> p(6, 0.5f), t(6, 1.0f);
  p[4] = -0.25f;  // sample 2, element 0
  const std::string m = expect_throw_message<ConfigError>(p, t, 3, 2);
  expect_has(m, "bce: prediction -0.25 at sample 2");
  expect_has(m, "element 0");
  expect_has(m, "sigmoid");
  expect_has(m, "bce_with_logits");
  p[4] = std::numeric_limits<float>::infinity();
  expect_has(expect_throw_message<ConfigError>(p, t, 3, 2), "prediction inf");
  // The first bad element in sample order is named, the target before the
  // prediction at the same element.
  p[1] = 2.0f, t[1] = 3.0f;
  expect_has(expect_throw_message<DataError>(p, t, 3, 2), "target 3 at sample 0");
}

TEST(LossesBce, NaNPredictionsGiveANaNLossNotAnError) {
  // bce: a NaN prediction is a diverged model, not a misconfigured one (the
  // trainer reports divergence); PyTorch would reject it.
  const std::vector<float> p = {0.5f, kNaN}, t = {1.0f, 0.0f};
  std::vector<float> dp(2);
  for (Kind k : {Kind::kBceWithLogits, Kind::kBce, Kind::kL1}) {
    double sum = 0;
    EXPECT_NO_THROW(sum = run(k, p.data(), t.data(), dp.data(), 1, 2)) << name(k);
    EXPECT_TRUE(std::isnan(sum)) << name(k);
    if (k == Kind::kL1)
      EXPECT_EQ(dp[1], 0.0f) << "l1: sign(NaN) is 0 as torch.sign's";
    else
      EXPECT_TRUE(std::isnan(dp[1])) << name(k);
    EXPECT_FALSE(std::isnan(dp[0])) << name(k);
  }
  // bce_with_logits: a NaN target is data the caller gave; the loss is NaN.
  const std::vector<float> x = {1.0f}, tn = {kNaN};
  EXPECT_TRUE(std::isnan(bce_with_logits_loss(x.data(), tn.data(), dp.data(), 1, 1)));
}

}  // namespace
}  // namespace hpmc
