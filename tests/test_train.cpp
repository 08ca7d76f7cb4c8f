// End-to-end training on the CPU: synthetic data a model must learn, the
// real MNIST digits when present, divergence, determinism, partial batches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "data/dataset.h"
#include "model/model.h"
#include "model/trainer.h"
#include "synthetic_data.h"
#include "testing.h"

namespace hpmc {
namespace {

const char* kMlp = R"(name: mlp
data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 320}
    - {name: relu1, type: relu}
    - {name: fc2, type: linear, out_features: 160}
    - {name: relu2, type: relu}
    - {name: fc3, type: linear, out_features: 10}
training: {epochs: 3, batch_size: 64, lr: 0.03, seed: 1}
)";

const char* kAe = R"(name: ae
data: {format: mnist}
model:
  loss: mse
  features: pool
  layers:
    - {name: conv1, type: conv2d, out_channels: 8, kernel: 3, padding: 1}
    - {name: relu1, type: relu}
    - {name: pool, type: maxpool2d}
    - {name: up, type: upsample2d}
    - {name: conv2, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
training: {epochs: 4, batch_size: 16, lr: 0.05, momentum: 0.9, seed: 2}
)";

struct Trained {
  Config cfg;
  std::unique_ptr<Model> model;
};

Trained make(const std::string& text, std::vector<Override> ov = {}) {
  Trained s;
  s.cfg = parse_config(text, "t.yaml", ov);
  s.model = Model::build(s.cfg, Impl::kCpu, Shape(1, 1, 28, 28), 10);
  s.model->params().init(s.cfg.training.seed);
  return s;
}

std::vector<EpochResult> train(Trained& s, const Dataset& tr, const Dataset& te) {
  Trainer t(*s.model, s.cfg.training);
  t.set_progress(Trainer::Progress::kQuiet);
  std::ostringstream log;
  return t.fit(tr, te, log);
}

TEST(Train, MlpLearnsSeparableSyntheticData) {
  Trained s = make(kMlp);
  Dataset tr = testing::synthetic_classes(3000, 1), te = testing::synthetic_classes(500, 2);
  auto r = train(s, tr, te);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_LT(r.back().train_loss, r.front().train_loss);
  EXPECT_GE(r.back().test.accuracy, 0.97);
  EXPECT_EQ(r.back().test.samples, 500);
  EXPECT_GT(r.back().images_per_s, 0);
}

TEST(Train, ConvAutoencoderLossFalls) {
  Trained s = make(kAe);
  Dataset tr = testing::synthetic_blobs(512, 3), te = testing::synthetic_blobs(128, 4);
  EvalResult before = evaluate(*s.model, te, 32);
  auto r = train(s, tr, te);
  EXPECT_LT(r.back().test.loss, 0.5 * before.loss) << "before " << before.loss;
  EXPECT_LT(r.back().train_loss, r.front().train_loss);
  EXPECT_LT(r.back().test.accuracy, 0);  // not a classifier
}

TEST(Train, SameSeedSameWeightsBitForBit) {
  Dataset tr = testing::synthetic_blobs(100, 5);
  Trained a = make(kAe), b = make(kAe);
  train(a, tr, testing::synthetic_blobs(0, 1));
  train(b, tr, testing::synthetic_blobs(0, 1));
  size_t n = a.model->params().padded() * sizeof(float);
  EXPECT_EQ(std::memcmp(a.model->params().params().raw(), b.model->params().params().raw(), n), 0);
  Trained c = make(kAe, {{"training.seed=3", ""}});
  train(c, tr, testing::synthetic_blobs(0, 1));
  EXPECT_NE(std::memcmp(a.model->params().params().raw(), c.model->params().params().raw(), n), 0);
}

TEST(Train, LastPartialBatchIsUsed) {
  // 17 samples at batch 16: the 17th must change the weights.
  Dataset tr = testing::synthetic_blobs(17, 6);
  Trained a = make(kAe, {{"training.epochs=1", ""}, {"training.shuffle=false", ""}});
  Trained b = make(kAe, {{"training.epochs=1", ""}, {"training.shuffle=false", ""}});
  train(a, tr, testing::synthetic_blobs(0, 1));
  train(b, tr.slice(0, 16), testing::synthetic_blobs(0, 1));
  size_t n = a.model->params().padded() * sizeof(float);
  EXPECT_NE(std::memcmp(a.model->params().params().raw(), b.model->params().params().raw(), n), 0);
}

TEST(Train, EpochOrderIsAShuffleFromSeedAndEpoch) {
  auto a = epoch_order(100, 1, 0, true), b = epoch_order(100, 1, 0, true);
  auto c = epoch_order(100, 1, 1, true), d = epoch_order(100, 1, 0, false);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(d[size_t(i)], i);
}

TEST(Train, DivergenceStopsWithAClearError) {
  Trained s = make(kMlp, {{"training.lr=100000", ""}});
  Dataset tr = testing::synthetic_classes(640, 1);
  try {
    train(s, tr, testing::synthetic_classes(64, 2));
    FAIL() << "training with lr 1e5 did not diverge";
  } catch (const DivergedError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("lower training.lr"), std::string::npos) << m;
    EXPECT_EQ(e.code(), ExitCode::kDiverged);
  }
}

TEST(Train, RealMnistDigitsMlpScoresAtLeast95Percent) {
  testing::MnistTestFiles f = testing::mnist_test_files();
  if (f.images.empty()) GTEST_SKIP() << f.looked;
  Dataset all = load_mnist(f.images, f.labels);
  ASSERT_EQ(all.size(), 10000);
  Dataset tr = all.slice(0, 8000), te = all.slice(8000, 2000);
  Trained s = make(kMlp, {{"training.epochs=15", ""}, {"training.momentum=0.9", ""}});
  auto r = train(s, tr, te);
  std::cout << "  MNIST MLP, 8000 train / 2000 held out: test accuracy "
            << 100 * r.back().test.accuracy << "%\n";
  EXPECT_GE(r.back().test.accuracy, 0.95);
}

}  // namespace
}  // namespace hpmc

namespace hpmc {
namespace {

// An autoencoder trained with another loss also reports its reconstruction
// MSE (EvalResult::mse): the mean over samples of the per-sample mean squared
// error, as the mse loss computes it; an mse model reports none.
TEST(Train, EvaluationReportsTheMseOfAnAutoencoderWithAnotherLoss) {
  const std::string bce = R"(name: ae
data: {format: mnist}
model:
  loss: bce
  layers:
    - {name: conv1, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
    - {name: out, type: sigmoid}
)";
  Trained s = make(bce);
  Dataset te = testing::synthetic_classes(5, 3);
  EvalResult r = evaluate(*s.model, te, 2);
  ASSERT_GE(r.mse, 0);
  // The same by hand, in double.
  Tensor x = Tensor::empty(Shape(5, 1, 28, 28));
  for (size_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = te.images.data<uint8_t>()[i] / 255.0f;
  s.model->allocate(5);
  const Tensor& y = s.model->forward(x);
  double sum = 0;
  for (size_t i = 0; i < x.numel(); ++i) {
    const double d = double(y.data<float>()[i]) - x.data<float>()[i];
    sum += d * d;
  }
  EXPECT_NEAR(r.mse, sum / double(x.numel()), 1e-7);
  EXPECT_GT(r.loss, r.mse);  // bce, a different number

  Trained m = make(kAe);
  EXPECT_EQ(evaluate(*m.model, te, 2).mse, -1);
}

}  // namespace
}  // namespace hpmc
