// The layers batchnorm2d, dropout, avgpool2d and upsample2d's bilinear mode,
// built through the registry from their YAML keys (the ops themselves are
// tested in test_bn_dropout.cpp, test_pool_upsample.cpp and, on the GPU,
// test_gpu_bn_pool.cpp):
//   * specs: PyTorch's parameter and buffer names, shapes and inits; key
//     checks; shapes; describe(); which upsample offers a fold;
//   * CPU layers: forward on hand values in training and eval mode, running
//     statistics and num_batches_tracked, the one-value-per-channel refusal,
//     dropout's mask drawn from the mode's counters and its backward;
//   * models from YAML (parse_config + Model::build) that use all four and
//     train with a falling loss; evaluate identically twice in eval mode;
//     train identically from the same seed (dropout included) and differently
//     from another; checkpoint the running statistics under PyTorch's names;
//     and resume exactly through the CLI (2 epochs = 1 + --resume + 1);
//   * GPU layers (HPMC_REQUIRE_GPU) against the CPU layers on odd shapes in
//     both modes, and a GPU model that tracks the CPU one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli_runner.h"
#include "core/device.h"
#include "core/error.h"
#include "gpu_testing.h"
#include "layers/batchnorm_spec.h"
#include "layers/cpu/dropout_ops.h"
#include "layers/dropout_spec.h"
#include "layers/pool_spec.h"
#include "model/checkpoint.h"
#include "model/gpu_rewrite.h"
#include "model/model.h"
#include "model/registry.h"
#include "model/trainer.h"
#include "synthetic_data.h"
#include "testing.h"

namespace hpmc {
namespace {

// ---- a layer with its parameters and buffers bound ----------------------------------------

// The layer's parameters, gradients and buffers as tensors on its device,
// initialised as the model does for constant inits (Kaiming-initialised
// tensors get U(−1, 1) from `seed`, none here), and bound.
struct Bound {
  LayerPtr layer;
  std::vector<Tensor> params, grads, buffers;

  std::vector<float> host(const Tensor& t) const {
    Tensor h = t.to_device(Device::kCPU);
    return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
  }
};

Tensor filled(const ParamSpec& s, Device dev) {
  Tensor t = Tensor::zeros(Shape(int(s.count()), 1, 1, 1));
  for (size_t i = 0; i < s.count(); ++i)
    t.data<float>()[i] = s.init == Init::kConstant ? s.value : 0.f;
  return dev == Device::kCPU ? t : t.to_device(dev);
}

Bound bind(LayerPtr layer) {
  Bound b;
  b.layer = std::move(layer);
  const Device dev = b.layer->device();
  std::vector<float*> p, g, bu;
  for (const ParamSpec& s : b.layer->param_specs()) {
    b.params.push_back(filled(s, dev));
    b.grads.push_back(Tensor::zeros(Shape(int(s.count()), 1, 1, 1), DType::kF32, dev));
    p.push_back(b.params.back().data<float>());
    g.push_back(b.grads.back().data<float>());
  }
  for (const ParamSpec& s : b.layer->buffer_specs()) {
    b.buffers.push_back(filled(s, dev));
    bu.push_back(b.buffers.back().data<float>());
  }
  b.layer->bind(p, g);
  b.layer->bind_buffers(bu);
  return b;
}

LayerMode training(uint64_t seed = 1, int64_t step = 0, int stream = 0) {
  LayerMode m;
  m.training = true;
  m.seed = seed;
  m.step = step;
  m.stream = stream;
  return m;
}

Tensor make_tensor(const Shape& s, const std::vector<float>& v) {
  Tensor t = Tensor::empty(s);
  EXPECT_EQ(v.size(), t.numel());
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

std::vector<float> values(const Tensor& t) {
  Tensor h = t.device() == Device::kCPU ? t : t.to_device(Device::kCPU);
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

Tensor forward(Layer& l, const Tensor& x) {
  Tensor y = Tensor::zeros(l.output_shape(x.shape()), DType::kF32, x.device());
  l.forward(x, y);
  return y;
}

Tensor backward(Layer& l, const Tensor& x, const Tensor& y, const Tensor& dy) {
  Tensor dx = Tensor::zeros(x.shape(), DType::kF32, x.device());
  l.backward(x, y, dy, &dx);
  return dx;
}

// ---- specs ---------------------------------------------------------------------------------

TEST(BatchNorm2dLayer, ParametersAndBuffersHavePyTorchsNamesShapesAndInits) {
  LayerPtr l = make_layer("batchnorm2d", "{}", Impl::kCpu, Shape(1, 5, 3, 3), "bn");
  ASSERT_EQ(l->kind(), LayerKind::kBatchNorm2d);
  const auto p = l->param_specs();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].name, "weight");
  EXPECT_EQ(p[0].dims, std::vector<int>{5});
  EXPECT_EQ(p[0].init, Init::kConstant);
  EXPECT_EQ(p[0].value, 1.f);
  EXPECT_EQ(p[1].name, "bias");
  EXPECT_EQ(p[1].init, Init::kZeros);
  const auto b = l->buffer_specs();
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].name, "running_mean");
  EXPECT_EQ(b[0].dims, std::vector<int>{5});
  EXPECT_EQ(b[0].init, Init::kZeros);
  EXPECT_EQ(b[1].name, "running_var");
  EXPECT_EQ(b[1].init, Init::kConstant);
  EXPECT_EQ(b[1].value, 1.f);
  EXPECT_EQ(b[2].name, "num_batches_tracked");
  EXPECT_TRUE(b[2].dims.empty());  // a scalar, as in PyTorch
  EXPECT_EQ(l->param_count(), 10u);
  EXPECT_EQ(l->describe(), "5 ch eps 1e-05 momentum 0.1");
  // Without affine: no parameters, the same buffers.
  LayerPtr n = make_layer("batchnorm2d", "{affine: false, eps: 0.001, momentum: 0.5}", Impl::kCpu,
                          Shape(1, 3, 2, 2));
  EXPECT_TRUE(n->param_specs().empty());
  EXPECT_EQ(n->buffer_specs().size(), 3u);
  EXPECT_EQ(n->describe(), "3 ch eps 0.001 momentum 0.5 no-affine");
}

