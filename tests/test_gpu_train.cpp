// GPU training end to end: the MLP and a small conv AE trained for a few
// hundred steps on the GPU (each of naive, tiled, im2col) track the CPU run
// from the same weights and data order; a GPU checkpoint loads on the CPU and
// gives the same test loss; a GPU run is deterministic. The GPU rewrite's
// fused layers (model/gpu_rewrite.h) train to the bits of the separate
// layers and never hide model.features; a model whose upsample is folded
// into the conv after it (GpuUpsampleFold) tracks the unfolded run and the
// CPU to rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "gpu_testing.h"
#include "layers/conv2d_spec.h"
#include "layers/fused_spec.h"
#include "layers/gpu/factory.h"
#include "model/registry.h"
#include "model/checkpoint.h"
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
training: {epochs: 2, batch_size: 64, lr: 0.03, momentum: 0.9, seed: 4}
)";

const char* kAe = R"(name: ae
data: {format: mnist}
model:
  loss: mse
  features: pool2
  layers:
    - {name: conv1, type: conv2d, out_channels: 8, kernel: 3, padding: 1}
    - {name: relu1, type: relu}
    - {name: pool1, type: maxpool2d}
    - {name: conv2, type: conv2d, out_channels: 4, kernel: 3, padding: 1}
    - {name: relu2, type: relu}
    - {name: pool2, type: maxpool2d}
    - {name: up1, type: upsample2d}
    - {name: conv3, type: conv2d, out_channels: 8, kernel: 3, padding: 1}
    - {name: relu3, type: relu}
    - {name: up2, type: upsample2d}
    - {name: conv4, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
training: {epochs: 2, batch_size: 32, lr: 0.05, momentum: 0.9, seed: 4}
)";

struct GpuRun {
  Config cfg;
  std::unique_ptr<Model> model;
  std::vector<EpochResult> epochs;
};

GpuRun train(const char* yaml, Impl impl, const Dataset& tr, const Dataset& te,
             bool fuse = true) {
  GpuRun r;
  r.cfg = parse_config(yaml, "t.yaml");
  r.model = Model::build(r.cfg, impl, Shape(1, 1, 28, 28), 10, fuse);
  r.model->params().init(r.cfg.training.seed);  // the same weights on every impl
  Trainer t(*r.model, r.cfg.training);
  t.set_progress(Trainer::Progress::kQuiet);
  std::ostringstream log;
  r.epochs = t.fit(tr, te, log);
  return r;
}

// Relative difference of two losses.
double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

void expect_tracks(const char* yaml, const Dataset& tr, const Dataset& te, double tol) {
  GpuRun cpu = train(yaml, Impl::kCpu, tr, te);
  for (Impl impl : {Impl::kNaive, Impl::kTiled, Impl::kIm2col}) {
    SCOPED_TRACE(impl_name(impl));
    GpuRun gpu = train(yaml, impl, tr, te);
    ASSERT_EQ(gpu.epochs.size(), cpu.epochs.size());
    for (size_t e = 0; e < cpu.epochs.size(); ++e) {
      EXPECT_LE(rel(gpu.epochs[e].train_loss, cpu.epochs[e].train_loss), tol)
          << "epoch " << e + 1 << " train loss " << gpu.epochs[e].train_loss << " vs cpu "
          << cpu.epochs[e].train_loss;
      EXPECT_LE(rel(gpu.epochs[e].test.loss, cpu.epochs[e].test.loss), tol)
          << "epoch " << e + 1 << " test loss " << gpu.epochs[e].test.loss << " vs cpu "
          << cpu.epochs[e].test.loss;
    }
  }
}

// fp32 rounding differs between the CPU (OpenBLAS) and GPU summation orders
// by ~1e-7 relative per operation; over a few hundred SGD steps on a smooth
// problem that drift stays far below 1%, while a wrong gradient anywhere
// changes the loss curve by far more.
TEST(GpuTrain, MlpTracksTheCpu) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_classes(6400, 1), te = testing::synthetic_classes(640, 2);
  expect_tracks(kMlp, tr, te, 5e-3);  // 200 steps
}

