// Batch normalization and dropout ops on the CPU, and the counter-based
// generator behind dropout's mask:
//   * Philox-4x32-10 against its published known-answer vectors; the keep
//     rate within a binomial bound over 1e6 draws; no correlation between
//     neighbouring elements, consecutive steps, streams or seeds beyond
//     5/sqrt(n); the mask a pure function of (seed, stream, step, index).
//   * dropout: hand-checked outputs (mask from a hand-assembled Philox call),
//     p = 0 and p = 1, backward by finite differences in double.
//   * batchnorm2d: hand-computed training and eval outputs and running
//     statistics; every gradient (training mode through the batch statistics,
//     eval mode, with and without the affine parameters) by finite
//     differences in double; the gradient convention; and golden values from
//     PyTorch in float64 (tools/golden/make_bn_pool.py): outputs, gradients
//     and running statistics over three training steps, then eval mode.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/counter_rng.h"
#include "core/rng.h"
#include "golden_bn_pool.h"
#include "layers/cpu/batchnorm_ops.h"
#include "layers/cpu/dropout_ops.h"
#include "testing.h"

namespace hpmc {
namespace {

// ---- the counter-based generator -------------------------------------------------------

TEST(CounterRng, PhiloxKnownAnswerVectors) {
  // Random123's kat_vectors for philox4x32 with 10 rounds: counter, key, output.
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 r =
        philox4x32(k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3], k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.out[i]) << "word " << i;
  }
}

TEST(CounterRng, WordIsPhiloxOfIndexOverFourAndStep) {
  const uint64_t key = counter_key(42, 7);
  for (uint64_t step : {uint64_t(0), uint64_t(3), uint64_t(1) << 40})
    for (uint64_t i : {uint64_t(0), uint64_t(5), uint64_t(1234567), (uint64_t(1) << 33) + 2}) {
      const uint64_t b = i / 4;
      const Philox4x32 r = philox4x32(uint32_t(b), uint32_t(b >> 32), uint32_t(step),
                                      uint32_t(step >> 32), uint32_t(key), uint32_t(key >> 32));
      EXPECT_EQ(counter_u32(key, step, i), r.v[i % 4]) << "step " << step << " index " << i;
    }
}

TEST(CounterRng, DropThresholdIsExact) {
  EXPECT_EQ(drop_threshold(0.0), 0u);
  EXPECT_EQ(drop_threshold(-1.0), 0u);
  EXPECT_EQ(drop_threshold(0.5), uint64_t(1) << 31);
  EXPECT_EQ(drop_threshold(0.25), uint64_t(1) << 30);
  EXPECT_EQ(drop_threshold(1.0), uint64_t(1) << 32);
  EXPECT_TRUE(counter_keep(0xffffffffu, drop_threshold(0.999999)));
  EXPECT_FALSE(counter_keep(0xffffffffu, drop_threshold(1.0)));
  EXPECT_TRUE(counter_keep(0u, drop_threshold(0.0)));
}

constexpr size_t kDraws = 1000000;

// The keep indicators of elements 0..n-1 of (seed, stream, step) at rate p.
std::vector<uint8_t> keeps(double p, uint64_t seed, uint64_t stream, uint64_t step, size_t n,
                           size_t first = 0) {
  const DropoutMask m = make_dropout_mask(p, seed, stream, step);
  std::vector<uint8_t> k(n);
  for (size_t i = 0; i < n; ++i) k[i] = m.keep(first + i) ? 1 : 0;
  return k;
}

// Pearson correlation of two 0/1 sequences.
double correlation(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  double sa = 0, sb = 0, sab = 0;
  for (size_t i = 0; i < n; ++i) {
    sa += a[i];
    sb += b[i];
    sab += a[i] * b[i];
  }
  const double ma = sa / n, mb = sb / n;
  const double cov = sab / n - ma * mb;
  return cov / std::sqrt(ma * (1 - ma) * mb * (1 - mb));
}

