// The fused MLP training step (model/fused_step.h, layers/gpu/mlp_step.cu):
// which models take it, and that it trains as the layer-by-layer path does —
// the same losses, weights, momentum and last gradients to rounding — for odd
// widths, odd batches with a partial last batch, batch 1, 2 to 4 layers,
// momentum and weight decay; and that it is deterministic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/rng.h"
#include "gpu_testing.h"
#include "model/batches.h"
#include "model/fused_step.h"
#include "model/model.h"
#include "model/trainer.h"
#include "synthetic_data.h"
#include "testing.h"

namespace hpmc {
namespace {

// n random images of shape (1, h, w) with labels in [0, classes).
Dataset random_data(int n, int h, int w, int classes, uint64_t seed) {
  Dataset d;
  d.source = "random";
  d.images = Tensor::empty(Shape(n, 1, h, w), DType::kU8);
  d.labels = Tensor::empty(Shape(n, 1, 1, 1), DType::kI32);
  d.num_classes = classes;
  Rng rng(seed);
  for (size_t i = 0; i < size_t(n) * h * w; ++i) d.images.data<uint8_t>()[i] = uint8_t(rng.below(256));
  for (int i = 0; i < n; ++i) d.labels.data<int32_t>()[i] = int32_t(rng.below(uint64_t(classes)));
  return d;
}

// An MLP config: flatten, then linear layers of the given widths with relu between.
// `extra` goes into the training map, e.g. ", schedule: {type: step, step_size: 3}".
std::string mlp_yaml(const std::vector<int>& widths, int batch, double momentum, double wd,
                     bool fuse = true, int epochs = 2, const std::string& extra = "") {
  std::ostringstream y;
  y << "name: m\ndata: {format: mnist}\nmodel:\n  loss: softmax_cross_entropy\n  layers:\n"
    << "    - {name: flat, type: flatten}\n";
  for (size_t i = 0; i < widths.size(); ++i) {
    y << "    - {name: fc" << i + 1 << ", type: linear, out_features: " << widths[i] << "}\n";
    if (i + 1 < widths.size()) y << "    - {name: relu" << i + 1 << ", type: relu}\n";
  }
  y << "training: {epochs: " << epochs << ", batch_size: " << batch << ", lr: 0.05, momentum: "
    << momentum << ", weight_decay: " << wd << ", seed: 7, fuse: " << (fuse ? "true" : "false")
    << extra << "}\n";
  return y.str();
}

struct Trained {
  std::unique_ptr<Model> model;
  std::unique_ptr<Trainer> trainer;  // holds the optimizer's state
  Optimizer* optimizer = nullptr;
  std::vector<EpochResult> epochs;
  std::string path;
};

Trained train(const std::string& yaml, const Dataset& data, Impl impl = Impl::kIm2col) {
  Trained t;
  Config cfg = parse_config(yaml, "t.yaml");
  t.model = Model::build(cfg, impl, data.sample_shape(), data.num_classes);
  t.model->params().init(cfg.training.seed);
  t.trainer = std::make_unique<Trainer>(*t.model, cfg.training);
  Trainer& tr = *t.trainer;
  t.optimizer = &tr.optimizer();
  tr.set_progress(Trainer::Progress::kQuiet);
  {
    BatchFeeder feed(data, t.model->device(), std::min(cfg.training.batch_size, data.size()),
                     t.model->input_shape());
    t.path = tr.step_path(feed);
  }
  std::ostringstream log;
  Dataset none;
  none.images = Tensor::empty(Shape(0, 1, 1, 1), DType::kU8);
  none.labels = Tensor::empty(Shape(0, 1, 1, 1), DType::kI32);
  t.epochs = tr.fit(data, none, log);
  return t;
}

std::vector<float> host(const Tensor& t) {
  Tensor h = t.to_device(Device::kCPU);
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

// max |a − b| / max(max |b|, 1e-3) over the buffer.
double buffer_rel(const Tensor& a, const Tensor& b) {
  std::vector<float> x = host(a), y = host(b);
  EXPECT_EQ(x.size(), y.size());
  double diff = 0, scale = 1e-3;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    EXPECT_TRUE(std::isfinite(x[i])) << "element " << i;
    diff = std::max(diff, std::fabs(double(x[i]) - double(y[i])));
    scale = std::max(scale, std::fabs(double(y[i])));
  }
  return diff / scale;
}

// The fraction of elements with |a − b| ≤ tol · max |b|.
double agreement(const Tensor& a, const Tensor& b, double tol) {
  std::vector<float> x = host(a), y = host(b);
  EXPECT_EQ(x.size(), y.size());
  double scale = 1e-3;
  for (float v : y) scale = std::max(scale, std::fabs(double(v)));
  size_t ok = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    ok += std::fabs(double(x[i]) - double(y[i])) <= tol * scale ? 1 : 0;
  return double(ok) / double(std::max<size_t>(1, y.size()));
}

void expect_same_training(const std::vector<int>& widths, int h, int w, int n, int batch,
                          double momentum, double wd, const std::string& extra = "") {
  const int classes = widths.back();
  Dataset data = random_data(n, h, w, classes, 11 + uint64_t(n));
  Trained fused = train(mlp_yaml(widths, batch, momentum, wd, true, 2, extra), data);
  Trained plain = train(mlp_yaml(widths, batch, momentum, wd, false, 2, extra), data);
  ASSERT_EQ(fused.path.rfind("fused", 0), 0u) << fused.path;
  ASSERT_EQ(plain.path.rfind("layer by layer", 0), 0u) << plain.path;
  ASSERT_EQ(fused.epochs.size(), plain.epochs.size());
  for (size_t e = 0; e < plain.epochs.size(); ++e) {
    const double a = fused.epochs[e].train_loss, b = plain.epochs[e].train_loss;
    EXPECT_LE(std::fabs(a - b), 2e-5 * std::max(1.0, std::fabs(b)))
        << "epoch " << e + 1 << " loss " << a << " vs " << b;
    EXPECT_EQ(fused.epochs[e].train_accuracy, plain.epochs[e].train_accuracy)
        << "epoch " << e + 1;
  }
  ParamStore& fp = fused.model->params();
  ParamStore& pp = plain.model->params();
  EXPECT_LE(buffer_rel(fp.params(), pp.params()), 2e-5) << "weights";
  EXPECT_LE(buffer_rel(fp.grads(), pp.grads()), 2e-4) << "last gradients";
  if (momentum != 0)
    EXPECT_LE(buffer_rel(fused.optimizer->state(0), plain.optimizer->state(0)), 2e-4)
        << "momentum";
}

TEST(GpuFused, MatchesLayerByLayerOddShapes) {
  HPMC_REQUIRE_GPU();
  // 35 inputs, widths 37 and 13, 7 classes; 83 samples in batches of 16 (last 3).
  expect_same_training({37, 13, 7}, 5, 7, 83, 16, 0.9, 1e-3);
}

// A schedule changes the fused kernel's learning rate step by step, as the
// optimizer's (the kernel takes it per launch).
TEST(GpuFused, MatchesLayerByLayerWithASchedule) {
  HPMC_REQUIRE_GPU();
  // 83 samples in batches of 16: 6 steps an epoch, 12 in all.
  expect_same_training({37, 13, 7}, 5, 7, 83, 16, 0.9, 1e-3,
                       ", schedule: {type: step, warmup_steps: 3, step_size: 2, gamma: 0.5}");
  expect_same_training({19, 3}, 3, 3, 50, 8, 0.0, 0.0,
                       ", schedule: {type: cosine, warmup_steps: 2, min_lr: 0.001}");
}

TEST(GpuFused, MatchesLayerByLayerTwoLayersNoMomentum) {
  HPMC_REQUIRE_GPU();
  expect_same_training({19, 3}, 3, 3, 50, 64, 0.0, 0.0);  // one partial batch of 50
}

TEST(GpuFused, MatchesLayerByLayerFourLayersBatch1) {
  HPMC_REQUIRE_GPU();
  expect_same_training({65, 33, 17, 5}, 1, 1, 9, 1, 0.5, 0.0);
}

TEST(GpuFused, MatchesLayerByLayerLongSums) {
  HPMC_REQUIRE_GPU();
  // 143 inputs and batches of 67: sums over several 64-wide chunks.
  expect_same_training({70, 5}, 13, 11, 134, 67, 0.9, 0.0);
}

// The mnist_mlp shape, one step on a batch of 130. The two paths add in
// different orders, so a ReLU input within rounding of zero can fall on
// different sides and send that unit's gradient another way: at 41,600 ReLU
// inputs a step that happens now and then, and over many steps of training
// on random labels it spreads. So this compares one step and lets a few
// gradient elements (one unit's row is 784 of 304,000) differ.
TEST(GpuFused, MatchesLayerByLayerMnistShapeOneStep) {
  HPMC_REQUIRE_GPU();
  Dataset data = random_data(130, 28, 28, 10, 21);
  Trained fused = train(mlp_yaml({320, 160, 10}, 130, 0.9, 0.0, true, 1), data);
  Trained plain = train(mlp_yaml({320, 160, 10}, 130, 0.9, 0.0, false, 1), data);
  ASSERT_EQ(fused.path.rfind("fused", 0), 0u) << fused.path;
  EXPECT_NEAR(fused.epochs[0].train_loss, plain.epochs[0].train_loss,
              1e-6 * plain.epochs[0].train_loss);
  ParamStore& fp = fused.model->params();
  ParamStore& pp = plain.model->params();
  EXPECT_GE(agreement(fp.grads(), pp.grads(), 1e-4), 0.995);
  EXPECT_GE(agreement(fp.params(), pp.params(), 1e-5), 0.995);
}

TEST(GpuFused, Deterministic) {
  HPMC_REQUIRE_GPU();
  Dataset data = testing::synthetic_classes(640, 3);
  const std::string y = mlp_yaml({320, 160, 10}, 64, 0.9, 1e-4);
  Trained a = train(y, data), b = train(y, data);
  ASSERT_EQ(a.path.rfind("fused", 0), 0u) << a.path;
  std::vector<float> pa = host(a.model->params().params()), pb = host(b.model->params().params());
  ASSERT_EQ(pa.size(), pb.size());
  EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)), 0);
  EXPECT_EQ(a.epochs.back().train_loss, b.epochs.back().train_loss);
}