TEST(GpuTrain, ConvAutoencoderTracksTheCpu) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(3200, 3), te = testing::synthetic_blobs(320, 4);
  expect_tracks(kAe, tr, te, 5e-3);  // 200 steps
}

TEST(GpuTrain, GpuCheckpointGivesTheSameTestLossOnTheCpu) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(640, 5), te = testing::synthetic_blobs(320, 6);
  GpuRun gpu = train(kAe, Impl::kIm2col, tr, te);
  testing::TempDir t;
  TrainState st;
  st.epoch = 2;
  Trainer fresh(*gpu.model, gpu.cfg.training);  // the weights are what this test reads
  save_checkpoint(t.file("ae.safetensors"), *gpu.model, fresh.optimizer(), gpu.cfg, st, tr.size());
  Config cfg = parse_config(kAe, "t.yaml");
  auto cpu = Model::build(cfg, Impl::kCpu, Shape(1, 1, 28, 28), 10);
  load_checkpoint(t.file("ae.safetensors"), *cpu);
  double gpu_loss = evaluate(*gpu.model, te, 32).loss;
  double cpu_loss = evaluate(*cpu, te, 32).loss;
  EXPECT_LE(rel(cpu_loss, gpu_loss), 1e-5) << cpu_loss << " vs " << gpu_loss;
}

TEST(GpuTrain, SameSeedSameWeightsBitForBit) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(640, 7), te = testing::synthetic_blobs(64, 8);
  for (Impl impl : {Impl::kNaive, Impl::kTiled, Impl::kIm2col}) {
    SCOPED_TRACE(impl_name(impl));
    GpuRun a = train(kAe, impl, tr, te), b = train(kAe, impl, tr, te);
    Tensor pa = a.model->params().params().to_device(Device::kCPU);
    Tensor pb = b.model->params().params().to_device(Device::kCPU);
    EXPECT_EQ(std::memcmp(pa.raw(), pb.raw(), pa.bytes()), 0);
    EXPECT_EQ(a.epochs.back().train_loss, b.epochs.back().train_loss);
  }
}

// The config layers each layer of the model runs ("conv1+relu1+pool1" for a
// fused one), space separated.
std::string run_list(const Model& m) {
  std::string s;
  for (const LayerPtr& l : m.layers()) s += (s.empty() ? "" : " ") + l->name();
  return s;
}

// The GPU rewrite (model/gpu_rewrite.h) with the fold off: on im2col each
// ReLU's forward runs in the epilogue of the conv before it and its backward
// in the pool / upsample after it (fused layers); on tiled only the backward
// (a fused [relu, pool]). Either way training gives the bits of the plain
// layers (fuse = false). The fold, which changes bits by rounding, is off here
// (training.fold_upsample: false; GpuUpsampleFold tests it).
TEST(GpuTrain, FusedLayersGiveTheSameBits) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(640, 9), te = testing::synthetic_blobs(64, 10);
  std::string no_fold = kAe;
  no_fold.replace(no_fold.find("seed: 4}"), 8, "seed: 4, fold_upsample: false}");
  for (Impl impl : {Impl::kIm2col, Impl::kTiled}) {
    SCOPED_TRACE(impl_name(impl));
    GpuRun fused = train(no_fold.c_str(), impl, tr, te),
           plain = train(no_fold.c_str(), impl, tr, te, /*fuse=*/false);
    EXPECT_EQ(run_list(*fused.model),
              impl == Impl::kIm2col
                  ? "conv1+relu1+pool1 conv2+relu2+pool2 up1 conv3+relu3+up2 conv4"
                  : "conv1 relu1+pool1 conv2 relu2+pool2 up1 conv3 relu3+up2 conv4");
    EXPECT_EQ(run_list(*plain.model),
              "conv1 relu1 pool1 conv2 relu2 pool2 up1 conv3 relu3 up2 conv4");
    Tensor pa = fused.model->params().params().to_device(Device::kCPU);
    Tensor pb = plain.model->params().params().to_device(Device::kCPU);
    EXPECT_EQ(std::memcmp(pa.raw(), pb.raw(), pa.bytes()), 0) << "weights differ";
    ASSERT_EQ(fused.epochs.size(), plain.epochs.size());
    for (size_t e = 0; e < fused.epochs.size(); ++e) {
      EXPECT_EQ(fused.epochs[e].train_loss, plain.epochs[e].train_loss) << e;
      EXPECT_EQ(fused.epochs[e].test.loss, plain.epochs[e].test.loss) << e;
    }
  }
}

