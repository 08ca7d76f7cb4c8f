// Golden end-to-end test: three SGD steps (momentum, weight decay) of two
// small models that use every layer and loss, from formula-given weights and
// inputs, against values PyTorch computed once in float64
// (tools/golden/make_golden.py -> tests/golden_values.h); and the MNIST
// MLP's 100-step trajectory on Fashion-MNIST against PyTorch float64
// (tools/golden/make_trajectory.py -> tests/golden_trajectory.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/sgemm.h"
#include "data/dataset.h"
#include "golden_trajectory.h"
#include "golden_values.h"
#include "model/model.h"
#include "model/trainer.h"
#include "testing.h"

namespace hpmc {
namespace {

// The formulas of make_golden.py.
void fill_params(ParamStore& ps) {
  float* p = ps.params().data<float>();
  int k = 0;
  for (const auto& e : ps.entries()) {
    size_t fan = e.count;
    if (e.dims.size() > 1) fan = e.count / size_t(e.dims[0]);
    for (size_t i = 0; i < e.count; ++i)
      p[e.offset + i] = float(0.3 * std::sin(0.7 * double(i) + k) / std::sqrt(double(fan)) * 3);
    ++k;
  }
}

Tensor inputs(const Shape& s) {
  Tensor t = Tensor::empty(s);
  for (size_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(0.5 + 0.5 * std::sin(1.3 * double(i) + 0.2));
  return t;
}

struct Golden {
  std::vector<double> losses;
  double sum = 0, abs_sum = 0, weighted = 0;
};

Golden run(const std::string& yaml, const Shape& sample, const Tensor& x, const Tensor& target) {
  Config cfg = parse_config(yaml, "golden.yaml");
  auto m = Model::build(cfg, Impl::kCpu, sample, 10);
  fill_params(m->params());
  m->allocate(x.shape().n);
  Trainer t(*m, cfg.training);
  Tensor acc = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64);
  Golden g;
  double prev = 0;
  for (int s = 0; s < 3; ++s) {
    t.step(x, target, acc);
    g.losses.push_back((acc.data<double>()[0] - prev) / x.shape().n);
    prev = acc.data<double>()[0];
  }
  // Fingerprint over the parameters in order, gaps excluded (as PyTorch's cat).
  size_t idx = 0;
  for (const auto& e : m->params().entries())
    for (size_t i = 0; i < e.count; ++i, ++idx) {
      double v = m->params().params().data<float>()[e.offset + i];
      g.sum += v;
      g.abs_sum += std::fabs(v);
      g.weighted += v * double(idx);
    }
  g.weighted /= double(idx);
  return g;
}

void expect_golden(const Golden& g, const double* losses, const double* fp) {
  for (int s = 0; s < 3; ++s)
    EXPECT_NEAR(g.losses[size_t(s)], losses[s], 2e-5 * std::fabs(losses[s])) << "step " << s + 1;
  // float32 parameters against a float64 reference: relative to the L1 norm.
  double tol = 1e-5 * fp[1];
  EXPECT_NEAR(g.sum, fp[0], tol);
  EXPECT_NEAR(g.abs_sum, fp[1], tol);
  EXPECT_NEAR(g.weighted, fp[2], tol);
}

TEST(Golden, ConvAutoencoderMatchesPyTorch) {
  const char* yaml = R"(data: {format: cifar10}
model:
  loss: mse
  layers:
    - {type: conv2d, out_channels: 4, kernel: 3, padding: 1}
    - {type: relu}
    - {type: maxpool2d, kernel: 2}
    - {type: conv2d, out_channels: 5, kernel: 3, stride: 1, padding: 1}
    - {type: relu}
    - {type: upsample2d, scale: 2}
    - {type: conv2d, out_channels: 3, kernel: 3, padding: 1}
training: {lr: 0.1, momentum: 0.9, weight_decay: 0.001}
)";
  Tensor x = inputs(Shape(2, 3, 6, 6));
  expect_golden(run(yaml, Shape(1, 3, 6, 6), x, x), kAeLosses, kAeFingerprint);
}

TEST(Golden, MlpMatchesPyTorch) {
  const char* yaml = R"(data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {type: flatten}
    - {type: linear, out_features: 7}
    - {type: relu}
    - {type: linear, out_features: 10}
training: {lr: 0.2, momentum: 0.5, weight_decay: 0.01}
)";
  Tensor x = inputs(Shape(3, 1, 5, 5));
  Tensor labels = Tensor::empty(Shape(3, 1, 1, 1), DType::kI32);
  for (int i = 0; i < 3; ++i) labels.data<int32_t>()[i] = i * 3 % 10;
  expect_golden(run(yaml, Shape(1, 1, 5, 5), x, labels), kMlpLosses, kMlpFingerprint);
}