// The step's phases chained by hand-off counts (the default: the forward
// layers, the head, the middle layer's backward and the last phase) add the
// same sums in the same order as with a grid barrier between them
// (HPMC_FUSED_CHAIN=0): the same bits. The shapes take every path: the head
// chained too (mnist_mlp at batch 64), the head after a barrier (batch 130:
// its rows and the last layer's items do not fit the grid side by side), two
// chained hidden layers before the last, unsplit products (batch 1), and one
// layer (the last phase waits for the head's rows).
TEST(GpuFused, ChainedStepIsExact) {
  HPMC_REQUIRE_GPU();
  struct Case {
    std::vector<int> widths;
    int h, w, n, batch;
  };
  const Case cases[] = {{{320, 160, 10}, 28, 28, 200, 64},
                        {{320, 160, 10}, 28, 28, 260, 130},
                        {{200, 130, 70, 5}, 9, 11, 90, 33},
                        {{65, 33, 17, 5}, 1, 1, 9, 1},
                        {{37, 3}, 5, 7, 40, 17}};
  for (const Case& c : cases) {
    SCOPED_TRACE(str("widths ", c.widths[0], "..", c.widths.back(), ", batch ", c.batch));
    Dataset data = random_data(c.n, c.h, c.w, c.widths.back(), 5 + uint64_t(c.n));
    const std::string y = mlp_yaml(c.widths, c.batch, 0.9, 1e-4);
    Trained chained = train(y, data);
    struct Unset {  // HPMC_FUSED_CHAIN=0 for the second run only, however it ends
      ~Unset() { unsetenv("HPMC_FUSED_CHAIN"); }
    } unset;
    ASSERT_EQ(setenv("HPMC_FUSED_CHAIN", "0", 1), 0);
    Trained barriers = train(y, data);
    ASSERT_EQ(chained.path.rfind("fused", 0), 0u) << chained.path;
    std::vector<float> a = host(chained.model->params().params()),
                       b = host(barriers.model->params().params());
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    EXPECT_EQ(chained.epochs.back().train_loss, barriers.epochs.back().train_loss);
  }
}