// The features layer keeps its own output: with features: conv1 the ReLU after
// it is not in its epilogue (its backward still runs in pool1: a fused [relu1,
// pool1]), and the features forward gives conv1's output, negatives included.
// training.fuse: false fuses nothing.
TEST(GpuTrain, NoFusedLayerHidesTheFeaturesLayer) {
  HPMC_REQUIRE_GPU();
  std::string yaml = kAe;
  yaml.replace(yaml.find("features: pool2"), 15, "features: conv1");
  const Config cfg = parse_config(yaml, "t.yaml");
  auto m = Model::build(cfg, Impl::kIm2col, Shape(1, 1, 28, 28), 10);
  EXPECT_EQ(run_list(*m), "conv1 relu1+pool1 conv2+relu2+pool2 up1 conv3+relu3+up2+conv4");
  EXPECT_EQ(m->features_layer(), 0);
  EXPECT_EQ(m->features_name(), "conv1");
  m->params().init(1);
  m->allocate(4);
  Rng rng(11);
  const Tensor x = testing::random_tensor(Shape(4, 1, 28, 28), rng).to_device(Device::kGPU);
  Tensor f = m->forward(x, m->features_layer()).to_device(Device::kCPU);
  EXPECT_EQ(f.shape(), Shape(4, 8, 28, 28));
  size_t negative = 0;
  for (size_t i = 0; i < f.numel(); ++i) negative += f.data<float>()[i] < 0 ? 1 : 0;
  EXPECT_GT(negative, 0u) << "conv1's features lost their negative values to the ReLU";

  // training.fuse: false switches the rewrite off.
  std::string off = kAe;
  off.replace(off.find("seed: 4}"), 8, "seed: 4, fuse: false}");
  auto plain = Model::build(parse_config(off, "t.yaml"), Impl::kIm2col, Shape(1, 1, 28, 28), 10);
  EXPECT_EQ(run_list(*plain), "conv1 relu1 pool1 conv2 relu2 pool2 up1 conv3 relu3 up2 conv4");
  EXPECT_TRUE(plain->rewrite().groups.empty());
}

// ---- the upsample fold (model.h, training.fold_upsample) ----

// up1 → conv4 folds on im2col (3×3 pad 1, 8 → 8 channels at 14×14: the GEMM
// fold, see implicit::upconv_applies); up2 → conv5 too (conv5 has one output
// channel: the thin fold).
const char* kFoldAe = R"(name: fold
data: {format: mnist}
model:
  loss: mse
  features: pool2
  layers:
    - {name: conv1, type: conv2d, out_channels: 8, kernel: 3, padding: 1}
    - {name: relu1, type: relu}
    - {name: pool1, type: maxpool2d}
    - {name: conv2, type: conv2d, out_channels: 16, kernel: 3, padding: 1}
    - {name: relu2, type: relu}
    - {name: pool2, type: maxpool2d}
    - {name: conv3, type: conv2d, out_channels: 8, kernel: 3, padding: 1}
    - {name: relu3, type: relu}
    - {name: up1, type: upsample2d}
    - {name: conv4, type: conv2d, out_channels: 8, kernel: 3, padding: 1}
    - {name: relu4, type: relu}
    - {name: up2, type: upsample2d}
    - {name: conv5, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
training: {epochs: 2, batch_size: 32, lr: 0.05, momentum: 0.9, seed: 4}
)";

std::string with(std::string yaml, const std::string& from, const std::string& to) {
  const size_t p = yaml.find(from);
  EXPECT_NE(p, std::string::npos) << "test bug: no '" << from << "'";
  return p == std::string::npos ? yaml : yaml.replace(p, from.size(), to);
}