TEST(CounterRng, KeepRateWithinABinomialBound) {
  // Kept ~ Binomial(n, 1 − p): 5 standard deviations (a false alarm about once
  // in 1.7 million runs), which still catches a rate off by 0.3% at p = 0.5.
  for (double p : {0.5, 0.1, 0.9, 0.3}) {
    const std::vector<uint8_t> k = keeps(p, 2024, 1, 17, kDraws);
    double kept = 0;
    for (uint8_t v : k) kept += v;
    const double expect = kDraws * (1 - p), sd = std::sqrt(kDraws * p * (1 - p));
    EXPECT_LE(std::fabs(kept - expect), 5 * sd) << "p = " << p << ": kept " << kept;
  }
}

TEST(CounterRng, WordsAreUniform) {
  // The mean of u = word / 2^32 (variance 1/12) and the count in each of 16
  // equal bins (a chi-square with 15 degrees of freedom; 50 is p ≈ 1e-5).
  const uint64_t key = counter_key(5, 0);
  double sum = 0;
  std::vector<double> bins(16, 0);
  for (size_t i = 0; i < kDraws; ++i) {
    const uint32_t w = counter_u32(key, 3, i);
    sum += w / 4294967296.0;
    bins[w >> 28] += 1;
  }
  EXPECT_LE(std::fabs(sum / kDraws - 0.5), 5 * std::sqrt(1.0 / 12 / kDraws));
  double chi2 = 0;
  for (double b : bins) chi2 += (b - kDraws / 16.0) * (b - kDraws / 16.0) / (kDraws / 16.0);
  EXPECT_LT(chi2, 50.0);
}

TEST(CounterRng, NoCorrelationBetweenNeighboursStepsStreamsOrSeeds) {
  // Under independence the sample correlation has standard deviation
  // 1/sqrt(n) = 0.001; the bound is 5 of those.
  const double bound = 5 / std::sqrt(double(kDraws));
  const std::vector<uint8_t> base = keeps(0.5, 99, 2, 10, kDraws + 8);
  // Lags 1..3 pair words of one Philox call, lag 4 the same word of the next.
  for (size_t lag : {1u, 2u, 3u, 4u, 5u}) {
    std::vector<uint8_t> a(base.begin(), base.begin() + long(kDraws));
    std::vector<uint8_t> b(base.begin() + long(lag), base.begin() + long(lag + kDraws));
    EXPECT_LE(std::fabs(correlation(a, b)), bound) << "neighbours at lag " << lag;
  }
  const std::vector<uint8_t> a(base.begin(), base.begin() + long(kDraws));
  EXPECT_LE(std::fabs(correlation(a, keeps(0.5, 99, 2, 11, kDraws))), bound) << "next step";
  EXPECT_LE(std::fabs(correlation(a, keeps(0.5, 99, 2, 9, kDraws))), bound) << "previous step";
  EXPECT_LE(std::fabs(correlation(a, keeps(0.5, 99, 3, 10, kDraws))), bound) << "next stream";
  EXPECT_LE(std::fabs(correlation(a, keeps(0.5, 100, 2, 10, kDraws))), bound) << "next seed";
  // The same element a whole batch of steps later, and a mask shifted by a
  // step's worth of elements: no accidental reuse of counters.
  EXPECT_LE(std::fabs(correlation(a, keeps(0.5, 99, 2, 10 + 64, kDraws))), bound);
  EXPECT_LE(std::fabs(correlation(a, keeps(0.5, 99, 2, 11, kDraws, 4))), bound);
}

TEST(CounterRng, MaskIsAPureFunctionOfItsCounters) {
  const DropoutMask m = make_dropout_mask(0.3, 7, 1, 5);
  // Any order, any grouping: keep4's bits are keep()'s, and a second mask
  // built from the same values agrees.
  const DropoutMask again = make_dropout_mask(0.3, 7, 1, 5);
  for (uint64_t b = 1000; b-- > 0;) {
    const unsigned bits = m.keep4(b);
    for (int k = 0; k < 4; ++k) {
      ASSERT_EQ(bool((bits >> k) & 1u), m.keep(4 * b + k)) << 4 * b + k;
      ASSERT_EQ(again.keep(4 * b + k), m.keep(4 * b + k));
    }
  }
  // A different step, stream or seed gives a different mask (about half the
  // elements differ at p = 0.5; at least a third is certain at 1000 draws).
  auto differing = [](const DropoutMask& a, const DropoutMask& b) {
    int d = 0;
    for (uint64_t i = 0; i < 1000; ++i) d += a.keep(i) != b.keep(i);
    return d;
  };
  const DropoutMask h = make_dropout_mask(0.5, 7, 1, 5);
  EXPECT_GT(differing(h, make_dropout_mask(0.5, 7, 1, 6)), 333);
  EXPECT_GT(differing(h, make_dropout_mask(0.5, 7, 2, 5)), 333);
  EXPECT_GT(differing(h, make_dropout_mask(0.5, 8, 1, 5)), 333);
}

