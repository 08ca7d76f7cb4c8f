// Training-time input transforms on the CPU (data/augment.h): the flip/crop
// on hand-built images, the statistics of the draws and of the noise,
// determinism, what the trainer feeds the model and the loss, exact resume
// through a checkpoint, evaluation left clean, the fused step's refusal, and
// the config keys.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "cli_runner.h"
#include "core/error.h"
#include "data/augment.h"
#include "model/batches.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/fused_step.h"
#include "model/model.h"
#include "model/trainer.h"
#include "synthetic_data.h"
#include "testing.h"

namespace hpmc {
namespace {

// ---- the augmentation on hand-built images ------------------------------------------

// Batch position i of `step` whose draw is `want`, found by scanning; -1 if none of
// the first `limit` positions has it.
int find_draw(uint64_t key, uint64_t step, bool hflip, int pad, AugmentDraw want,
              int limit = 2000) {
  for (int i = 0; i < limit; ++i) {
    AugmentDraw d = augment_draw(key, step, uint64_t(i), hflip, pad);
    if (d.flip == want.flip && d.dy == want.dy && d.dx == want.dx) return i;
  }
  return -1;
}

// The augmented sample `i` of a batch whose every sample is `img` (c planes of h×w).
std::vector<float> augmented_sample(const std::vector<float>& img, int c, int h, int w, int i,
                                    bool hflip, int pad, uint64_t seed, int64_t step) {
  const int n = i + 1;
  Tensor x = Tensor::empty(Shape(n, c, h, w)), y = Tensor::empty(Shape(n, c, h, w));
  for (int s = 0; s < n; ++s)
    std::copy(img.begin(), img.end(), x.data<float>() + size_t(s) * img.size());
  AugmentConfig a;
  a.hflip = hflip;
  a.crop_padding = pad;
  augment_batch(x, y, Shape(1, c, h, w), a, seed, step);
  const float* p = y.data<float>() + size_t(i) * img.size();
  return std::vector<float>(p, p + img.size());
}

TEST(Augment, FlipAndCropOfAHandBuiltImage) {
  // 1×3×3:  1 2 3 / 4 5 6 / 7 8 9, padding 1.
  const std::vector<float> img = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const uint64_t seed = 7;
  const int64_t step = 12;
  const uint64_t key = counter_key(seed, kAugmentStream);
  struct Case {
    AugmentDraw draw;
    std::vector<float> want;
  };
  const std::vector<Case> cases = {
      {{false, 0, 0}, {1, 2, 3, 4, 5, 6, 7, 8, 9}},
      {{true, 0, 0}, {3, 2, 1, 6, 5, 4, 9, 8, 7}},
      // top = dy + 1 = 0, left = dx + 1 = 2 in the padded 5×5: a row of zeros
      // shifted in at the top, a column at the right.
      {{false, -1, 1}, {0, 0, 0, 2, 3, 0, 5, 6, 0}},
      {{false, 1, -1}, {0, 4, 5, 0, 7, 8, 0, 0, 0}},
      // crop first (top 2, left 0), then flip
      {{true, 1, -1}, {5, 4, 0, 8, 7, 0, 0, 0, 0}},
      {{true, -1, -1}, {0, 0, 0, 2, 1, 0, 5, 4, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(str("flip ", c.draw.flip, " dy ", c.draw.dy, " dx ", c.draw.dx));
    const int i = find_draw(key, uint64_t(step), true, 1, c.draw);
    ASSERT_GE(i, 0);
    EXPECT_EQ(augmented_sample(img, 1, 3, 3, i, true, 1, seed, step), c.want);
  }
}

TEST(Augment, EveryChannelMovesAlikeAndLargePaddingShiftsInZeros) {
  // 3×3×4, channel k = 100k + 10r + c + 1; padding 3 (offsets up to a whole height).
  const int c = 3, h = 3, w = 4, pad = 3;
  std::vector<float> img(size_t(c * h * w));
  for (int k = 0; k < c; ++k)
    for (int r = 0; r < h; ++r)
      for (int col = 0; col < w; ++col) img[size_t((k * h + r) * w + col)] = float(100 * k + 10 * r + col + 1);
  const uint64_t seed = 3, key = counter_key(seed, kAugmentStream);
  const int64_t step = 5;
  {  // dy = −3, dx = +3: only output (r = 2... no: r + dy ≥ 0 needs r ≥ 3) — all zero
    const int i = find_draw(key, step, false, pad, {false, -3, 3});
    ASSERT_GE(i, 0);
    for (float v : augmented_sample(img, c, h, w, i, false, pad, seed, step)) EXPECT_EQ(v, 0.f);
  }
  {  // dy = +2, dx = −3: output row 0 = input row 2, shifted right by 3 (one value left)
    const int i = find_draw(key, step, false, pad, {false, 2, -3});
    ASSERT_GE(i, 0);
    const auto y = augmented_sample(img, c, h, w, i, false, pad, seed, step);
    for (int k = 0; k < c; ++k) {
      SCOPED_TRACE(k);
      const float* p = y.data() + size_t(k * h * w);
      EXPECT_EQ(std::vector<float>(p, p + w), (std::vector<float>{0, 0, 0, float(100 * k + 21)}));
      for (int j = w; j < h * w; ++j) EXPECT_EQ(p[j], 0.f) << j;
    }
  }
  {  // flip, dy = −1, dx = +2: y[r][c] = x[r − 1][(3 − c) + 2]
    const int i = find_draw(key, step, true, pad, {true, -1, 2});
    ASSERT_GE(i, 0);
    const auto y = augmented_sample(img, c, h, w, i, true, pad, seed, step);
    for (int k = 0; k < c; ++k) {
      SCOPED_TRACE(k);
      const float b = float(100 * k);
      const std::vector<float> want = {0, 0, 0, 0,                          // row −1: padding
                                       0, 0, b + 4, b + 3,                  // row 0: cols 5 4 3 2
                                       0, 0, b + 14, b + 13};               // row 1
      EXPECT_EQ(std::vector<float>(y.data() + k * h * w, y.data() + (k + 1) * h * w), want);
    }
  }
}

TEST(Augment, NothingToDoLeavesTheBatchAsItIs) {
  Rng rng(1);
  Tensor x = testing::random_tensor(Shape(4, 3, 5, 7), rng), y = Tensor::empty(Shape(4, 3, 5, 7));
  augment_batch(x, y, Shape(1, 3, 5, 7), AugmentConfig{}, 1, 0);
  EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.bytes()), 0);
  // A flat batch (an MLP's input) is augmented as the image it holds.
  Tensor flat = x.view(Shape(4, 105, 1, 1)), yf = Tensor::empty(Shape(4, 105, 1, 1)),
         yi = Tensor::empty(Shape(4, 3, 5, 7));
  AugmentConfig a;
  a.hflip = true;
  a.crop_padding = 2;
  augment_batch(flat, yf, Shape(1, 3, 5, 7), a, 9, 4);
  augment_batch(x, yi, Shape(1, 3, 5, 7), a, 9, 4);
  EXPECT_EQ(std::memcmp(yf.raw(), yi.raw(), yi.bytes()), 0);
  EXPECT_THROW(augment_batch(x, yf, Shape(1, 3, 5, 6), a, 9, 4), ShapeError);
}

// ---- statistics of the draws -----------------------------------------------------------

TEST(Augment, FlipRateIsAHalfAndCropOffsetsAreUniform) {
  const int pad = 4, span = 2 * pad + 1;
  const uint64_t key = counter_key(11, kAugmentStream);
  const int steps = 200, batch = 256, n = steps * batch;
  int flips = 0;
  std::vector<double> dy(span), dx(span);
  std::map<std::tuple<bool, int, int>, double> joint;
  for (int s = 0; s < steps; ++s)
    for (int i = 0; i < batch; ++i) {
      AugmentDraw d = augment_draw(key, uint64_t(s), uint64_t(i), true, pad);
      ASSERT_GE(d.dy, -pad);
      ASSERT_LE(d.dy, pad);
      ASSERT_GE(d.dx, -pad);
      ASSERT_LE(d.dx, pad);
      flips += d.flip;
      dy[size_t(d.dy + pad)] += 1;
      dx[size_t(d.dx + pad)] += 1;
      joint[{d.flip, d.dy, d.dx}] += 1;
    }
  // 5 standard deviations of a binomial(n, 1/2).
  EXPECT_NEAR(double(flips) / n, 0.5, 5 * std::sqrt(0.25 / n));
  // Chi-square of the offsets against uniform (8 degrees of freedom: P(> 30) ≈ 2e-4),
  // and of the 2·9·9 joint cells (161 degrees of freedom: P(> 230) ≈ 3e-4), which
  // an offset correlated with the flip or with the other offset would fail.
  auto chi2 = [](const std::vector<double>& counts, double expected) {
    double c = 0;
    for (double o : counts) c += (o - expected) * (o - expected) / expected;
    return c;
  };
  EXPECT_LT(chi2(dy, double(n) / span), 30.0);
  EXPECT_LT(chi2(dx, double(n) / span), 30.0);
  std::vector<double> cells;
  for (const auto& [k, v] : joint) cells.push_back(v);
  ASSERT_EQ(cells.size(), size_t(2 * span * span));
  EXPECT_LT(chi2(cells, double(n) / cells.size()), 230.0);
  // No flip without hflip, no offset without padding.
  for (int i = 0; i < 1000; ++i) {
    AugmentDraw a = augment_draw(key, 3, uint64_t(i), false, pad);
    AugmentDraw b = augment_draw(key, 3, uint64_t(i), true, 0);
    EXPECT_FALSE(a.flip);
    EXPECT_EQ(b.dy, 0);
    EXPECT_EQ(b.dx, 0);
    // The crop does not depend on whether flips are on.
    AugmentDraw c = augment_draw(key, 3, uint64_t(i), true, pad);
    EXPECT_EQ(a.dy, c.dy);
    EXPECT_EQ(a.dx, c.dx);
  }
}

// ---- the noise -------------------------------------------------------------------------

struct Moments {
  double mean = 0, sd = 0, kurtosis = 0;
};
Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= double(v.size());
  double m2 = 0, m4 = 0;
  for (double x : v) {
    const double d = (x - m.mean) * (x - m.mean);
    m2 += d;
    m4 += d * d;
  }
  m2 /= double(v.size());
  m4 /= double(v.size());
  m.sd = std::sqrt(m2);
  m.kurtosis = m4 / (m2 * m2);
  return m;
}

TEST(InputNoise, GaussianDrawsAreStandardNormal) {
  const uint64_t key = counter_key(5, kInputNoiseStream);
  const size_t n = 1 << 20;
  std::vector<double> z(n);
  for (size_t t = 0; t < n; ++t) z[t] = gaussian_draw(key, 17, t);
  const Moments m = moments(z);
  // Standard errors: mean 1/√n ≈ 0.001, sd 1/√(2n) ≈ 0.0007, kurtosis √(24/n) ≈ 0.005.
  EXPECT_NEAR(m.mean, 0.0, 0.005);
  EXPECT_NEAR(m.sd, 1.0, 0.004);
  EXPECT_NEAR(m.kurtosis, 3.0, 0.03);  // a uniform would give 1.8, a Laplace 6
  size_t within1 = 0;
  double most = 0, pair = 0, next_step = 0;
  for (size_t t = 0; t < n; ++t) {
    within1 += std::fabs(z[t]) < 1;
    most = std::max(most, std::fabs(z[t]));
    if (t % 2 == 0) pair += z[t] * z[t + 1];  // the two values of one Philox block
    next_step += z[t] * gaussian_draw(key, 18, t);
  }
  EXPECT_NEAR(double(within1) / n, 0.682689, 0.003);
  EXPECT_LE(most, 6.67);  // u₁ ≥ 2⁻³²
  EXPECT_GT(most, 4.0);
  EXPECT_NEAR(pair / (n / 2), 0.0, 0.01);     // uncorrelated
  EXPECT_NEAR(next_step / n, 0.0, 0.006);
}

TEST(InputNoise, GaussianNoiseOnABatchHasItsStd) {
  Tensor x = Tensor::empty(Shape(64, 3, 33, 31)), y = Tensor::empty(Shape(64, 3, 33, 31));
  for (size_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.5f;
  InputNoiseConfig cfg;
  cfg.type = InputNoiseConfig::Type::kGaussian;
  cfg.std = 0.1;
  add_input_noise(x, y, cfg, 1, 3);
  std::vector<double> d(y.numel());
  for (size_t i = 0; i < d.size(); ++i) d[i] = double(y.data<float>()[i]) - 0.5;
  const Moments m = moments(d);
  // 5 standard errors: 0.1/√n ≈ 2.3e-4 for the mean, 0.1/√(2n) ≈ 1.6e-4 for the sd.
  EXPECT_NEAR(m.mean, 0.0, 0.0012);
  EXPECT_NEAR(m.sd, 0.1, 0.0008);
  // Each value is fma(std, z, x), z the element's own draw.
  const uint64_t key = counter_key(1, kInputNoiseStream);
  for (size_t t : {size_t(0), size_t(1), size_t(12345), y.numel() - 1})
    EXPECT_EQ(y.data<float>()[t], std::fma(0.1f, gaussian_draw(key, 3, t), 0.5f)) << t;
  // In place gives the same.
  add_input_noise(x, x, cfg, 1, 3);
  EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.bytes()), 0);
  // An odd count: the last value has a Philox block to itself.
  for (int count : {1, 3, 5}) {
    Tensor a = Tensor::empty(Shape(1, count, 1, 1)), b = Tensor::empty(Shape(1, count, 1, 1));
    for (int i = 0; i < count; ++i) a.data<float>()[i] = float(i) - 1.5f;
    add_input_noise(a, b, cfg, 1, 9);
    for (int i = 0; i < count; ++i)
      EXPECT_EQ(b.data<float>()[i],
                std::fma(0.1f, gaussian_draw(key, 9, size_t(i)), a.data<float>()[i]))
          << count << " " << i;
  }
}