std::string fold_off(const char* yaml) { return with(yaml, "seed: 4}", "seed: 4, fold_upsample: false}"); }

// kFoldAe with a 5×5 pad-2 conv5: the thin fold of a 5×5 filter.
std::string fold_ae_k5() {
  return with(kFoldAe, "out_channels: 1, kernel: 3, padding: 1}",
              "out_channels: 1, kernel: 5, padding: 2}");
}

std::unique_ptr<Model> build_fold(const std::string& yaml, Impl impl = Impl::kIm2col) {
  return Model::build(parse_config(yaml, "t.yaml"), impl, Shape(1, 1, 28, 28), 10);
}

// ||a − b|| / ||b|| over n floats.
double rel_norm(const float* a, const float* b, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    r += double(b[i]) * b[i];
  }
  return std::sqrt(d) / std::max(std::sqrt(r), 1e-30);
}

// Whether some fused layer of the model folds an upsample.
bool folds(const Model& m) {
  for (const LayerPtr& l : m.layers())
    if (const auto* f = dynamic_cast<const FusedChainSpec*>(l.get()))
      for (const ChainStep& s : f->steps())
        if (s.fold > 1) return true;
  return false;
}

// Which layers fuse: up1 is folded into conv4 and up2 into conv5; relu3's
// forward runs in conv3's epilogue and its backward in conv4's (the layer
// after the folded upsample); relu4 in conv4 (forward) and conv5 (backward):
// the decoder is one fused layer. It counts 4/9 of the folded convs'
// unfolded multiply-adds; the table says what it runs. naive and tiled fold
// nothing, nor does im2col with training.fold_upsample: false or
// training.fuse: false.
TEST(GpuUpsampleFold, FoldsTheUpsampleBeforeAWideConv) {
  HPMC_REQUIRE_GPU();
  auto m = build_fold(kFoldAe);
  EXPECT_EQ(run_list(*m),
            "conv1+relu1+pool1 conv2+relu2+pool2 conv3+relu3+up1+conv4+relu4+up2+conv5");
  EXPECT_TRUE(folds(*m));
  std::ostringstream table;
  m->print_table(table);
  EXPECT_NE(table.str().find("fused conv2d 3x3 s1 p1 + relu > upsample2d x2 + conv2d 3x3 s1 p1 "
                             "+ relu > upsample2d x2 + conv2d 3x3 s1 p1"),
            std::string::npos)
      << table.str();
  EXPECT_EQ(table.str().find("not fused"), std::string::npos) << table.str();

  auto plain = build_fold(fold_off(kFoldAe));
  EXPECT_EQ(run_list(*plain), "conv1+relu1+pool1 conv2+relu2+pool2 conv3+relu3+up1 "
                              "conv4+relu4+up2 conv5");
  EXPECT_FALSE(folds(*plain));
  std::ostringstream plain_table;
  plain->print_table(plain_table);
  EXPECT_NE(plain_table.str().find("not fused: up1 not folded into conv4: "
                                   "training.fold_upsample is false"),
            std::string::npos)
      << plain_table.str();

  // FLOPs: the decoder's are conv3's plus 4/9 of conv4's and conv5's.
  const auto lf = m->layer_flops(32), plf = plain->layer_flops(32);
  ASSERT_EQ(lf.size(), 3u);
  ASSERT_EQ(plf.size(), 5u);
  const double conv3 = plf[2].forward;  // conv3+relu3+up1: conv3's only
  auto unfused = Model::build(parse_config(kFoldAe, "t.yaml"), Impl::kIm2col, Shape(1, 1, 28, 28),
                              10, /*fuse=*/false);
  const auto uf = unfused->layer_flops(32);
  ASSERT_EQ(uf.size(), 13u);
  EXPECT_DOUBLE_EQ(conv3, uf[6].forward);
  EXPECT_DOUBLE_EQ(lf[2].forward, uf[6].forward + uf[9].forward * (4.0 / 9.0) +
                                      uf[12].forward * (4.0 / 9.0));
  EXPECT_DOUBLE_EQ(lf[2].backward, uf[6].backward + uf[9].backward * (4.0 / 9.0) +
                                       uf[12].backward * (4.0 / 9.0));

  m->params().init(1);
  m->allocate(4);
  Rng rng(13);
  const Tensor x = testing::random_tensor(Shape(4, 1, 28, 28), rng, 0, 1).to_device(Device::kGPU);
  EXPECT_EQ(m->forward(x).shape(), Shape(4, 1, 28, 28));
  EXPECT_EQ(m->forward(x, m->features_layer()).shape(), Shape(4, 16, 7, 7));  // pool2

  for (Impl impl : {Impl::kNaive, Impl::kTiled}) {
    auto other = build_fold(kFoldAe, impl);
    EXPECT_FALSE(folds(*other)) << impl_name(impl);
  }
  EXPECT_EQ(run_list(*unfused), "conv1 relu1 pool1 conv2 relu2 pool2 conv3 relu3 up1 conv4 relu4 "
                                "up2 conv5");
}