// ---- dropout ------------------------------------------------------------------------------

TEST(Dropout, KeptElementsAreScaledTheRestAreZero) {
  const double p = 0.25;
  const uint64_t seed = 11, stream = 3, step = 8;
  Rng rng(1);
  const size_t n = 4 * 37 + 3;  // a partial last Philox block
  std::vector<float> x(n), y(n, 99.f);
  for (float& v : x) v = rng.uniform(-2.f, 2.f);
  dropout_forward(x.data(), y.data(), n, p, seed, stream, step);
  const uint64_t key = counter_key(seed, stream);
  const float scale = float(1.0 / 0.75);
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    // The keep decision from a hand-assembled Philox call: word i mod 4 of
    // counter (i / 4, 0, step, 0) under the stream's key, against 0.25 · 2^32.
    const Philox4x32 r = philox4x32(uint32_t(i / 4), 0, uint32_t(step), 0, uint32_t(key),
                                    uint32_t(key >> 32));
    const bool keep = r.v[i % 4] >= (uint32_t(1) << 30);
    kept += keep;
    EXPECT_EQ(y[i], keep ? x[i] * scale : 0.f) << "element " << i;
  }
  EXPECT_GT(kept, n / 2);
  EXPECT_LT(kept, n);
}

TEST(Dropout, PZeroKeepsEverythingAndPOneDropsEverything) {
  Rng rng(2);
  std::vector<float> x(101), y(101);
  for (float& v : x) v = rng.uniform(-1.f, 1.f);
  dropout_forward(x.data(), y.data(), x.size(), 0.0, 1, 0, 0);
  EXPECT_EQ(y, x);
  dropout_forward(x.data(), y.data(), x.size(), 1.0, 1, 0, 0);
  for (float v : y) EXPECT_EQ(v, 0.f);
  dropout_backward(x.data(), y.data(), x.size(), 1.0, 1, 0, 0);
  for (float v : y) EXPECT_EQ(v, 0.f);
}

TEST(Dropout, MaskOfAnElementDoesNotDependOnTheTensorSize) {
  // Element i's decision depends on i, not on n (a partial last block included).
  std::vector<float> ones(1000, 1.f), big(1000), small(7);
  dropout_forward(ones.data(), big.data(), 1000, 0.5, 3, 1, 2);
  dropout_forward(ones.data(), small.data(), 7, 0.5, 3, 1, 2);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(small[i], big[i]) << i;
}

TEST(Dropout, FractionKeptInALargeTensor) {
  // The parallel path (n ≥ kDropoutParallelMin) and the binomial bound.
  const size_t n = 3 * 5 * 97 * 101;
  ASSERT_GE(n, kDropoutParallelMin);
  std::vector<float> ones(n, 1.f), y(n);
  dropout_forward(ones.data(), y.data(), n, 0.2, 77, 0, 1);
  double kept = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.f || v == float(1.0 / 0.8)) << v;
    kept += v != 0.f;
  }
  EXPECT_LE(std::fabs(kept - 0.8 * n), 5 * std::sqrt(n * 0.2 * 0.8));
}

TEST(Dropout, BackwardMatchesFiniteDifferences) {
  Rng rng(3);
  for (size_t n : {1u, 5u, 3u * 5 * 7}) {
    for (double p : {0.5, 0.1}) {
      const std::vector<double> x = testing::random_vector(n, rng);
      const std::vector<double> w = testing::random_vector(n, rng);
      auto L = [&](const std::vector<double>& xv) {
        std::vector<double> y(n);
        dropout_forward(xv.data(), y.data(), n, p, 5, 2, 9);
        double s = 0;
        for (size_t i = 0; i < n; ++i) s += w[i] * y[i];
        return s;
      };
      std::vector<double> dx(n, 777.0);
      dropout_backward(w.data(), dx.data(), n, p, 5, 2, 9);
      testing::expect_gradients_close(dx, testing::numerical_gradient(L, x), 1e-8,
                                      "dropout n=" + std::to_string(n));
    }
  }
}