// Stopping mid-epoch and going on with a new trainer (as a resumed run does:
// the fused step starts without a prepared batch) gives the very bits of an
// uninterrupted run.
TEST(GpuFused, StopAndContinueIsExact) {
  HPMC_REQUIRE_GPU();
  Dataset data = testing::synthetic_classes(1000, 8);  // 16 steps an epoch, the last of 40
  Dataset none;
  none.images = Tensor::empty(Shape(0, 1, 1, 1), DType::kU8);
  none.labels = Tensor::empty(Shape(0, 1, 1, 1), DType::kI32);
  const std::string y = mlp_yaml({320, 160, 10}, 64, 0.9, 1e-4);
  Trained whole = train(y, data);
  ASSERT_EQ(whole.path.rfind("fused", 0), 0u) << whole.path;

  Config cfg = parse_config(y, "t.yaml");
  auto model = Model::build(cfg, Impl::kIm2col, data.sample_shape(), data.num_classes);
  model->params().init(cfg.training.seed);
  TrainState state;
  Trainer second(*model, cfg.training);
  {
    Trainer first(*model, cfg.training);
    first.set_progress(Trainer::Progress::kQuiet);
    first.on_step([](TrainState& s) { return s.epoch == 1 && s.step == 5; });  // stop mid-epoch 2
    std::ostringstream log;
    first.fit(data, none, log, state);
    second.optimizer().copy_state_from(first.optimizer());  // as a checkpoint carries it
  }
  ASSERT_EQ(state.epoch, 1);
  ASSERT_EQ(state.step, 5);
  second.set_progress(Trainer::Progress::kQuiet);
  std::ostringstream log;
  const auto rest = second.fit(data, none, log, state);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest.back().train_loss, whole.epochs.back().train_loss);
  std::vector<float> a = host(model->params().params()), b = host(whole.model->params().params());
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  std::vector<float> va = host(second.optimizer().state(0)),
                     vb = host(whole.optimizer->state(0));
  EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0);
}