TEST(InputNoise, MaskZeroesAFractionP) {
  Rng rng(2);
  Tensor x = testing::random_tensor(Shape(50, 3, 32, 32), rng, 0.01f, 1.f);
  Tensor y = Tensor::empty(x.shape());
  for (double p : {0.0, 0.1, 0.3, 0.75}) {
    SCOPED_TRACE(p);
    InputNoiseConfig cfg;
    cfg.type = InputNoiseConfig::Type::kMask;
    cfg.p = p;
    add_input_noise(x, y, cfg, 4, 8);
    size_t zeros = 0;
    for (size_t i = 0; i < x.numel(); ++i) {
      const float v = y.data<float>()[i];
      if (v == 0.f) ++zeros;
      else ASSERT_EQ(v, x.data<float>()[i]) << i;  // kept values are untouched
    }
    const double n = double(x.numel());
    EXPECT_NEAR(zeros / n, p, 5 * std::sqrt(p * (1 - p) / n) + 1e-12);
    // Each decision is the element's own draw (odd counts included).
    const uint64_t key = counter_key(4, kInputNoiseStream);
    for (size_t t : {size_t(0), size_t(3), size_t(4), size_t(77777), x.numel() - 1})
      EXPECT_EQ(y.data<float>()[t] != 0.f, mask_keep(key, 8, t, drop_threshold(p))) << t;
    for (int count : {1, 2, 3, 5, 7}) {
      Tensor a = Tensor::empty(Shape(1, count, 1, 1)), b = Tensor::empty(Shape(1, count, 1, 1));
      for (int i = 0; i < count; ++i) a.data<float>()[i] = 1.f;
      add_input_noise(a, b, cfg, 4, 8);
      for (int i = 0; i < count; ++i)
        EXPECT_EQ(b.data<float>()[i] != 0.f, mask_keep(key, 8, size_t(i), drop_threshold(p)))
            << count << " " << i;
    }
  }
}