// ---- batchnorm2d -----------------------------------------------------------------------------

// One training (or eval) pass of the double ops on NCHW data, with the
// parameters and running statistics it updates.
struct Bn {
  BatchNormDims d;
  std::vector<double> gamma, beta, rmean, rvar, smean, sinvstd;
  bool affine = true;

  Bn(int n, int c, int h, int w, Rng& rng, bool aff = true)
      : d{n, c, size_t(h) * w}, affine(aff) {
    gamma = testing::random_vector(size_t(c), rng, 0.5, 1.5);
    beta = testing::random_vector(size_t(c), rng);
    rmean = testing::random_vector(size_t(c), rng);
    rvar = testing::random_vector(size_t(c), rng, 0.5, 2.0);
    smean.assign(size_t(c), 0);
    sinvstd.assign(size_t(c), 0);
  }
  size_t size() const { return size_t(d.n) * d.c * d.hw; }
  const double* g() const { return affine ? gamma.data() : nullptr; }
  const double* b() const { return affine ? beta.data() : nullptr; }
  // Training forward without touching the running statistics.
  std::vector<double> train(const double* x) {
    std::vector<double> y(size());
    batchnorm_forward_train(d, x, g(), b(), kBatchNormEps, kBatchNormMomentum, y.data(),
                            (double*)nullptr, (double*)nullptr, smean.data(), sinvstd.data());
    return y;
  }
  std::vector<double> eval(const double* x) const {
    std::vector<double> y(size());
    batchnorm_forward_eval(d, x, g(), b(), rmean.data(), rvar.data(), kBatchNormEps, y.data());
    return y;
  }
};

TEST(BatchNorm, TrainingForwardHandValuesAndRunningStatistics) {
  // N = 2, C = 2, H = 1, W = 2: channel 0 holds {1, 2, 3, 4} (positions 0, 1,
  // 4, 5), channel 1 holds {−1, −1, 1, 1}.
  const BatchNormDims d{2, 2, 2};
  const float x[] = {1, 2, -1, -1, 3, 4, 1, 1};
  const float gamma[] = {2.f, 0.5f}, beta[] = {0.5f, -1.f};
  float rmean[] = {0.f, 0.f}, rvar[] = {1.f, 1.f};
  double smean[2], sinvstd[2];
  float y[8];
  batchnorm_forward_train(d, x, gamma, beta, 1e-5, 0.1, y, rmean, rvar, smean, sinvstd);
  // Channel 0: mean 2.5, biased variance 1.25; channel 1: mean 0, variance 1.
  const double i0 = 1 / std::sqrt(1.25 + 1e-5), i1 = 1 / std::sqrt(1.0 + 1e-5);
  const double expect[] = {(1 - 2.5) * i0 * 2 + 0.5, (2 - 2.5) * i0 * 2 + 0.5, -i1 * 0.5 - 1,
                           -i1 * 0.5 - 1,            (3 - 2.5) * i0 * 2 + 0.5, (4 - 2.5) * i0 * 2 + 0.5,
                           i1 * 0.5 - 1,             i1 * 0.5 - 1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[i], expect[i], 1e-6) << i;
  EXPECT_DOUBLE_EQ(smean[0], 2.5);
  EXPECT_DOUBLE_EQ(smean[1], 0.0);
  EXPECT_DOUBLE_EQ(sinvstd[0], i0);
  EXPECT_DOUBLE_EQ(sinvstd[1], i1);
  // Momentum 0.1 with the unbiased variances 5/3 and 4/3.
  EXPECT_FLOAT_EQ(rmean[0], 0.25f);
  EXPECT_FLOAT_EQ(rmean[1], 0.f);
  EXPECT_FLOAT_EQ(rvar[0], float(0.9 + 0.1 * 5.0 / 3.0));
  EXPECT_FLOAT_EQ(rvar[1], float(0.9 + 0.1 * 4.0 / 3.0));
}