TEST(BatchNorm2dLayer, KeysAndShapesAreChecked) {
  EXPECT_THROW(make_layer("batchnorm2d", "{momentum: 1.5}", Impl::kCpu, Shape(1, 3, 2, 2)),
               ConfigError);
  EXPECT_THROW(make_layer("batchnorm2d", "{eps: -1}", Impl::kCpu, Shape(1, 3, 2, 2)),
               ConfigError);
  EXPECT_THROW(make_layer("batchnorm2d", "{epsilon: 1}", Impl::kCpu, Shape(1, 3, 2, 2)),
               ConfigError);
  LayerPtr l = make_layer("batchnorm2d", "{}", Impl::kCpu, Shape(1, 3, 2, 2), "bn");
  EXPECT_EQ(l->output_shape(Shape(7, 3, 5, 1)), Shape(7, 3, 5, 1));
  try {
    l->output_shape(Shape(1, 4, 2, 2));
    ADD_FAILURE() << "no ShapeError for 4 channels";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("built for 3 channels"), std::string::npos) << e.what();
  }
}

TEST(DropoutLayer, KeysAndDescription) {
  EXPECT_THROW(make_layer("dropout", "{p: 1.5}", Impl::kCpu, Shape(1, 3, 2, 2)), ConfigError);
  EXPECT_THROW(make_layer("dropout", "{p: -0.1}", Impl::kCpu, Shape(1, 3, 2, 2)), ConfigError);
  LayerPtr l = make_layer("dropout", "{}", Impl::kCpu, Shape(1, 3, 2, 2));
  EXPECT_EQ(l->kind(), LayerKind::kDropout);
  EXPECT_EQ(l->describe(), "p 0.5");
  EXPECT_EQ(l->output_shape(Shape(2, 3, 2, 2)), Shape(2, 3, 2, 2));
  EXPECT_TRUE(l->param_specs().empty());
  EXPECT_TRUE(l->buffer_specs().empty());
}

TEST(AvgPool2dLayer, KeysShapesAndDescription) {
  LayerPtr l = make_layer("avgpool2d", "{kernel: 3, stride: 2}", Impl::kCpu, Shape(1, 3, 7, 9));
  EXPECT_EQ(l->kind(), LayerKind::kAvgPool2d);
  EXPECT_EQ(l->describe(), "3x3 s2");
  EXPECT_EQ(l->output_shape(Shape(2, 3, 7, 9)), Shape(2, 3, 3, 4));
  EXPECT_EQ(make_layer("avgpool2d", "{}", Impl::kCpu, Shape(1, 1, 4, 4))->describe(), "2x2 s2");
  EXPECT_THROW(make_layer("avgpool2d", "{kernel: 5}", Impl::kCpu, Shape(1, 1, 4, 4)), ShapeError);
  EXPECT_THROW(make_layer("avgpool2d", "{kernel: 0}", Impl::kCpu, Shape(1, 1, 4, 4)), ConfigError);
}