// ---- determinism -----------------------------------------------------------------------

TEST(Augment, SameSeedAndStepSameBatchOtherwiseAnother) {
  Rng rng(3);
  const Shape img(1, 3, 9, 11);
  Tensor x = testing::random_tensor(img.with_batch(40), rng, 0.f, 1.f);
  AugmentConfig a;
  a.hflip = true;
  a.crop_padding = 2;
  InputNoiseConfig g;
  g.type = InputNoiseConfig::Type::kGaussian;
  InputNoiseConfig m;
  m.type = InputNoiseConfig::Type::kMask;
  auto run = [&](uint64_t seed, int64_t step) {
    Tensor y = Tensor::empty(x.shape()), z = Tensor::empty(x.shape()), w = Tensor::empty(x.shape());
    augment_batch(x, y, img, a, seed, step);
    add_input_noise(y, z, g, seed, step);
    add_input_noise(y, w, m, seed, step);
    std::vector<float> out(z.data<float>(), z.data<float>() + z.numel());
    out.insert(out.end(), w.data<float>(), w.data<float>() + w.numel());
    out.insert(out.end(), y.data<float>(), y.data<float>() + y.numel());
    return out;
  };
  const auto base = run(1, 10);
  EXPECT_EQ(run(1, 10), base);
  EXPECT_NE(run(1, 11), base);
  EXPECT_NE(run(2, 10), base);
  // A sample's draw depends on its position and the step, not on the batch size.
  Tensor head = x.view(img.with_batch(5)), y5 = Tensor::empty(img.with_batch(5)),
         y40 = Tensor::empty(x.shape());
  augment_batch(head, y5, img, a, 1, 10);
  augment_batch(x, y40, img, a, 1, 10);
  EXPECT_EQ(std::memcmp(y5.raw(), y40.raw(), y5.bytes()), 0);
}