// The MNIST MLP (configs/mnist_mlp.yaml's model and recipe) trained for 100
// steps from formula weights on the first 6,400 Fashion-MNIST images in file
// order: every step's loss within 1e-6 (relative) of PyTorch's float64 run.
// float32 rounding keeps hpmc within about 6e-8 of it here (PyTorch's own
// float32 run: 1.3e-7, the header says); a GEMM or layer that loses
// precision drifts past the bound within tens of steps.
//
// The bound holds for this trajectory, not for every one: a ReLU input
// within float32 rounding of zero takes the other side in float32 than in
// float64, and from then on any float32 run, PyTorch's included, departs by
// 1e-5..1e-3 (docs/numerics.md). The reference data are chosen to come near
// no such tie with either GEMM path.
TEST(Golden, MlpTrajectoryMatchesFloat64) {
  const std::string dir = testing::fashion_dir();
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << dir << " is absent (Debian package dataset-fashion-mnist; scripts/setup "
                 << "installs it)";
  const char* yaml = R"(data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {type: flatten}
    - {type: linear, out_features: 320}
    - {type: relu}
    - {type: linear, out_features: 160}
    - {type: relu}
    - {type: linear, out_features: 10}
training: {lr: 0.03, momentum: 0}
)";
  Config cfg = parse_config(yaml, "trajectory.yaml");
  ASSERT_EQ(cfg.training.optimizer.lr, kTrajectoryLr);
  auto m = Model::build(cfg, Impl::kCpu, Shape(1, 1, 28, 28), 10);
  // make_trajectory.py's formula: sin(2.399963229728653 i + k/2) / sqrt(fan_in).
  float* p = m->params().params().data<float>();
  int k = 0;
  for (const auto& e : m->params().entries()) {
    const size_t fan = e.dims.size() > 1 ? e.count / size_t(e.dims[0]) : e.count;
    for (size_t i = 0; i < e.count; ++i)
      p[e.offset + i] =
          float(std::sin(2.399963229728653 * double(i) + 0.5 * k) / std::sqrt(double(fan)));
    ++k;
  }
  const DataSplits data = load_dataset(DataFormat::kMnist, dir);
  const int B = kTrajectoryBatch;
  ASSERT_GE(data.train.size(), B * kTrajectorySteps);
  m->allocate(B);
  Trainer t(*m, cfg.training);
  Tensor acc = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64);
  Tensor x = Tensor::empty(Shape(B, 1, 28, 28));
  Tensor y = Tensor::empty(Shape(B, 1, 1, 1), DType::kI32);
  const uint8_t* img = data.train.images.data<uint8_t>();
  const int32_t* lab = data.train.labels.data<int32_t>();
  double prev = 0, worst = 0;
  int worst_step = 0;
  for (int s = 0; s < kTrajectorySteps; ++s) {
    for (int b = 0; b < B; ++b) {
      const size_t id = size_t(s) * B + size_t(b);
      y.data<int32_t>()[b] = lab[id];
      for (int q = 0; q < 784; ++q)
        x.data<float>()[size_t(b) * 784 + size_t(q)] = float(img[id * 784 + size_t(q)]) / 255.0f;
    }
    t.step(x, y, acc);
    const double loss = (acc.data<double>()[0] - prev) / B;
    prev = acc.data<double>()[0];
    const double rel = std::fabs(loss - kTrajectoryLosses[s]) / std::fabs(kTrajectoryLosses[s]);
    if (rel > worst) worst = rel, worst_step = s + 1;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", worst);
  RecordProperty("worst_relative_departure", buf);
  EXPECT_LE(worst, 1e-6) << "float GEMM " << sgemm_path_name(sgemm_path()) << ": step "
                         << worst_step << " departs from PyTorch float64 by " << worst;
}

}  // namespace
}  // namespace hpmc