TEST(GpuFused, LearnsTheSyntheticClasses) {
  HPMC_REQUIRE_GPU();
  Dataset data = testing::synthetic_classes(3200, 5);
  Trained t = train(mlp_yaml({320, 160, 10}, 64, 0.9, 0.0, true, 3), data);
  ASSERT_EQ(t.path.rfind("fused", 0), 0u) << t.path;
  EXPECT_LT(t.epochs.back().train_loss, 0.1);
  EXPECT_GT(t.epochs.back().train_accuracy, 0.97);
}

std::string refusal(const std::string& yaml, const Dataset& data, Impl impl = Impl::kIm2col) {
  Config cfg = parse_config(yaml, "t.yaml");
  auto model = Model::build(cfg, impl, data.sample_shape(), data.num_classes);
  return fused_step_refusal(*model, cfg.training, data);
}

TEST(GpuFused, WhichModelsTakeIt) {
  HPMC_REQUIRE_GPU();
  Dataset data = random_data(20, 4, 4, 10, 1);
  EXPECT_EQ(refusal(mlp_yaml({8, 10}, 4, 0, 0), data), "");
  EXPECT_NE(refusal(mlp_yaml({8, 10}, 4, 0, 0), data, Impl::kTiled).find("im2col"),
            std::string::npos);
  EXPECT_EQ(refusal(mlp_yaml({8, 10}, 4, 0, 0, false), data), "training.fuse is false");
  EXPECT_NE(refusal(mlp_yaml({10}, 4, 0, 0), data).find("1 linear layers"), std::string::npos);
  // A label outside the classes: the layer-by-layer loss reports it.
  Dataset bad = data.slice(0, data.size());  // a copy
  bad.labels.data<int32_t>()[13] = 10;
  EXPECT_NE(refusal(mlp_yaml({8, 10}, 4, 0, 0), bad).find("label 10 of sample 13"),
            std::string::npos);
  Dataset wide = random_data(20, 4, 4, 33, 2);
  EXPECT_NE(refusal(mlp_yaml({8, 33}, 4, 0, 0), wide).find("33 classes"), std::string::npos);
  const char* conv = R"(name: c
data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {name: conv1, type: conv2d, out_channels: 2, kernel: 3, padding: 1}
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 10}
)";
  EXPECT_NE(refusal(conv, data).find("conv1"), std::string::npos);
  const char* nobias = R"(name: c