// ---- the trainer -----------------------------------------------------------------------

const char* kAe = R"(name: ae
data: {format: mnist}
model:
  loss: mse
  layers:
    - {name: conv1, type: conv2d, out_channels: 4, kernel: 3, padding: 1}
    - {name: relu1, type: relu}
    - {name: pool, type: maxpool2d}
    - {name: up, type: upsample2d}
    - {name: conv2, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
training: {epochs: 2, batch_size: 16, lr: 0.05, momentum: 0.9, seed: 2}
)";

const char* kMlp = R"(name: mlp
data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 32}
    - {name: relu1, type: relu}
    - {name: fc2, type: linear, out_features: 10}
training: {epochs: 2, batch_size: 16, lr: 0.05, momentum: 0.9, seed: 2}
)";

const std::vector<Override> kNoiseAndAugment = {
    {"training.input_noise={type: gaussian, std: 0.2}", ""},
    {"data.augment={hflip: true, crop_padding: 3}", ""}};

struct Built {
  Config cfg;
  std::unique_ptr<Model> model;
};

Built build(const char* yaml, const std::vector<Override>& ov) {
  Built b;
  b.cfg = parse_config(yaml, "t.yaml", ov);
  b.model = Model::build(b.cfg, Impl::kCpu, Shape(1, 1, 28, 28), 10);
  b.model->params().init(b.cfg.training.seed);
  return b;
}