TEST(BatchNorm, EvalForwardUsesTheRunningStatistics) {
  const BatchNormDims d{2, 2, 2};
  const float x[] = {1, 2, -1, -1, 3, 4, 1, 1};
  const float gamma[] = {2.f, 0.5f}, beta[] = {0.5f, -1.f};
  const float rmean[] = {1.f, -2.f}, rvar[] = {4.f, 0.25f};
  float y[8];
  batchnorm_forward_eval(d, x, gamma, beta, rmean, rvar, 1e-5, y);
  const double i0 = 1 / std::sqrt(4 + 1e-5), i1 = 1 / std::sqrt(0.25 + 1e-5);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int k = 0; k < 2; ++k) {
        const int at = (n * 2 + c) * 2 + k;
        const double e = c == 0 ? (x[at] - 1) * i0 * 2 + 0.5 : (x[at] + 2) * i1 * 0.5 - 1;
        EXPECT_NEAR(y[at], e, 1e-6) << at;
      }
  // Without affine parameters: γ = 1, β = 0.
  batchnorm_forward_eval(d, x, (const float*)nullptr, (const float*)nullptr, rmean, rvar, 1e-5,
                         y);
  EXPECT_NEAR(y[0], 0.0, 1e-7);
  EXPECT_NEAR(y[5], 3 * i0, 1e-6);
}

TEST(BatchNorm, TrainingOutputIsNormalizedPerChannel) {
  Rng rng(4);
  Bn bn(3, 5, 7, 3, rng, /*affine=*/false);
  std::vector<double> x = testing::random_vector(bn.size(), rng, -3, 5);
  const std::vector<double> y = bn.train(x.data());
  for (int c = 0; c < 5; ++c) {
    double s = 0, q = 0;
    for (int n = 0; n < 3; ++n)
      for (size_t i = 0; i < 21; ++i) s += y[(size_t(n) * 5 + c) * 21 + i];
    for (int n = 0; n < 3; ++n)
      for (size_t i = 0; i < 21; ++i) q += std::pow(y[(size_t(n) * 5 + c) * 21 + i] - s / 63, 2);
    EXPECT_NEAR(s / 63, 0.0, 1e-12) << "channel " << c;
    // var / (var + eps), within 1e-5 of 1.
    EXPECT_NEAR(q / 63, 1.0, 2e-5) << "channel " << c;
  }
}

// L = Σ w·y as a function of (x, γ, β), its analytic gradient from backward
// with dy = w, against central differences.
void check_bn_gradients(int n, int c, int h, int w, bool train, bool affine, Rng& rng) {
  const std::string what = std::string(train ? "train" : "eval") + (affine ? "" : " no-affine") +
                           " " + std::to_string(n) + "x" + std::to_string(c) + "x" +
                           std::to_string(h) + "x" + std::to_string(w);
  Bn bn(n, c, h, w, rng, affine);
  const size_t sz = bn.size();
  const std::vector<double> x = testing::random_vector(sz, rng, -2, 3);
  const std::vector<double> wts = testing::random_vector(sz, rng);
  auto L = [&](const std::vector<double>& xv, const std::vector<double>& g,
               const std::vector<double>& b) {
    Bn t = bn;
    t.gamma = g;
    t.beta = b;
    const std::vector<double> y = train ? t.train(xv.data()) : t.eval(xv.data());
    double s = 0;
    for (size_t i = 0; i < sz; ++i) s += wts[i] * y[i];
    return s;
  };
  std::vector<double> dx(sz, 777.0), dg(size_t(c), 0.0), db(size_t(c), 0.0);
  if (train) {
    bn.train(x.data());
    batchnorm_backward_train(bn.d, x.data(), wts.data(), bn.g(), bn.smean.data(),
                             bn.sinvstd.data(), dx.data(), affine ? dg.data() : nullptr,
                             affine ? db.data() : nullptr);
  } else {
    batchnorm_backward_eval(bn.d, x.data(), wts.data(), bn.g(), bn.rmean.data(), bn.rvar.data(),
                            kBatchNormEps, dx.data(), affine ? dg.data() : nullptr,
                            affine ? db.data() : nullptr);
  }
  testing::expect_gradients_close(
      dx, testing::numerical_gradient([&](const std::vector<double>& v) { return L(v, bn.gamma, bn.beta); }, x),
      1e-6, what + " dx");
  if (!affine) return;
  testing::expect_gradients_close(
      dg, testing::numerical_gradient([&](const std::vector<double>& v) { return L(x, v, bn.beta); }, bn.gamma),
      1e-6, what + " dgamma");
  testing::expect_gradients_close(
      db, testing::numerical_gradient([&](const std::vector<double>& v) { return L(x, bn.gamma, v); }, bn.beta),
      1e-6, what + " dbeta");
}