// The GPU rewrite (model/gpu_rewrite.h) sees which is nearest: only a
// nearest upsample folds or takes a ReLU's mask (tests/test_rewrite.cpp).
TEST(UpSample2dLayer, ModeKeyDefaultsToNearestAndOnlyNearestOffersAFold) {
  LayerPtr n = make_layer("upsample2d", "{}", Impl::kCpu, Shape(1, 3, 4, 4));
  EXPECT_EQ(n->describe(), "nearest x2");
  EXPECT_TRUE(rewrite_node(*n).nearest);
  EXPECT_EQ(rewrite_node(*n).scale, 2);
  LayerPtr b = make_layer("upsample2d", "{mode: bilinear, scale: 3}", Impl::kCpu, Shape(1, 3, 4, 4));
  EXPECT_EQ(b->describe(), "bilinear x3");
  EXPECT_FALSE(rewrite_node(*b).nearest);  // no nearest upsample to fold
  EXPECT_EQ(b->output_shape(Shape(2, 3, 4, 5)), Shape(2, 3, 12, 15));
  EXPECT_THROW(make_layer("upsample2d", "{mode: bicubic}", Impl::kCpu, Shape(1, 3, 4, 4)),
               ConfigError);
}

// ---- CPU layers ------------------------------------------------------------------------------

TEST(BatchNorm2dLayer, TrainingUsesBatchStatisticsAndUpdatesTheBuffers) {
  Bound b = bind(make_layer("batchnorm2d", "{}", Impl::kCpu, Shape(1, 2, 1, 2)));
  // Channel 0 holds {1, 2, 3, 4}, channel 1 {−1, −1, 1, 1} (N = 2, H = 1, W = 2).
  const Tensor x = make_tensor(Shape(2, 2, 1, 2), {1, 2, -1, -1, 3, 4, 1, 1});
  b.layer->set_mode(training());
  const std::vector<float> y = values(forward(*b.layer, x));
  const double i0 = 1 / std::sqrt(1.25 + 1e-5), i1 = 1 / std::sqrt(1.0 + 1e-5);
  const double expect[] = {-1.5 * i0, -0.5 * i0, -i1, -i1, 0.5 * i0, 1.5 * i0, i1, i1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[size_t(i)], expect[i], 1e-6) << i;
  EXPECT_FLOAT_EQ(b.buffers[0].data<float>()[0], 0.25f);
  EXPECT_FLOAT_EQ(b.buffers[1].data<float>()[0], float(0.9 + 0.1 * 5.0 / 3.0));
  EXPECT_EQ(b.buffers[2].data<float>()[0], 1.f);
  forward(*b.layer, x);
  EXPECT_EQ(b.buffers[2].data<float>()[0], 2.f);  // num_batches_tracked counts batches
  EXPECT_FLOAT_EQ(b.buffers[0].data<float>()[0], 0.9f * 0.25f + 0.25f);
  // Eval mode: the running statistics, and nothing is updated.
  b.layer->set_mode(LayerMode{});
  const std::vector<float> ye = values(forward(*b.layer, x));
  const double rm = b.buffers[0].data<float>()[0], rv = b.buffers[1].data<float>()[0];
  EXPECT_NEAR(ye[0], (1 - rm) / std::sqrt(rv + 1e-5), 1e-6);
  EXPECT_EQ(b.buffers[2].data<float>()[0], 2.f);
  // Backward in training mode: γ and β gradients accumulate; Σ dx = 0 per
  // channel (the mean is subtracted out).
  b.layer->set_mode(training());
  const Tensor yt = forward(*b.layer, x);
  const Tensor dy = make_tensor(x.shape(), {1, 0, 2, -1, 0.5f, 3, 0, 1});
  const std::vector<float> dx = values(backward(*b.layer, x, yt, dy));
  EXPECT_NEAR(dx[0] + dx[1] + dx[4] + dx[5], 0.0, 1e-6);
  EXPECT_NEAR(dx[2] + dx[3] + dx[6] + dx[7], 0.0, 1e-6);
  EXPECT_FLOAT_EQ(b.grads[1].data<float>()[0], 4.5f);  // Σ dy of channel 0
  EXPECT_FLOAT_EQ(b.grads[1].data<float>()[1], 2.f);
  backward(*b.layer, x, yt, dy);
  EXPECT_FLOAT_EQ(b.grads[1].data<float>()[0], 9.f);
}