double summed_loss(Model& m, const Tensor& in, const Tensor& target) {
  Tensor acc = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64);
  m.loss().compute(m.forward(in), target, nullptr, acc);
  return acc.data<double>()[0];
}

// One train_batch: the model sees noise(augment(batch)) and an autoencoder's loss
// compares with augment(batch); a classifier keeps its labels. Checked by the loss
// the step adds up, which is computed before the weights change.
TEST(AugmentTrainer, TheModelSeesTheNoisyInputAndTheLossTheCleanTarget) {
  Dataset data = testing::synthetic_blobs(20, 1);
  for (const char* yaml : {kAe, kMlp}) {
    Built b = build(yaml, kNoiseAndAugment);
    const bool ae = yaml == kAe;
    SCOPED_TRACE(ae ? "autoencoder" : "classifier");
    Model& m = *b.model;
    m.allocate(16);
    BatchFeeder feed(data, Device::kCPU, 16, m.input_shape());
    const int64_t step = 0;  // a fresh trainer's first step
    feed.load(3, 13);
    Tensor clean = Tensor::empty(feed.x().shape()), noisy = Tensor::empty(feed.x().shape());
    augment_batch(feed.x(), clean, data.sample_shape(), b.cfg.training.augment,
                  b.cfg.training.seed, step);
    add_input_noise(clean, noisy, b.cfg.training.input_noise, b.cfg.training.seed, step);
    m.set_mode(true, step);
    const Tensor& target = ae ? clean : feed.labels();
    const double want = summed_loss(m, noisy, target);
    EXPECT_NE(want, summed_loss(m, clean, target));  // the noise matters
    if (ae) {
      EXPECT_NE(want, summed_loss(m, noisy, noisy));
      EXPECT_NE(want, summed_loss(m, noisy, feed.x()));  // the target is augmented
    }

    Trainer t(m, b.cfg.training);
    Tensor acc = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64);
    t.train_batch(feed, 3, 13, acc);
    EXPECT_EQ(acc.data<double>()[0], want);
    EXPECT_EQ(t.step_path(feed).rfind("layer by layer: training.input_noise is gaussian std=0.2",
                                      0), 0u) << t.step_path(feed);
  }
}