TEST(BatchNorm, TrainingBackwardMatchesFiniteDifferencesThroughTheBatchStatistics) {
  Rng rng(5);
  check_bn_gradients(2, 3, 3, 2, true, true, rng);
  check_bn_gradients(1, 1, 1, 5, true, true, rng);  // batch 1: M = H·W = 5
  check_bn_gradients(3, 5, 1, 1, true, true, rng);  // 1×1 planes: M = N = 3
  check_bn_gradients(1, 3, 2, 3, true, true, rng);
  check_bn_gradients(2, 1, 1, 1, true, true, rng);  // M = 2, the smallest
  check_bn_gradients(2, 3, 3, 2, true, false, rng);
}

TEST(BatchNorm, EvalBackwardMatchesFiniteDifferences) {
  Rng rng(6);
  check_bn_gradients(2, 3, 3, 2, false, true, rng);
  check_bn_gradients(1, 1, 1, 1, false, true, rng);  // eval mode takes a single value
  check_bn_gradients(1, 5, 3, 1, false, true, rng);
  check_bn_gradients(2, 3, 1, 3, false, false, rng);
}

TEST(BatchNorm, ParameterGradientsAccumulateAndDxIsOverwritten) {
  Rng rng(7);
  const BatchNormDims d{2, 3, 4};
  std::vector<float> x(24), dy(24), y(24), gamma(3, 1.5f), beta(3, 0.25f);
  for (float& v : x) v = rng.uniform(-1.f, 1.f);
  for (float& v : dy) v = rng.uniform(-1.f, 1.f);
  double sm[3], si[3];
  batchnorm_forward_train(d, x.data(), gamma.data(), beta.data(), 1e-5, 0.1, y.data(),
                          (float*)nullptr, (float*)nullptr, sm, si);
  std::vector<float> dx1(24, 5.f), dx2(24, -9.f), dg(3, 0.f), db(3, 0.f);
  batchnorm_backward_train(d, x.data(), dy.data(), gamma.data(), sm, si, dx1.data(), dg.data(),
                           db.data());
  const std::vector<float> dg1 = dg, db1 = db;
  batchnorm_backward_train(d, x.data(), dy.data(), gamma.data(), sm, si, dx2.data(), dg.data(),
                           db.data());
  EXPECT_EQ(dx1, dx2);  // overwritten, whatever dx held
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(dg[c], dg1[c] + dg1[c]);
    EXPECT_EQ(db[c], db1[c] + db1[c]);
  }
  // A null dx still gives the parameter gradients.
  std::vector<float> dg3(3, 0.f), db3(3, 0.f);
  batchnorm_backward_train(d, x.data(), dy.data(), gamma.data(), sm, si, (float*)nullptr,
                           dg3.data(), db3.data());
  EXPECT_EQ(dg3, dg1);
  EXPECT_EQ(db3, db1);
}

// ---- batchnorm2d against PyTorch (float64) ------------------------------------------------

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// The script's inputs: x_k = 1.5 sin(0.37 i + 0.9 k) + 0.2 k + 0.1 (i % 5),
// dy_k = sin(0.23 i + k); the eval pass uses k = 3.
std::vector<double> bn_golden_x(size_t n, int k) {
  std::vector<double> s = golden_wave(n, 0.37, 0.9 * k, 0), r = golden_wave(n, 0, 0, 0.1);
  for (size_t i = 0; i < n; ++i) s[i] = 1.5 * s[i] + 0.2 * k + r[i];
  return s;
}