TEST(BatchNorm2dLayer, TrainingRefusesOneValuePerChannel) {
  Bound b = bind(make_layer("batchnorm2d", "{}", Impl::kCpu, Shape(1, 4, 1, 1), "bn"));
  const Tensor x = make_tensor(Shape(1, 4, 1, 1), {1, 2, 3, 4});
  b.layer->set_mode(training());
  try {
    forward(*b.layer, x);
    ADD_FAILURE() << "no ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("more than one value per channel"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  b.layer->set_mode(LayerMode{});  // eval takes a single sample
  EXPECT_EQ(values(forward(*b.layer, x))[3], float(4 / std::sqrt(1 + 1e-5)));
}

TEST(DropoutLayer, TrainingDrawsTheMaskFromTheModesCounters) {
  Bound b = bind(make_layer("dropout", "{p: 0.25}", Impl::kCpu, Shape(1, 3, 5, 7)));
  Rng rng(8);
  const Tensor x = testing::random_tensor(Shape(2, 3, 5, 7), rng);
  b.layer->set_mode(training(/*seed=*/42, /*step=*/9, /*stream=*/4));
  const std::vector<float> y = values(forward(*b.layer, x));
  std::vector<float> expect(x.numel());
  dropout_forward(x.data<float>(), expect.data(), x.numel(), 0.25, 42, 4, 9);
  EXPECT_EQ(y, expect);
  size_t zeros = 0;
  for (float v : y) zeros += v == 0.f;
  EXPECT_GT(zeros, 0u);
  EXPECT_LT(zeros, y.size() / 2);
  // Backward: the same mask and scale on dy.
  const Tensor dy = testing::random_tensor(x.shape(), rng);
  const std::vector<float> dx = values(backward(*b.layer, x, x, dy));
  for (size_t i = 0; i < dx.size(); ++i)
    EXPECT_EQ(dx[i], y[i] == 0.f ? 0.f : dy.data<float>()[i] * float(1 / 0.75)) << i;
  // Another step, stream or seed: another mask.
  b.layer->set_mode(training(42, 10, 4));
  EXPECT_NE(values(forward(*b.layer, x)), y);
  b.layer->set_mode(training(42, 9, 5));
  EXPECT_NE(values(forward(*b.layer, x)), y);
  b.layer->set_mode(training(43, 9, 4));
  EXPECT_NE(values(forward(*b.layer, x)), y);
  // Eval: the identity, both ways.
  b.layer->set_mode(LayerMode{});
  EXPECT_EQ(values(forward(*b.layer, x)), values(x));
  EXPECT_EQ(values(backward(*b.layer, x, x, dy)), values(dy));
}

TEST(AvgPool2dLayer, ForwardAndBackwardHandValues) {
  Bound b = bind(make_layer("avgpool2d", "{kernel: 2, stride: 1}", Impl::kCpu, Shape(1, 1, 3, 3)));
  const Tensor x = make_tensor(Shape(1, 1, 3, 3), {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor y = forward(*b.layer, x);
  EXPECT_EQ(values(y), (std::vector<float>{3, 4, 6, 7}));
  const Tensor dy = make_tensor(Shape(1, 1, 2, 2), {4, 4, 4, 4});
  EXPECT_EQ(values(backward(*b.layer, x, y, dy)),
            (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

TEST(UpSample2dLayer, BilinearForwardAndBackwardHandValues) {
  Bound b = bind(make_layer("upsample2d", "{mode: bilinear}", Impl::kCpu, Shape(1, 1, 1, 2)));
  const Tensor x = make_tensor(Shape(1, 1, 1, 2), {0, 4});
  const Tensor y = forward(*b.layer, x);
  EXPECT_EQ(values(y), (std::vector<float>{0, 1, 3, 4, 0, 1, 3, 4}));
  const Tensor dy = make_tensor(y.shape(), {0, 1, 0, 0, 0, 1, 0, 0});
  EXPECT_EQ(values(backward(*b.layer, x, y, dy)), (std::vector<float>{1.5f, 0.5f}));
}

// ---- models from YAML ---------------------------------------------------------------------------

// A small autoencoder with every new layer: batch norm after each conv,
// dropout in the encoder, average pooling down and bilinear upsampling up.
const char* kBnAe = R"(name: bn_ae
data: {format: mnist}
model:
  loss: mse
  features: pool2
  layers:
    - {name: conv1, type: conv2d, out_channels: 6, kernel: 3, padding: 1}
    - {name: bn1, type: batchnorm2d}
    - {name: relu1, type: relu}
    - {name: pool1, type: avgpool2d}
    - {name: drop1, type: dropout, p: 0.2}
    - {name: conv2, type: conv2d, out_channels: 4, kernel: 3, padding: 1}
    - {name: bn2, type: batchnorm2d, momentum: 0.2}
    - {name: relu2, type: relu}
    - {name: pool2, type: maxpool2d}
    - {name: up1, type: upsample2d, mode: bilinear}
    - {name: conv3, type: conv2d, out_channels: 6, kernel: 3, padding: 1}
    - {name: relu3, type: relu}
    - {name: up2, type: upsample2d, mode: bilinear}
    - {name: conv4, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
training: {epochs: 3, batch_size: 16, lr: 0.05, momentum: 0.9, seed: 5}
)";

struct ModelRun {
  Config cfg;
  std::unique_ptr<Model> model;
  std::unique_ptr<Trainer> trainer;  // after fit(): its optimizer goes into checkpoints
  std::vector<EpochResult> epochs;
};

ModelRun make_run(Impl impl, std::vector<Override> ov = {}) {
  ModelRun r;
  r.cfg = parse_config(kBnAe, "bn.yaml", ov);
  r.model = Model::build(r.cfg, impl, Shape(1, 1, 28, 28), 10);
  r.model->params().init(r.cfg.training.seed);
  return r;
}

void fit(ModelRun& r, const Dataset& tr, const Dataset& te) {
  r.trainer = std::make_unique<Trainer>(*r.model, r.cfg.training);
  r.trainer->set_progress(Trainer::Progress::kQuiet);
  std::ostringstream log;
  r.epochs = r.trainer->fit(tr, te, log);
}

std::vector<float> host_floats(const Tensor& t) { return values(t); }

TEST(BnDropoutModel, BuildsTrainsAndTheLossFalls) {
  ModelRun r = make_run(Impl::kCpu);
  std::ostringstream table;
  r.model->print_table(table);
  EXPECT_NE(table.str().find("batchnorm2d 6 ch eps 1e-05 momentum 0.1"), std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("dropout p 0.2"), std::string::npos);
  EXPECT_NE(table.str().find("bilinear x2"), std::string::npos);
  const Dataset tr = testing::synthetic_blobs(256, 3), te = testing::synthetic_blobs(64, 4);
  const EvalResult before = evaluate(*r.model, te, 32);
  fit(r, tr, te);
  ASSERT_EQ(r.epochs.size(), 3u);
  EXPECT_LT(r.epochs.back().train_loss, r.epochs.front().train_loss);
  EXPECT_LT(r.epochs.back().test.loss, 0.7 * before.loss) << "before " << before.loss;
  // Every training step counted a batch in both batch norms: 3 epochs of 16.
  int counted = 0;
  for (const ParamEntry& e : r.model->params().buffer_entries()) {
    if (e.name.find("num_batches_tracked") == std::string::npos) continue;
    EXPECT_EQ(host_floats(r.model->params().buffers())[e.offset], 48.f) << e.name;
    ++counted;
  }
  EXPECT_EQ(counted, 2);
}

TEST(BnDropoutModel, EvaluatesIdenticallyTwiceInEvalMode) {
  ModelRun r = make_run(Impl::kCpu);
  const Dataset tr = testing::synthetic_blobs(64, 5), te = testing::synthetic_blobs(40, 6);
  fit(r, tr, testing::synthetic_blobs(0, 1));  // running statistics away from 0 / 1
  const std::vector<float> buffers = host_floats(r.model->params().buffers());
  const EvalResult a = evaluate(*r.model, te, 16);
  const EvalResult b = evaluate(*r.model, te, 16);
  EXPECT_EQ(a.loss, b.loss);  // bit for bit: no batch statistics, no dropout
  // Evaluation touches no buffer (running statistics, batch counts).
  EXPECT_EQ(host_floats(r.model->params().buffers()), buffers);
  // In eval mode a sample's output does not depend on its batch: batch sizes
  // 16 and 40 give the same mean loss up to the order of the sum.
  const EvalResult c = evaluate(*r.model, te, 40);
  EXPECT_NEAR(c.loss, a.loss, 1e-6 * a.loss);
}

TEST(BnDropoutModel, SameSeedTrainsBitForBitAnotherSeedDiffers) {
  const Dataset tr = testing::synthetic_blobs(96, 7);
  ModelRun a = make_run(Impl::kCpu), b = make_run(Impl::kCpu);
  fit(a, tr, testing::synthetic_blobs(0, 1));
  fit(b, tr, testing::synthetic_blobs(0, 1));
  const size_t n = a.model->params().padded() * sizeof(float);
  EXPECT_EQ(std::memcmp(a.model->params().params().raw(), b.model->params().params().raw(), n), 0);
  EXPECT_EQ(host_floats(a.model->params().buffers()), host_floats(b.model->params().buffers()));
  // The same initial weights, another training seed: dropout (and the data
  // order) draw differently.
  ModelRun c = make_run(Impl::kCpu, {{"training.seed=6", ""}});
  c.model->params().init(5);  // a's initial weights
  fit(c, tr, testing::synthetic_blobs(0, 1));
  EXPECT_NE(std::memcmp(a.model->params().params().raw(), c.model->params().params().raw(), n), 0);
}

TEST(BnDropoutModel, DropoutMasksDependOnTheSeedNotOnlyOnTheDataOrder) {
  // Without shuffling, only dropout draws from the seed: two seeds must still
  // train differently, and the same seed identically.
  const Dataset tr = testing::synthetic_blobs(48, 8);
  ModelRun a = make_run(Impl::kCpu, {{"training.shuffle=false", ""}});
  ModelRun b = make_run(Impl::kCpu, {{"training.shuffle=false", ""}});
  ModelRun c = make_run(Impl::kCpu, {{"training.shuffle=false", ""}, {"training.seed=99", ""}});
  c.model->params().init(5);  // a's initial weights
  fit(a, tr, testing::synthetic_blobs(0, 1));
  fit(b, tr, testing::synthetic_blobs(0, 1));
  fit(c, tr, testing::synthetic_blobs(0, 1));
  const size_t n = a.model->params().padded() * sizeof(float);
  EXPECT_EQ(std::memcmp(a.model->params().params().raw(), b.model->params().params().raw(), n), 0);
  EXPECT_NE(std::memcmp(a.model->params().params().raw(), c.model->params().params().raw(), n), 0);
}

TEST(BnDropoutModel, CheckpointHoldsTheRunningStatisticsUnderPyTorchsNames) {
  ModelRun r = make_run(Impl::kCpu);
  fit(r, testing::synthetic_blobs(48, 9), testing::synthetic_blobs(0, 1));
  testing::TempDir t;
  const std::string path = t.file("bn.safetensors");
  TrainState st;
  st.epoch = r.cfg.training.epochs;  // the finished run
  st.global_step = r.trainer->optimizer().steps();
  save_checkpoint(path, *r.model, r.trainer->optimizer(), r.cfg, st, 48);
  const std::string bytes = testing::slurp(path);
  for (const char* name : {"\"bn1.weight\"", "\"bn1.bias\"", "\"bn1.running_mean\"",
                           "\"bn1.running_var\"", "\"bn1.num_batches_tracked\"",
                           "\"bn2.running_var\""})
    EXPECT_NE(bytes.find(name), std::string::npos) << name;
  // A fresh model loads them and evaluates exactly as the trained one.
  ModelRun fresh = make_run(Impl::kCpu);
  load_checkpoint(path, *fresh.model);
  EXPECT_EQ(host_floats(fresh.model->params().buffers()), host_floats(r.model->params().buffers()));
  const Dataset te = testing::synthetic_blobs(32, 10);
  EXPECT_EQ(evaluate(*fresh.model, te, 16).loss, evaluate(*r.model, te, 16).loss);
}

// Through the CLI: 2 epochs straight, and 1 epoch then --resume to 2, give
// the same checkpoint bytes (weights, momentum, running statistics) and the
// same metrics: dropout's masks and the batch statistics repeat exactly.
TEST(BnDropoutModel, ResumeIsExact) {
  testing::TempDir t;
  const std::string cfg = t.file("bn_ae.yaml");
  {
    std::ofstream f(cfg);
    f << kBnAe << "output: {checkpoint_every: 0}\n";
  }
  const std::string args = "run " + cfg + " --set data.synthetic=true --set data.train_limit=96 "
                           "--set data.test_limit=32 --batch 16 --progress quiet ";
  auto dirs = [&](const std::string& n) {
    return " --out " + t.file(n) + " --weights-dir " + t.file(n + "_w") + " ";
  };
  auto full = testing::run_hpmc(args + "--epochs 2" + dirs("full"));
  ASSERT_EQ(full.code, 0) << full.err;
  auto first = testing::run_hpmc(args + "--epochs 1" + dirs("cut"));
  ASSERT_EQ(first.code, 0) << first.err;
  auto rest = testing::run_hpmc(args + "--epochs 2 --resume" + dirs("cut"));
  ASSERT_EQ(rest.code, 0) << rest.err;
  EXPECT_NE(rest.out.find("resuming from"), std::string::npos) << rest.out;
  const std::string a = testing::slurp(t.file("full_w/bn_ae.safetensors"));
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == testing::slurp(t.file("cut_w/bn_ae.safetensors")))
      << "the resumed run's checkpoint differs from the straight run's";
}

// ---- GPU layers against the CPU layers -----------------------------------------------------------

// The CPU and the GPU layer of `type` on random x (and dy) in the given mode:
// forward, backward, parameter gradients and buffers. `exact`: bit for bit;
// otherwise |gpu − cpu| ≤ 1e-6·max(|cpu|, 1) (batch norm's training sums run
// in another order on the GPU; test_gpu_bn_pool.cpp has the reasoning).
void compare_gpu(const std::string& type, const std::string& keys, const Shape& in,
                 const LayerMode& mode, bool exact) {
  const std::string what = type + " " + keys + " on " + in.str() + (mode.training ? " train" : " eval");
  Bound c = bind(make_layer(type, keys, Impl::kCpu, in.with_batch(1)));
  Bound g = bind(make_layer(type, keys, Impl::kIm2col, in.with_batch(1)));
  ASSERT_EQ(g.layer->device(), Device::kGPU);
  Rng rng(uint64_t(in.count()) + (mode.training ? 1 : 0));
  // Non-trivial parameters and running statistics, the same on both.
  for (size_t i = 0; i < c.params.size(); ++i) {
    testing::fill_uniform(c.params[i], rng, 0.5f, 1.5f);
    g.params[i].copy_from(c.params[i]);
  }
  for (size_t i = 0; i + 1 < c.buffers.size(); ++i) {  // not num_batches_tracked
    testing::fill_uniform(c.buffers[i], rng, 0.2f, 1.2f);
    g.buffers[i].copy_from(c.buffers[i]);
  }
  c.layer->set_mode(mode);
  g.layer->set_mode(mode);
  const Tensor x = testing::random_tensor(in, rng, -2.f, 3.f);
  const Tensor dy = testing::random_tensor(c.layer->output_shape(in), rng);
  const Tensor xg = testing::to_gpu(x), dyg = testing::to_gpu(dy);
  const Tensor yc = forward(*c.layer, x), yg = forward(*g.layer, xg);
  const Tensor dxc = backward(*c.layer, x, yc, dy), dxg = backward(*g.layer, xg, yg, dyg);
  auto check = [&](const std::vector<float>& gv, const std::vector<float>& cv, const char* name) {
    ASSERT_EQ(gv.size(), cv.size()) << what << " " << name;
    for (size_t i = 0; i < gv.size(); ++i) {
      if (exact) {
        ASSERT_EQ(std::memcmp(&gv[i], &cv[i], 4), 0)
            << what << " " << name << "[" << i << "]: gpu " << gv[i] << " vs cpu " << cv[i];
      } else {
        ASSERT_LE(std::fabs(double(gv[i]) - cv[i]), 1e-6 * std::max(1.0, std::fabs(double(cv[i]))))
            << what << " " << name << "[" << i << "]: gpu " << gv[i] << " vs cpu " << cv[i];
      }
    }
  };
  check(values(yg), values(yc), "y");
  check(values(dxg), values(dxc), "dx");
  for (size_t i = 0; i < c.grads.size(); ++i) check(g.host(g.grads[i]), c.host(c.grads[i]), "grad");
  for (size_t i = 0; i < c.buffers.size(); ++i)
    check(g.host(g.buffers[i]), c.host(c.buffers[i]), "buffer");
}

const Shape kOddShapes[] = {Shape(1, 1, 1, 5), Shape(1, 3, 7, 5), Shape(2, 5, 9, 11),
                            Shape(3, 3, 1, 1), Shape(5, 1, 13, 3)};

TEST(GpuBnDropoutLayers, BatchNormMatchesTheCpuLayer) {
  HPMC_REQUIRE_GPU();
  for (const Shape& s : kOddShapes) {
    for (const char* keys : {"{}", "{affine: false, momentum: 0.3}"}) {
      compare_gpu("batchnorm2d", keys, s, training(), false);
      compare_gpu("batchnorm2d", keys, s, LayerMode{}, false);  // dγ, dβ: summed
    }
  }
}

TEST(GpuBnDropoutLayers, DropoutMatchesTheCpuLayerBitForBit) {
  HPMC_REQUIRE_GPU();
  for (const Shape& s : kOddShapes)
    for (const char* keys : {"{}", "{p: 0.1}", "{p: 1}"}) {
      compare_gpu("dropout", keys, s, training(7, 123, 3), true);
      compare_gpu("dropout", keys, s, LayerMode{}, true);
    }
}

TEST(GpuBnDropoutLayers, AvgPoolAndBilinearMatchTheCpuLayersBitForBit) {
  HPMC_REQUIRE_GPU();
  for (const Shape& s : {Shape(1, 3, 7, 5), Shape(2, 5, 9, 11), Shape(1, 1, 4, 4)}) {
    compare_gpu("avgpool2d", "{}", s, training(), true);
    compare_gpu("avgpool2d", "{kernel: 3, stride: 1}", s, training(), true);
    compare_gpu("upsample2d", "{mode: bilinear}", s, training(), true);
    compare_gpu("upsample2d", "{mode: bilinear, scale: 3}", s, training(), true);
  }
  compare_gpu("upsample2d", "{mode: bilinear}", Shape(3, 3, 1, 1), training(), true);
}

// The model trained on the GPU (each impl; dropout draws the CPU's masks)
// tracks the CPU run from the same weights and data order: fp32 rounding
// differs in the convolutions' and batch norm's sums, a drift far below 1%
// over 48 steps, while a wrong gradient or statistic changes the curve by far
// more. Its checkpoint, running statistics included, evaluates on the CPU as
// on the GPU.
TEST(GpuBnDropoutLayers, ModelTracksTheCpuAndItsCheckpointLoadsOnTheCpu) {
  HPMC_REQUIRE_GPU();
  const Dataset tr = testing::synthetic_blobs(256, 11), te = testing::synthetic_blobs(64, 12);
  ModelRun cpu = make_run(Impl::kCpu);
  fit(cpu, tr, te);
  for (Impl impl : {Impl::kNaive, Impl::kTiled, Impl::kIm2col}) {
    SCOPED_TRACE(impl_name(impl));
    ModelRun gpu = make_run(impl);
    fit(gpu, tr, te);
    ASSERT_EQ(gpu.epochs.size(), cpu.epochs.size());
    for (size_t e = 0; e < cpu.epochs.size(); ++e) {
      const double c = cpu.epochs[e].test.loss, g = gpu.epochs[e].test.loss;
      EXPECT_LE(std::fabs(g - c), 0.01 * c) << "epoch " << e + 1 << ": gpu " << g << " cpu " << c;
      const double ct = cpu.epochs[e].train_loss, gt = gpu.epochs[e].train_loss;
      EXPECT_LE(std::fabs(gt - ct), 0.01 * ct)
          << "epoch " << e + 1 << " train: gpu " << gt << " cpu " << ct;
    }
    testing::TempDir t;
    TrainState st;
    st.epoch = gpu.cfg.training.epochs;  // the finished run
    st.global_step = gpu.trainer->optimizer().steps();
    save_checkpoint(t.file("g.safetensors"), *gpu.model, gpu.trainer->optimizer(), gpu.cfg, st, 256);
    ModelRun on_cpu = make_run(Impl::kCpu);
    load_checkpoint(t.file("g.safetensors"), *on_cpu.model);
    const double lg = evaluate(*gpu.model, te, 32).loss, lc = evaluate(*on_cpu.model, te, 32).loss;
    EXPECT_LE(std::fabs(lg - lc), 1e-5 * lc) << "gpu " << lg << " cpu " << lc;
  }
}

}  // namespace
}  // namespace hpmc