data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 8, bias: false}
    - {name: relu1, type: relu}
    - {name: fc2, type: linear, out_features: 10}
)";
  EXPECT_NE(refusal(nobias, data).find("no bias"), std::string::npos);
  // What the kernel's update cannot do: Adam, AdamW, Nesterov, clipping.
  auto with = [](const std::string& training) {
    std::string y = mlp_yaml({8, 10}, 4, 0, 0);
    return y.substr(0, y.find("training:")) + "training: " + training + "\n";
  };
  EXPECT_EQ(refusal(with("{optimizer: {type: adamw}}"), data),
            "the fused kernel applies SGD, and training.optimizer.type is adamw");
  EXPECT_EQ(refusal(with("{optimizer: {type: adam}}"), data),
            "the fused kernel applies SGD, and training.optimizer.type is adam");
  EXPECT_EQ(refusal(with("{optimizer: {type: sgd, momentum: 0.9, nesterov: true}}"), data),
            "the fused kernel applies SGD without Nesterov momentum");
  EXPECT_NE(refusal(with("{lr: 0.1, clip_grad_norm: 1}"), data).find("training.clip_grad_norm"),
            std::string::npos);
  EXPECT_EQ(refusal(with("{optimizer: {type: sgd, momentum: 0.9}, schedule: {type: cosine, "
                         "total_steps: 10}}"),
                    data),
            "");
  // In tf32 and bf16 the GPU rewrite makes the MLP one fused layer (its
  // products' epilogues take the ReLUs: gpu_rewrite.h); the fused step sees
  // the linear layers through it, and a non-linear step in it still refuses.
  for (const char* prec : {"tf32", "bf16"}) {
    SCOPED_TRACE(prec);
    const std::string yaml = mlp_yaml({8, 6, 10}, 4, 0, 0, true, 2, str(", precision: ", prec));
    Config c = parse_config(yaml, "t.yaml");
    auto m = Model::build(c, Impl::kIm2col, data.sample_shape(), data.num_classes);
    ASSERT_EQ(m->layers().size(), 2u);  // flat, fc1+relu1+fc2+relu2+fc3
    EXPECT_EQ(m->layers()[1]->name(), "fc1+relu1+fc2+relu2+fc3");
    EXPECT_EQ(fused_step_refusal(*m, c.training, data), "");
    std::string tanh = yaml;
    tanh.replace(tanh.find("type: relu}"), 11, "type: tanh}");
    EXPECT_EQ(refusal(tanh, data), "layer 'relu1' (tanh) is not part of a linear/relu chain");
  }
  // The trainer says why it trains layer by layer.
  Config cfg = parse_config(with("{optimizer: {type: adamw}}"), "t.yaml");
  auto model = Model::build(cfg, Impl::kIm2col, data.sample_shape(), data.num_classes);
  Trainer tr(*model, cfg.training);
  BatchFeeder feed(data, model->device(), 4, model->input_shape());
  EXPECT_EQ(tr.step_path(feed),
            "layer by layer: the fused kernel applies SGD, and training.optimizer.type is adamw");
}

// ---- tf32 and bf16: the fused step on tensor cores -----------------------------------

// In tf32 and bf16 the fused step multiplies on tensor cores, each operand
// rounded as the layer-by-layer kernels round it, and both paths add their
// products in FP32 (in different orders). One step of the mnist_mlp shape
// then agrees with the layer-by-layer step of the same precision to FP32
// rounding, but for the few elements where a sum within rounding of a
// rounding boundary (or of the ReLU's zero) lands on the other side of it in
// the next layer's operand; and it is not the fp32 step (the rounding is
// really there: the precision's error is far above FP32's).
class GpuFusedTc : public ::testing::TestWithParam<const char*> {};