template <typename T>
void check_bn_golden(double tol) {
  const BatchNormDims d{kBnN, kBnC, size_t(kBnH) * kBnW};
  const size_t n = size_t(kBnN) * kBnC * kBnH * kBnW;
  const std::vector<T> gamma = cast<T>({std::begin(kBnGamma), std::end(kBnGamma)});
  const std::vector<T> beta = cast<T>({std::begin(kBnBeta), std::end(kBnBeta)});
  std::vector<T> rmean(kBnC, T(0)), rvar(kBnC, T(1));
  double sm[kBnC], si[kBnC];
  const double* ys[] = {kBnTrainY0, kBnTrainY1, kBnTrainY2};
  const double* dxs[] = {kBnTrainDx0, kBnTrainDx1, kBnTrainDx2};
  const double* dgs[] = {kBnTrainDgamma0, kBnTrainDgamma1, kBnTrainDgamma2};
  const double* dbs[] = {kBnTrainDbeta0, kBnTrainDbeta1, kBnTrainDbeta2};
  for (int k = 0; k < 3; ++k) {
    const std::vector<T> x = cast<T>(bn_golden_x(n, k));
    const std::vector<T> dy = cast<T>(golden_wave(n, 0.23, double(k), 0));
    std::vector<T> y(n), dx(n), dg(kBnC, T(0)), db(kBnC, T(0));
    batchnorm_forward_train(d, x.data(), gamma.data(), beta.data(), kBatchNormEps,
                            kBatchNormMomentum, y.data(), rmean.data(), rvar.data(), sm, si);
    batchnorm_backward_train(d, x.data(), dy.data(), gamma.data(), sm, si, dx.data(), dg.data(),
                             db.data());
    const std::string step = "training step " + std::to_string(k);
    EXPECT_LE(testing::max_rel_error(y.data(), ys[k], n), tol) << step << " y";
    EXPECT_LE(testing::max_rel_error(dx.data(), dxs[k], n), tol) << step << " dx";
    EXPECT_LE(testing::max_rel_error(dg.data(), dgs[k], kBnC), tol) << step << " dgamma";
    EXPECT_LE(testing::max_rel_error(db.data(), dbs[k], kBnC), tol) << step << " dbeta";
  }
  EXPECT_LE(testing::max_rel_error(rmean.data(), kBnRunningMean, kBnC), tol) << "running_mean";
  EXPECT_LE(testing::max_rel_error(rvar.data(), kBnRunningVar, kBnC), tol) << "running_var";

  const std::vector<T> x = cast<T>(bn_golden_x(n, 3));
  const std::vector<T> dy = cast<T>(golden_wave(n, 0.23, 3.0, 0));
  std::vector<T> y(n), dx(n), dg(kBnC, T(0)), db(kBnC, T(0));
  batchnorm_forward_eval(d, x.data(), gamma.data(), beta.data(), rmean.data(), rvar.data(),
                         kBatchNormEps, y.data());
  batchnorm_backward_eval(d, x.data(), dy.data(), gamma.data(), rmean.data(), rvar.data(),
                          kBatchNormEps, dx.data(), dg.data(), db.data());
  EXPECT_LE(testing::max_rel_error(y.data(), kBnEvalY, n), tol) << "eval y";
  EXPECT_LE(testing::max_rel_error(dx.data(), kBnEvalDx, n), tol) << "eval dx";
  EXPECT_LE(testing::max_rel_error(dg.data(), kBnEvalDgamma, kBnC), tol) << "eval dgamma";
  EXPECT_LE(testing::max_rel_error(db.data(), kBnEvalDbeta, kBnC), tol) << "eval dbeta";
}

TEST(BatchNorm, MatchesPyTorchFloat64OverThreeTrainingStepsAndEval) {
  EXPECT_EQ(kBnNumBatchesTracked, 3);
  check_bn_golden<double>(1e-12);
}

TEST(BatchNorm, FloatOpsTrackPyTorchFloat64) {
  // Float inputs (rounded from the double formulas) and float outputs: a few
  // float ulps of the O(1) values, the gradients summed over 24 values.
  check_bn_golden<float>(2e-6);
}

}  // namespace
}  // namespace hpmc