// Stopped part way through the second epoch, checkpointed, loaded into a fresh model
// and continued by a fresh trainer: the very bits of the uninterrupted run.
TEST(AugmentTrainer, ResumeThroughACheckpointIsExact) {
  Dataset data = testing::synthetic_blobs(100, 2);  // 7 steps an epoch (the last of 4)
  Dataset none;
  none.images = Tensor::empty(Shape(0, 1, 28, 28), DType::kU8);
  none.labels = Tensor::empty(Shape(0, 1, 1, 1), DType::kI32);
  for (const char* yaml : {kAe, kMlp}) {
    SCOPED_TRACE(yaml == kAe ? "autoencoder" : "classifier");
    std::vector<Override> ov = kNoiseAndAugment;
    if (yaml == kMlp) ov[0] = {"training.input_noise={type: mask, p: 0.3}", ""};
    Built whole = build(yaml, ov);
    Trainer whole_t(*whole.model, whole.cfg.training);
    whole_t.set_progress(Trainer::Progress::kQuiet);
    {
      std::ostringstream log;
      whole_t.fit(data, none, log);
    }
    testing::TempDir dir;
    const std::string ckpt = dir.file("c.safetensors");
    {
      Built first = build(yaml, ov);
      Trainer t(*first.model, first.cfg.training);
      t.set_progress(Trainer::Progress::kQuiet);
      t.on_step([](TrainState& s) { return s.epoch == 1 && s.step == 3; });
      TrainState st;
      std::ostringstream log;
      t.fit(data, none, log, st);
      ASSERT_EQ(st.global_step, 10);
      save_checkpoint(ckpt, *first.model, t.optimizer(), first.cfg, st, data.size());
    }
    Built second = build(yaml, ov);
    second.model->params().init(99);  // the checkpoint must replace these
    TrainState st;
    Trainer t(*second.model, second.cfg.training);
    load_checkpoint(ckpt, *second.model, t.optimizer(), second.cfg, st, data.size());
    t.set_progress(Trainer::Progress::kQuiet);
    std::ostringstream log;
    t.fit(data, none, log, st);
    const ParamStore &a = whole.model->params(), &b = second.model->params();
    EXPECT_EQ(std::memcmp(a.params().raw(), b.params().raw(), a.padded() * 4), 0);
    const Tensor* va = whole_t.optimizer().find_state("momentum");
    const Tensor* vb = t.optimizer().find_state("momentum");
    ASSERT_TRUE(va && vb);
    EXPECT_EQ(std::memcmp(va->raw(), vb->raw(), va->bytes()), 0);

    // Without the transforms the run goes elsewhere (they are not a no-op).
    Built plain = build(yaml, {});
    Trainer p(*plain.model, plain.cfg.training);
    p.set_progress(Trainer::Progress::kQuiet);
    p.fit(data, none, log);
    EXPECT_NE(std::memcmp(a.params().raw(), plain.model->params().params().raw(), a.padded() * 4),
              0);
  }
}

TEST(AugmentTrainer, ResumeWithOtherTransformsIsRefused) {
  Dataset data = testing::synthetic_blobs(40, 3);
  Built b = build(kAe, kNoiseAndAugment);
  testing::TempDir dir;
  const std::string ckpt = dir.file("c.safetensors");
  TrainState st;
  st.epoch = 1;
  st.global_step = 3;
  {
    Trainer t(*b.model, b.cfg.training);
    t.optimizer().set_steps(st.global_step);
    save_checkpoint(ckpt, *b.model, t.optimizer(), b.cfg, st, data.size());
  }
  struct Case {
    std::vector<Override> ov;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"data.augment={hflip: true, crop_padding: 3}", ""}},
       "it was written with training.input_noise gaussian std=0.2 but this run has none"},
      {{{"training.input_noise={type: gaussian, std: 0.21}", ""},
        {"data.augment={hflip: true, crop_padding: 3}", ""}},
       "training.input_noise gaussian std=0.2 but this run has gaussian std=0.21"},
      {{{"training.input_noise={type: gaussian, std: 0.2}", ""}, {"data.augment.hflip=true", ""}},
       "data.augment hflip crop_padding=3 but this run has hflip;"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    Built other = build(kAe, c.ov);
    TrainState s2;
    try {
      Trainer t(*other.model, other.cfg.training);
      load_checkpoint(ckpt, *other.model, t.optimizer(), other.cfg, s2, data.size());
      ADD_FAILURE() << "resumed";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
      EXPECT_NE(msg.find("--init " + ckpt), std::string::npos) << msg;
    }
  }
  // The same settings resume.
  Built same = build(kAe, kNoiseAndAugment);
  TrainState s3;
  Trainer t(*same.model, same.cfg.training);
  load_checkpoint(ckpt, *same.model, t.optimizer(), same.cfg, s3, data.size());
  EXPECT_EQ(s3.global_step, 3);
}

// The test loss fit() reports is the clean one: the same as evaluate() gives on the
// trained weights, and evaluate() does not depend on the transforms.
TEST(AugmentTrainer, EvaluationSeesCleanImages) {
  Dataset tr = testing::synthetic_blobs(64, 4), te = testing::synthetic_blobs(40, 5);
  Built b = build(kAe, {{"training.input_noise={type: mask, p: 0.5}", ""},
                        {"data.augment={hflip: true, crop_padding: 4}", ""}});
  Trainer t(*b.model, b.cfg.training);
  t.set_progress(Trainer::Progress::kQuiet);
  std::ostringstream log;
  auto r = t.fit(tr, te, log);
  ASSERT_EQ(r.size(), 2u);
  const EvalResult e = evaluate(*b.model, te, 16);
  EXPECT_EQ(r.back().test.loss, e.loss);
  // By hand: the clean forward of the whole test set, in eval mode.
  b.model->allocate(40);
  b.model->set_mode(false, 0);
  Tensor x = Tensor::empty(Shape(40, 1, 28, 28));
  std::vector<int32_t> idx(40);
  for (int i = 0; i < 40; ++i) idx[size_t(i)] = i;
  gather_batch(te, idx.data(), 40, x, nullptr);
  EXPECT_NEAR(summed_loss(*b.model, x, x) / 40, e.loss, 1e-6 * e.loss);
}