// One forward and backward from the same weights and data: the folded model's
// output and its parameter gradients (every layer's: relu3's mask applied by
// conv4 reaches conv1..conv3) agree with the separate layers' to rounding
// (1e-3 for the gradients leaves room for a relu4 mask bit that flips where
// conv4's output rounds across 0; a wrong fold or mask is off by order 1).
// With a 3×3 conv5 and with a 5×5 one (the thin fold of a 5×5 filter).
TEST(GpuUpsampleFold, OneStepMatchesTheSeparateLayers) {
  HPMC_REQUIRE_GPU();
  for (const std::string& yaml : {std::string(kFoldAe), fold_ae_k5()}) {
    SCOPED_TRACE(yaml.find("kernel: 5") == std::string::npos ? "3x3 conv5" : "5x5 conv5");
    auto folded = build_fold(yaml), plain = build_fold(fold_off(yaml.c_str()));
    ASSERT_TRUE(folds(*folded));
    ASSERT_FALSE(folds(*plain));
    Rng rng(14);
    const Tensor x = testing::random_tensor(Shape(8, 1, 28, 28), rng, 0, 1).to_device(Device::kGPU);
    const Tensor dy = testing::random_tensor(Shape(8, 1, 28, 28), rng).to_device(Device::kGPU);
    Tensor out[2], grads[2];
    Model* models[2] = {folded.get(), plain.get()};
    for (int k = 0; k < 2; ++k) {
      Model& m = *models[k];
      m.params().init(5);
      m.allocate(8);
      m.params().zero_grads();
      out[k] = m.forward(x).to_device(Device::kCPU);
      m.backward(x, dy);
      grads[k] = m.params().grads().to_device(Device::kCPU);
    }
    EXPECT_LE(rel_norm(out[0].data<float>(), out[1].data<float>(), out[0].numel()), 1e-5);
    for (const ParamEntry& e : folded->params().entries()) {
      const float* a = grads[0].data<float>() + e.offset;
      const float* b = grads[1].data<float>() + e.offset;
      EXPECT_LE(rel_norm(a, b, e.count), 1e-3) << e.name;
    }
  }
}

