// The CPU losses: MSE and fused softmax cross-entropy. Known values by hand
// (including logits large enough to overflow a naive softmax); d(mean loss)/d
// pred against central finite differences of the templated ops in double; the
// accumulation contract of layers/loss.h; bad labels, shapes and NaN.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "layers/cpu/mse_loss.h"
#include "layers/cpu/mse_loss_ops.h"
#include "layers/cpu/softmax_ce_loss.h"
#include "layers/cpu/softmax_ce_loss_ops.h"
#include "testing.h"

namespace hpmc {
namespace {

Tensor make_f32(const Shape& s, const std::vector<float>& v) {
  Tensor t = Tensor::empty(s);
  EXPECT_EQ(v.size(), t.numel()) << "test bug: wrong number of values for " << s.str();
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

Tensor make_labels(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty(Shape(int(v.size()), 1, 1, 1), DType::kI32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

Tensor make_acc() { return Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64); }

void expect_values_near(const Tensor& t, const std::vector<double>& want, double tol,
                        const std::string& what) {
  ASSERT_EQ(t.numel(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.data<float>()[i], want[i], tol) << what << "[" << i << "]";
}

// ---- MSE -------------------------------------------------------------------

TEST(MseLoss, Properties) {
  MseLossCPU mse;
  EXPECT_EQ(std::string(mse.type()), "mse");
  EXPECT_EQ(mse.device(), Device::kCPU);
  EXPECT_FALSE(mse.is_classifier());
  EXPECT_EQ(mse.target_dtype(), DType::kF32);
}

TEST(MseLoss, KnownValue) {
  MseLossCPU mse;
  // Two samples of two elements: differences (1, 1) and (4, 0), per-sample
  // losses (1+1)/2 = 1 and (16+0)/2 = 8, sum 9 (batch mean 4.5).
  Tensor pred = make_f32(Shape(2, 1, 1, 2), {1, 2, 3, 4});
  Tensor target = make_f32(Shape(2, 1, 1, 2), {0, 1, -1, 4});
  Tensor dpred = Tensor::empty(pred.shape());
  Tensor acc = make_acc();
  mse.compute(pred, target, &dpred, acc);
  EXPECT_DOUBLE_EQ(acc.data<double>()[0], 9.0);
  EXPECT_EQ(acc.data<double>()[1], 0.0);
  // 2 (p − t) / (N · per_sample) = 2 (p − t) / 4.
  expect_values_near(dpred, {0.5, 0.5, 2.0, 0.0}, 0.0, "mse dpred");
}

TEST(MseLoss, AccumulatesAndNullGradientIsSkipped) {
  MseLossCPU mse;
  Tensor pred = make_f32(Shape(1, 3, 1, 1), {1, 2, 3});
  Tensor target = make_f32(Shape(1, 3, 1, 1), {1, 0, 0});
  Tensor acc = make_acc();
  acc.data<double>()[1] = 5;  // MSE leaves the accuracy slot alone
  mse.compute(pred, target, nullptr, acc);
  EXPECT_DOUBLE_EQ(acc.data<double>()[0], 13.0 / 3);
  mse.compute(pred, target, nullptr, acc);
  EXPECT_DOUBLE_EQ(acc.data<double>()[0], 26.0 / 3);
  EXPECT_EQ(acc.data<double>()[1], 5.0);
  // The gradient is overwritten, not accumulated.
  Tensor dpred = make_f32(pred.shape(), {100, 100, 100});
  mse.compute(pred, target, &dpred, acc);
  mse.compute(pred, target, &dpred, acc);
  expect_values_near(dpred, {0.0, 4.0 / 3, 2.0}, 1e-7, "mse dpred");
}

TEST(MseLoss, GradientMatchesFiniteDifferences) {
  const Shape shapes[] = {Shape(1, 1, 1, 1), Shape(1, 3, 5, 5), Shape(4, 1, 3, 3),
                          Shape(2, 5, 1, 3), Shape(3, 10, 1, 1)};
  Rng rng(61);
  for (const Shape& s : shapes) {
    const std::vector<double> t = testing::random_vector(s.count(), rng);
    const std::vector<double> p = testing::random_vector(s.count(), rng);
    auto mean_loss = [&](const std::vector<double>& pv) {
      return mse_loss<double>(pv.data(), t.data(), nullptr, s.n, s.per_sample()) / s.n;
    };
    std::vector<double> analytic(p.size(), 777.0);
    mse_loss(p.data(), t.data(), analytic.data(), s.n, s.per_sample());
    testing::expect_gradients_close(analytic, testing::numerical_gradient(mean_loss, p), 1e-6,
                                    "mse " + s.str());
  }
}

TEST(MseLoss, MatchesTheMeanOverAllElements) {
  // PyTorch's MSELoss('mean'): Σ (p − t)² / (N·C·H·W) equals the batch mean
  // of the per-sample means because every sample has the same size.
  Rng rng(62);
  const Shape s(3, 3, 4, 5);
  Tensor pred = testing::random_tensor(s, rng), target = testing::random_tensor(s, rng);
  double sq = 0;
  for (size_t i = 0; i < s.count(); ++i) {
    double d = double(pred.data<float>()[i]) - target.data<float>()[i];
    sq += d * d;
  }
  Tensor acc = make_acc();
  MseLossCPU().compute(pred, target, nullptr, acc);
  EXPECT_NEAR(acc.data<double>()[0] / s.n, sq / double(s.count()), 1e-12);
}

TEST(MseLoss, NaNGivesNaNLossNotACrash) {
  MseLossCPU mse;
  Tensor pred = make_f32(Shape(2, 2, 1, 1), {1, std::numeric_limits<float>::quiet_NaN(), 0, 0});
  Tensor target = make_f32(Shape(2, 2, 1, 1), {0, 0, 0, 0});
  Tensor dpred = Tensor::empty(pred.shape());
  Tensor acc = make_acc();
  EXPECT_NO_THROW(mse.compute(pred, target, &dpred, acc));
  EXPECT_TRUE(std::isnan(acc.data<double>()[0]));
}

TEST(MseLoss, BadArgumentsThrow) {
  MseLossCPU mse;
  Tensor pred = Tensor::zeros(Shape(2, 3, 2, 2));
  Tensor acc = make_acc();
  Tensor other = Tensor::zeros(Shape(2, 3, 2, 1));
  try {
    mse.compute(pred, other, nullptr, acc);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("(2, 3, 2, 2)"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3, 2, 1)"), std::string::npos) << m;
  }
  Tensor int_target = Tensor::zeros(pred.shape(), DType::kI32);
  EXPECT_THROW(mse.compute(pred, int_target, nullptr, acc), RuntimeError);
  Tensor bad_dpred = Tensor::zeros(Shape(1, 3, 2, 2));
  EXPECT_THROW(mse.compute(pred, pred, &bad_dpred, acc), RuntimeError);
  Tensor f32_acc = Tensor::zeros(Shape(2, 1, 1, 1));
  EXPECT_THROW(mse.compute(pred, pred, nullptr, f32_acc), RuntimeError);
  Tensor short_acc = Tensor::zeros(Shape(1, 1, 1, 1), DType::kF64);
  EXPECT_THROW(mse.compute(pred, pred, nullptr, short_acc), RuntimeError);
}

// ---- softmax cross-entropy -------------------------------------------------

TEST(SoftmaxCrossEntropy, Properties) {
  SoftmaxCrossEntropyCPU ce;
  EXPECT_EQ(std::string(ce.type()), "softmax_cross_entropy");
  EXPECT_EQ(ce.device(), Device::kCPU);
  EXPECT_TRUE(ce.is_classifier());
  EXPECT_EQ(ce.target_dtype(), DType::kI32);
}

TEST(SoftmaxCrossEntropy, KnownValues) {
  SoftmaxCrossEntropyCPU ce;
  // Row 0: z = (1, 2, 3), label 2 (correct); loss = log(e + e² + e³) − 3.
  // Row 1: z = (0.5, −1, 0.25), label 1 (argmax is 0: wrong);
  //        loss = log(e^0.5 + e^−1 + e^0.25) + 1.
  Tensor pred = make_f32(Shape(2, 3, 1, 1), {1, 2, 3, 0.5f, -1, 0.25f});
  Tensor target = make_labels({2, 1});
  Tensor dpred = Tensor::empty(pred.shape());
  Tensor acc = make_acc();
  ce.compute(pred, target, &dpred, acc);
  EXPECT_NEAR(acc.data<double>()[0], 0.4076059644443806 + 2.1941121864019144, 1e-6);
  EXPECT_EQ(acc.data<double>()[1], 1.0);
  // (softmax − onehot) / 2 with softmax rows
  // (0.0900306, 0.2447285, 0.6652410) and (0.4995177, 0.1114575, 0.3890248).
  expect_values_near(dpred,
                     {0.09003057317038046 / 2, 0.24472847105479764 / 2,
                      (0.6652409557748218 - 1) / 2, 0.4995177298132149 / 2,
                      (0.11145747105020275 - 1) / 2, 0.3890247991365822 / 2},
                     1e-7, "ce dpred");
}

TEST(SoftmaxCrossEntropy, LargeLogitsDoNotOverflow) {
  SoftmaxCrossEntropyCPU ce;
  // exp(1000) overflows even double, so a naive softmax would give inf/inf.
  // Row 0: label 0 → loss log(1 + e^−1000 + e^−2000) = 0, correct.
  // Row 1: same logits, label 1 → loss 1000, wrong.
  // Row 2: tie 1000, 1000 → loss log 2; argmax is the first (0) ≠ label 1.
  Tensor pred = make_f32(Shape(3, 3, 1, 1),
                         {1000, 0, -1000, 1000, 0, -1000, 1000, 1000, -1000});
  Tensor target = make_labels({0, 1, 1});
  Tensor dpred = Tensor::empty(pred.shape());
  Tensor acc = make_acc();
  ce.compute(pred, target, &dpred, acc);
  EXPECT_NEAR(acc.data<double>()[0], 1000.0 + 0.6931471805599453, 1e-9);
  EXPECT_EQ(acc.data<double>()[1], 1.0);
  expect_values_near(dpred, {0, 0, 0, 1.0 / 3, -1.0 / 3, 0, 0.5 / 3, -0.5 / 3, 0}, 1e-7,
                     "ce dpred");
  for (size_t i = 0; i < dpred.numel(); ++i) EXPECT_TRUE(std::isfinite(dpred.data<float>()[i]));
}

TEST(SoftmaxCrossEntropy, UniformLogitsGiveLogK) {
  SoftmaxCrossEntropyCPU ce;
  Tensor pred = Tensor::zeros(Shape(1, 10, 1, 1));
  Tensor acc = make_acc();
  ce.compute(pred, make_labels({7}), nullptr, acc);
  EXPECT_NEAR(acc.data<double>()[0], std::log(10.0), 1e-12);
  EXPECT_EQ(acc.data<double>()[1], 0.0);  // all tied: argmax 0, label 7
}

TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferences) {
  struct Case {
    int n, k;
  };
  const Case cases[] = {{4, 3}, {1, 10}, {5, 10}, {3, 1}, {2, 2}};
  Rng rng(71);
  for (const Case& cs : cases) {
    std::vector<int32_t> y(size_t(cs.n));
    for (auto& v : y) v = int32_t(rng.below(uint64_t(cs.k)));
    const std::vector<double> z = testing::random_vector(size_t(cs.n) * cs.k, rng, -3, 3);
    auto mean_loss = [&](const std::vector<double>& zv) {
      return softmax_ce_loss<double>(zv.data(), y.data(), nullptr, cs.n, cs.k).loss_sum / cs.n;
    };
    std::vector<double> analytic(z.size(), 777.0);
    softmax_ce_loss(z.data(), y.data(), analytic.data(), cs.n, cs.k);
    testing::expect_gradients_close(analytic, testing::numerical_gradient(mean_loss, z), 1e-6,
                                    str("ce n=", cs.n, " k=", cs.k));
  }
}

TEST(SoftmaxCrossEntropy, FloatMatchesDoubleOps) {
  Rng rng(72);
  const int n = 37, k = 10;
  Tensor pred = testing::random_tensor(Shape(n, k, 1, 1), rng, -5, 5);
  std::vector<int32_t> labels(n);
  for (auto& v : labels) v = int32_t(rng.below(k));
  Tensor dpred = Tensor::empty(pred.shape());
  Tensor acc = make_acc();
  SoftmaxCrossEntropyCPU().compute(pred, make_labels(labels), &dpred, acc);
  std::vector<double> zd(pred.data<float>(), pred.data<float>() + pred.numel());
  std::vector<double> gd(zd.size());
  SoftmaxCeResult r = softmax_ce_loss(zd.data(), labels.data(), gd.data(), n, k);
  EXPECT_NEAR(acc.data<double>()[0], r.loss_sum, 1e-9);
  EXPECT_EQ(acc.data<double>()[1], double(r.correct));
  EXPECT_LE(testing::max_rel_error(dpred.data<float>(), gd.data(), gd.size()), 1e-6);
}

TEST(SoftmaxCrossEntropy, AccuracyCountsFirstMaxOnTies) {
  SoftmaxCrossEntropyCPU ce;
  Tensor pred = make_f32(Shape(5, 4, 1, 1), {0, 5, 1, 2,     // argmax 1
                                             3, 3, 3, 3,     // tie: argmax 0
                                             1, 2, 9, 9,     // tie: argmax 2
                                             -1, -2, -3, -4, // argmax 0
                                             0, 0, 0, 1});   // argmax 3
  Tensor acc = make_acc();
  ce.compute(pred, make_labels({1, 1, 2, 0, 2}), nullptr, acc);
  EXPECT_EQ(acc.data<double>()[1], 3.0);  // samples 0, 2 and 3
}

TEST(SoftmaxCrossEntropy, AccumulatesAndNullGradientIsSkipped) {
  SoftmaxCrossEntropyCPU ce;
  Tensor pred = make_f32(Shape(2, 3, 1, 1), {1, 2, 3, 0.5f, -1, 0.25f});
  Tensor target = make_labels({2, 1});
  Tensor acc = make_acc();
  ce.compute(pred, target, nullptr, acc);
  ce.compute(pred, target, nullptr, acc);
  EXPECT_NEAR(acc.data<double>()[0], 2 * (0.4076059644443806 + 2.1941121864019144), 1e-6);
  EXPECT_EQ(acc.data<double>()[1], 2.0);
  // The gradient is overwritten: twice into the same buffer equals once.
  Tensor d1 = Tensor::empty(pred.shape()), d2 = Tensor::empty(pred.shape());
  ce.compute(pred, target, &d1, acc);
  ce.compute(pred, target, &d2, acc);
  ce.compute(pred, target, &d2, acc);
  for (size_t i = 0; i < d1.numel(); ++i) EXPECT_EQ(d1.data<float>()[i], d2.data<float>()[i]);
}

TEST(SoftmaxCrossEntropy, InvalidLabelIsADataError) {
  SoftmaxCrossEntropyCPU ce;
  Tensor pred = Tensor::zeros(Shape(3, 4, 1, 1));
  Tensor dpred = make_f32(pred.shape(), std::vector<float>(12, 42.f));
  Tensor acc = make_acc();
  try {
    ce.compute(pred, make_labels({0, 3, 7}), &dpred, acc);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("sample 2"), std::string::npos) << m;
    EXPECT_NE(m.find("label 7"), std::string::npos) << m;
    EXPECT_NE(m.find("[0, 4)"), std::string::npos) << m;
  }
  EXPECT_THROW(ce.compute(pred, make_labels({-1, 0, 0}), &dpred, acc), DataError);
  EXPECT_THROW(ce.compute(pred, make_labels({0, 4, 0}), nullptr, acc), DataError);
  // A rejected batch leaves the accumulator and the gradient untouched.
  EXPECT_EQ(acc.data<double>()[0], 0.0);
  EXPECT_EQ(acc.data<double>()[1], 0.0);
  EXPECT_EQ(dpred.data<float>()[0], 42.f);
}

TEST(SoftmaxCrossEntropy, NaNGivesNaNLossNotACrash) {
  SoftmaxCrossEntropyCPU ce;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // NaN first in its row (where it becomes the running max) and later.
  Tensor pred = make_f32(Shape(2, 3, 1, 1), {nan, 1, 2, 0, 1, nan});
  Tensor dpred = Tensor::empty(pred.shape());
  for (int32_t label : {0, 1}) {
    Tensor acc = make_acc();
    EXPECT_NO_THROW(ce.compute(pred, make_labels({label, label}), &dpred, acc));
    EXPECT_TRUE(std::isnan(acc.data<double>()[0]));
  }
  Tensor one = make_f32(Shape(1, 3, 1, 1), {0, 1, nan});
  Tensor acc = make_acc();
  ce.compute(one, make_labels({0}), nullptr, acc);
  EXPECT_TRUE(std::isnan(acc.data<double>()[0]));
}

TEST(SoftmaxCrossEntropy, BadShapesThrow) {
  SoftmaxCrossEntropyCPU ce;
  Tensor acc = make_acc();
  Tensor pred = Tensor::zeros(Shape(4, 10, 1, 1));
  try {
    ce.compute(pred, make_labels({0, 1, 2}), nullptr, acc);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("(3, 1, 1, 1)"), std::string::npos) << m;
    EXPECT_NE(m.find("(4, 10, 1, 1)"), std::string::npos) << m;
  }
  Tensor spatial = Tensor::zeros(Shape(4, 10, 2, 2));
  EXPECT_THROW(ce.compute(spatial, make_labels({0, 1, 2, 3}), nullptr, acc), RuntimeError);
  Tensor float_labels = Tensor::zeros(Shape(4, 1, 1, 1));
  EXPECT_THROW(ce.compute(pred, float_labels, nullptr, acc), RuntimeError);
  Tensor bad_dpred = Tensor::zeros(Shape(4, 9, 1, 1));
  EXPECT_THROW(ce.compute(pred, make_labels({0, 1, 2, 3}), &bad_dpred, acc), RuntimeError);
  Tensor wrong_acc = Tensor::zeros(Shape(2, 1, 1, 1));  // float32
  EXPECT_THROW(ce.compute(pred, make_labels({0, 1, 2, 3}), nullptr, wrong_acc), RuntimeError);
  Tensor long_acc = Tensor::zeros(Shape(3, 1, 1, 1), DType::kF64);
  EXPECT_THROW(ce.compute(pred, make_labels({0, 1, 2, 3}), nullptr, long_acc), RuntimeError);
}

}  // namespace
}  // namespace hpmc