TEST(AugmentTrainer, TheFusedStepRefuses) {
  Dataset data = testing::synthetic_classes(20, 1);
  Built n = build(kMlp, {{"training.input_noise={type: mask, p: 0.25}", ""}});
  EXPECT_EQ(fused_step_refusal(*n.model, n.cfg.training, data),
            "training.input_noise is mask p=0.25 (the fused step trains on the clean batch)");
  Built a = build(kMlp, {{"data.augment.crop_padding=2", ""}});
  EXPECT_EQ(fused_step_refusal(*a.model, a.cfg.training, data),
            "data.augment is crop_padding=2 (the fused step trains on the batch as gathered)");
  Built plain = build(kMlp, {});
  EXPECT_EQ(fused_step_refusal(*plain.model, plain.cfg.training, data).find("input_noise"),
            std::string::npos);
}

// ---- config ----------------------------------------------------------------------------

TEST(AugmentConfig, DefaultsAreOffAndRecorded) {
  Config d = parse_config("name: t\ndata: {format: mnist}\nmodel: {loss: mse, layers: [{type: "
                          "relu}]}\n", "t.yaml");
  EXPECT_FALSE(d.training.input_noise.active());
  EXPECT_FALSE(d.training.augment.active());
  EXPECT_EQ(d.training.augment.describe(), "none");
  EXPECT_EQ(d.resolved["training"]["input_noise"]["type"].as<std::string>(), "none");
  EXPECT_FALSE(d.resolved["data"]["augment"]["hflip"].as<bool>());
  EXPECT_EQ(d.resolved["data"]["augment"]["crop_padding"].as<int>(), 0);
}

Config parse_with(const std::string& training, const std::string& data = "data: {format: mnist}") {
  return parse_config("name: t\n" + data + "\nmodel: {loss: mse, layers: [{type: relu}]}\n" +
                          training + "\n",
                      "t.yaml");
}

TEST(AugmentConfig, ReadsEachTypeAndRecordsIt) {
  Config g = parse_with("training: {input_noise: {type: gaussian}}",
                        "data: {format: mnist, augment: {hflip: true, crop_padding: 4}}");
  EXPECT_EQ(g.training.input_noise.type, InputNoiseConfig::Type::kGaussian);
  EXPECT_EQ(g.training.input_noise.std, 0.1);
  EXPECT_EQ(g.resolved["training"]["input_noise"]["std"].as<double>(), 0.1);
  EXPECT_FALSE(g.resolved["training"]["input_noise"]["p"]);
  EXPECT_TRUE(g.training.augment.hflip);
  EXPECT_EQ(g.training.augment.crop_padding, 4);
  EXPECT_EQ(g.resolved["data"]["augment"]["crop_padding"].as<int>(), 4);
  EXPECT_EQ(g.training.augment.describe(), "hflip crop_padding=4");

  Config m = parse_with("training: {input_noise: {type: mask, p: 0.3}}");
  EXPECT_EQ(m.training.input_noise.type, InputNoiseConfig::Type::kMask);
  EXPECT_EQ(m.training.input_noise.p, 0.3);
  EXPECT_EQ(m.training.input_noise.describe(), "mask p=0.3");
  EXPECT_EQ(m.resolved["training"]["input_noise"]["p"].as<double>(), 0.3);
  // The defaults of a mask, and switching noise off from the command line.
  EXPECT_EQ(parse_with("training: {input_noise: {type: mask}}").training.input_noise.p, 0.25);
  Config off = parse_config("name: t\ndata: {format: mnist}\nmodel: {loss: mse, layers: [{type: "
                            "relu}]}\ntraining: {input_noise: {type: mask, p: 0.3}}\n",
                            "t.yaml", {{"training.input_noise={type: none}", ""}});
  EXPECT_FALSE(off.training.input_noise.active());
  EXPECT_EQ(InputNoiseConfig{}.describe(), "none");
}