TEST_P(GpuFusedTc, MatchesLayerByLayerInItsPrecisionOneStep) {
  HPMC_REQUIRE_GPU();
  const std::string prec = str(", precision: ", GetParam());
  Dataset data = random_data(130, 28, 28, 10, 21);
  Trained fused = train(mlp_yaml({320, 160, 10}, 130, 0.9, 0.0, true, 1, prec), data);
  Trained plain = train(mlp_yaml({320, 160, 10}, 130, 0.9, 0.0, false, 1, prec), data);
  Trained exact = train(mlp_yaml({320, 160, 10}, 130, 0.9, 0.0, true, 1), data);
  ASSERT_EQ(fused.path.rfind("fused", 0), 0u) << fused.path;
  ASSERT_EQ(plain.path.rfind("layer by layer", 0), 0u) << plain.path;
  const double lf = fused.epochs[0].train_loss, lp = plain.epochs[0].train_loss,
               le = exact.epochs[0].train_loss;
  EXPECT_NEAR(lf, lp, 1e-6 * lp);
  ParamStore& fp = fused.model->params();
  ParamStore& pp = plain.model->params();
  const double g_same = agreement(fp.grads(), pp.grads(), 1e-4),
               p_same = agreement(fp.params(), pp.params(), 1e-5),
               g_exact = agreement(fp.grads(), exact.model->params().grads(), 1e-4);
  std::printf("[ %s ] loss %.9g (layer by layer %.9g, fp32 %.9g); gradients within 1e-4: "
              "%.5f of the layer-by-layer ones, %.5f of fp32's; weights within 1e-5: %.5f\n",
              GetParam(), lf, lp, le, g_same, g_exact, p_same);
  EXPECT_GE(g_same, 0.995);
  EXPECT_GE(p_same, 0.995);
  EXPECT_LT(g_exact, 0.9) << "the fused " << GetParam() << " step computes fp32's gradients";
}

// Odd shapes (widths not multiples of a tile, partial batches, batch 1, four
// layers, momentum and weight decay), two epochs: the fused step trains as
// the layer-by-layer path does in the same precision, within that
// precision's rounding of each step (which random labels spread a little).
TEST_P(GpuFusedTc, MatchesLayerByLayerInItsPrecisionOddShapes) {
  HPMC_REQUIRE_GPU();
  const std::string prec = str(", precision: ", GetParam());
  struct Case {
    std::vector<int> widths;
    int h, w, n, batch;
    double momentum, wd;
  };
  const Case cases[] = {{{37, 13, 7}, 5, 7, 83, 16, 0.9, 1e-3},
                        {{65, 33, 17, 5}, 1, 1, 9, 1, 0.5, 0.0},
                        {{70, 5}, 13, 11, 134, 67, 0.9, 0.0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(str("widths ", c.widths[0], "..", c.widths.back(), ", batch ", c.batch));
    Dataset data = random_data(c.n, c.h, c.w, c.widths.back(), 11 + uint64_t(c.n));
    Trained fused = train(mlp_yaml(c.widths, c.batch, c.momentum, c.wd, true, 2, prec), data);
    Trained plain = train(mlp_yaml(c.widths, c.batch, c.momentum, c.wd, false, 2, prec), data);
    ASSERT_EQ(fused.path.rfind("fused", 0), 0u) << fused.path;
    for (size_t e = 0; e < plain.epochs.size(); ++e) {
      const double a = fused.epochs[e].train_loss, b = plain.epochs[e].train_loss;
      std::printf("[ %s ] epoch %zu loss %.9g, layer by layer %.9g\n", GetParam(), e + 1, a, b);
      EXPECT_LE(std::fabs(a - b), 1e-4 * std::max(1.0, std::fabs(b))) << "epoch " << e + 1;
    }
    const double w = buffer_rel(fused.model->params().params(), plain.model->params().params());
    std::printf("[ %s ] weights: largest difference %.3g of the largest weight\n", GetParam(), w);
    EXPECT_LE(w, 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuFusedTc, ::testing::Values("tf32", "bf16"));

}  // namespace
}  // namespace hpmc