// Training: the folded model tracks the CPU like any GPU run (every impl; only
// im2col folds), and agrees with its own unfolded run to 1e-3 relative (not
// bit for bit: the fold rounds differently, which also shows it ran). With a
// 3×3 conv5 and with a 5×5 one (the thin fold of a 5×5 filter).
TEST(GpuUpsampleFold, TrainingTracksTheCpuAndTheUnfoldedRun) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(3200, 15), te = testing::synthetic_blobs(320, 16);
  for (const std::string& yaml : {std::string(kFoldAe), fold_ae_k5()}) {
    SCOPED_TRACE(yaml.find("kernel: 5") == std::string::npos ? "3x3 conv5" : "5x5 conv5");
    expect_tracks(yaml.c_str(), tr, te, 5e-3);  // 200 steps

    GpuRun folded = train(yaml.c_str(), Impl::kIm2col, tr, te);
    const std::string off = fold_off(yaml.c_str());
    GpuRun plain = train(off.c_str(), Impl::kIm2col, tr, te);
    ASSERT_TRUE(folds(*folded.model));
    ASSERT_FALSE(folds(*plain.model));
    ASSERT_EQ(folded.epochs.size(), plain.epochs.size());
    for (size_t e = 0; e < folded.epochs.size(); ++e) {
      EXPECT_LE(rel(folded.epochs[e].train_loss, plain.epochs[e].train_loss), 1e-3)
          << "epoch " << e + 1 << ": " << folded.epochs[e].train_loss << " vs "
          << plain.epochs[e].train_loss;
      EXPECT_LE(rel(folded.epochs[e].test.loss, plain.epochs[e].test.loss), 1e-3)
          << "epoch " << e + 1 << ": " << folded.epochs[e].test.loss << " vs "
          << plain.epochs[e].test.loss;
    }
    Tensor pa = folded.model->params().params().to_device(Device::kCPU);
    Tensor pb = plain.model->params().params().to_device(Device::kCPU);
    EXPECT_NE(std::memcmp(pa.raw(), pb.raw(), pa.bytes()), 0)
        << "the folded run gave the unfolded bits: did the fold run?";
  }
}

TEST(GpuUpsampleFold, SameSeedSameWeightsBitForBit) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(640, 17), te = testing::synthetic_blobs(64, 18);
  GpuRun a = train(kFoldAe, Impl::kIm2col, tr, te), b = train(kFoldAe, Impl::kIm2col, tr, te);
  ASSERT_TRUE(folds(*a.model));
  Tensor pa = a.model->params().params().to_device(Device::kCPU);
  Tensor pb = b.model->params().params().to_device(Device::kCPU);
  EXPECT_EQ(std::memcmp(pa.raw(), pb.raw(), pa.bytes()), 0);
  EXPECT_EQ(a.epochs.back().train_loss, b.epochs.back().train_loss);
}

// model.features keeps its output: naming up1 stops its fold (relu3's
// backward then runs in up1: a fused [conv3, relu3, up1]), and the features
// forward gives the upsampled tensor.
TEST(GpuUpsampleFold, NoFoldOfTheFeaturesLayer) {
  HPMC_REQUIRE_GPU();
  auto m = build_fold(with(kFoldAe, "features: pool2", "features: up1"));
  EXPECT_EQ(run_list(*m),
            "conv1+relu1+pool1 conv2+relu2+pool2 conv3+relu3+up1 conv4+relu4+up2+conv5");
  EXPECT_EQ(m->features_layer(), 2);
  m->params().init(1);
  m->allocate(4);
  Rng rng(19);
  const Tensor x = testing::random_tensor(Shape(4, 1, 28, 28), rng, 0, 1).to_device(Device::kGPU);
  EXPECT_EQ(m->forward(x, m->features_layer()).shape(), Shape(4, 8, 14, 14));
}

// A folded GPU model's checkpoint is an ordinary one: the CPU (no fold) gives
// the same test loss from it.
TEST(GpuUpsampleFold, CheckpointGivesTheSameTestLossOnTheCpu) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(640, 20), te = testing::synthetic_blobs(320, 21);
  GpuRun gpu = train(kFoldAe, Impl::kIm2col, tr, te);
  ASSERT_TRUE(folds(*gpu.model));
  testing::TempDir t;
  TrainState st;
  st.epoch = 2;
  Trainer fresh(*gpu.model, gpu.cfg.training);  // the weights are what this test reads
  save_checkpoint(t.file("fold.safetensors"), *gpu.model, fresh.optimizer(), gpu.cfg, st,
                  tr.size());
  auto cpu = Model::build(parse_config(kFoldAe, "t.yaml"), Impl::kCpu, Shape(1, 1, 28, 28), 10);
  load_checkpoint(t.file("fold.safetensors"), *cpu);
  double gpu_loss = evaluate(*gpu.model, te, 32).loss;
  double cpu_loss = evaluate(*cpu, te, 32).loss;
  EXPECT_LE(rel(cpu_loss, gpu_loss), 1e-5) << cpu_loss << " vs " << gpu_loss;
}

}  // namespace
}  // namespace hpmc