TEST(AugmentConfig, ErrorsAreOneLineWithTheirPlace) {
  struct Case {
    std::string training, data, message;
  };
  const std::string d0 = "data: {format: mnist}";
  const std::vector<Case> cases = {
      {"training: {input_noise: {type: gausian}}", d0,
       "t.yaml:4:32: training.input_noise.type: unknown value 'gausian' (did you mean "
       "'gaussian'?); choose one of: none, gaussian, mask"},
      {"training: {input_noise: {type: mask, p: 1}}", d0,
       "training.input_noise.p: must be below 1 (p = 1 sets every input value to 0), got 1"},
      {"training: {input_noise: {type: mask, p: 1.5}}", d0,
       "training.input_noise.p: must be between 0 and 1, got 1.5"},
      {"training: {input_noise: {type: gaussian, std: -0.1}}", d0,
       "training.input_noise.std: must be between 0 and 1000, got -0.1"},
      {"training: {input_noise: {type: mask, std: 0.1}}", d0,
       "training.input_noise.std: belongs to type: gaussian, but the type is mask; remove the "
       "key or set type: gaussian"},
      {"training: {input_noise: {p: 0.1}}", d0,
       "training.input_noise.p: belongs to type: mask, but the type is none (the default)"},
      {"training: {input_noise: {type: gaussian, sdt: 0.1}}", d0,
       "unknown key 'training.input_noise.sdt' (did you mean 'std'?)"},
      {"training: {input_noise: 0.1}", d0,
       "training.input_noise must be a mapping of keys to values, got 0.1"},
      {"training: {input_noise: }", d0, "training.input_noise: needs a value"},
      {"training: {}", "data: {format: mnist, augment: {hfilp: true}}",
       "unknown key 'data.augment.hfilp' (did you mean 'hflip'?); known keys here: "
       "crop_padding, hflip"},
      {"training: {}", "data: {format: mnist, augment: {crop_padding: -1}}",
       "data.augment.crop_padding: must be between 0 and 1024, got -1"},
      {"training: {}", "data: {format: mnist, augment: {hflip: maybe}}",
       "data.augment.hflip: expected true or false, got 'maybe'"},
      {"training: {}", "data: {format: mnist, augment: true}",
       "data.augment must be a mapping of keys to values, got true"},
  };
  // A mapping given with --set: its keys' errors name the --set.
  try {
    parse_config("name: t\ndata: {format: mnist}\nmodel: {loss: mse, layers: [{type: relu}]}\n",
                 "t.yaml", {{"training.input_noise={type: mask, p: 2}", ""}});
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--set training.input_noise={type: mask, p: 2}: training.input_noise.p: must be "
              "between 0 and 1, got 2");
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.training + " " + c.data);
    try {
      parse_with(c.training, c.data);
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("t.yaml:", 0), 0u) << msg;
      EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

// Through the command line: config.yaml records the resolved keys, the run says
// what it applies, and --resume with another setting stops before training.
TEST(AugmentRun, RecordedInConfigYamlAndCheckedOnResume) {
  if (!std::filesystem::exists(testing::fashion_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)";
  testing::TempDir t;
  const std::string args =
      "run configs/fashion_ae.yaml --set data.train_limit=64 --set data.test_limit=32 --batch 32 "
      "--progress quiet --out " + t.file("r") + " --weights-dir " + t.file("w") +
      " --set 'training.input_noise={type: mask, p: 0.3}' --set data.augment.hflip=true ";
  auto r = testing::run_hpmc(args + "--epochs 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("training batches only: input noise mask p=0.3, augment hflip\n"),
            std::string::npos) << r.out;
  const std::string cy = testing::slurp(t.file("r/config.yaml"));
  YAML::Node doc = YAML::Load(cy);
  EXPECT_EQ(doc["training"]["input_noise"]["type"].as<std::string>(), "mask") << cy;
  EXPECT_EQ(doc["training"]["input_noise"]["p"].as<double>(), 0.3) << cy;
  EXPECT_TRUE(doc["data"]["augment"]["hflip"].as<bool>()) << cy;
  EXPECT_EQ(doc["data"]["augment"]["crop_padding"].as<int>(), 0) << cy;

  auto other = testing::run_hpmc(args + "--epochs 2 --resume --set data.augment.crop_padding=2");
  EXPECT_EQ(other.code, 3) << other.err;
  EXPECT_NE(other.err.find("it was written with data.augment hflip but this run has hflip "
                           "crop_padding=2"),
            std::string::npos) << other.err;
  auto same = testing::run_hpmc(args + "--epochs 2 --resume");
  EXPECT_EQ(same.code, 0) << same.err;
}

}  // namespace
}  // namespace hpmc
