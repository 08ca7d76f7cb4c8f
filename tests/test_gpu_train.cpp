// GPU training end to end: the MLP and a small conv AE trained for a few
// hundred steps on the GPU (each of naive, tiled, im2col) track the CPU run
// from the same weights and data order; a GPU checkpoint loads on the CPU and
// gives the same test loss; a GPU run is deterministic. The same for a model
// whose upsample is folded into the conv after it (GpuUpsampleFold).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "gpu_testing.h"
#include "layers/conv2d_spec.h"
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

// ReLU fusion (model.h) on im2col: relu1, relu2, relu3 run inside the convs
// before them in forward, inside the pools / the upsample after them in
// backward, and training gives the same bits as with every ReLU on its own.
// naive and tiled convs decline the forward fusion; the backward still fuses.
// The upsample fold, which changes bits by rounding, is off here
// (training.fold_upsample: false; GpuUpsampleFold tests it).
TEST(GpuTrain, FusedReLUsGiveTheSameBits) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(640, 9), te = testing::synthetic_blobs(64, 10);
  std::string no_fold = kAe;
  no_fold.replace(no_fold.find("seed: 4}"), 8, "seed: 4, fold_upsample: false}");
  for (Impl impl : {Impl::kIm2col, Impl::kTiled}) {
    SCOPED_TRACE(impl_name(impl));
    GpuRun fused = train(no_fold.c_str(), impl, tr, te),
           plain = train(no_fold.c_str(), impl, tr, te, /*fuse=*/false);
    const Model& m = *fused.model;
    // conv1 relu1 pool1 conv2 relu2 pool2 up1 conv3 relu3 up2 conv4
    ASSERT_EQ(m.layers().size(), 11u);
    for (int i : {1, 4, 8}) EXPECT_EQ(m.forward_fused(i), impl == Impl::kIm2col) << i;
    for (int i : {1, 4, 8}) EXPECT_TRUE(m.backward_fused(i)) << i;
    // Neither upsample folds, so every result keeps its bits.
    for (int i = 0; i < 11; ++i) EXPECT_FALSE(m.upsample_folded(i)) << i;
    for (int i : {0, 2, 3, 5, 6, 7, 9, 10}) {
      EXPECT_FALSE(m.forward_fused(i)) << i;
      EXPECT_FALSE(m.backward_fused(i)) << i;
    }
    for (size_t i = 0; i < plain.model->layers().size(); ++i) {
      EXPECT_FALSE(plain.model->forward_fused(int(i)));
      EXPECT_FALSE(plain.model->backward_fused(int(i)));
    }
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
// it is not fused into its forward (its backward still is, into pool1), and
// the features forward runs. training.fuse: false fuses nothing.
TEST(GpuTrain, NoForwardFusionIntoTheFeaturesLayer) {
  HPMC_REQUIRE_GPU();
  std::string yaml = kAe;
  yaml.replace(yaml.find("features: pool2"), 15, "features: conv1");
  const Config cfg = parse_config(yaml, "t.yaml");
  auto m = Model::build(cfg, Impl::kIm2col, Shape(1, 1, 28, 28), 10);
  EXPECT_FALSE(m->forward_fused(1));
  EXPECT_TRUE(m->backward_fused(1));
  EXPECT_TRUE(m->forward_fused(4));
  m->params().init(1);
  m->allocate(4);
  Rng rng(11);
  const Tensor x = testing::random_tensor(Shape(4, 1, 28, 28), rng).to_device(Device::kGPU);
  Tensor f = m->forward(x, 0).to_device(Device::kCPU);
  size_t negative = 0;
  for (size_t i = 0; i < f.numel(); ++i) negative += f.data<float>()[i] < 0 ? 1 : 0;
  EXPECT_GT(negative, 0u) << "conv1's features lost their negative values to the ReLU";

  // training.fuse: false switches the fusion off.
  std::string off = kAe;
  off.replace(off.find("seed: 4}"), 8, "seed: 4, fuse: false}");
  auto plain = Model::build(parse_config(off, "t.yaml"), Impl::kIm2col, Shape(1, 1, 28, 28), 10);
  for (size_t i = 0; i < plain->layers().size(); ++i) {
    EXPECT_FALSE(plain->forward_fused(int(i))) << i;
    EXPECT_FALSE(plain->backward_fused(int(i))) << i;
  }
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
// Layer indices in kFoldAe.
constexpr int kRelu3 = 7, kUp1 = 8, kConv4 = 9, kRelu4 = 10, kUp2 = 11;

std::string with(std::string yaml, const std::string& from, const std::string& to) {
  const size_t p = yaml.find(from);
  EXPECT_NE(p, std::string::npos) << "test bug: no '" << from << "'";
  return p == std::string::npos ? yaml : yaml.replace(p, from.size(), to);
}

std::string fold_off(const char* yaml) { return with(yaml, "seed: 4}", "seed: 4, fold_upsample: false}"); }

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

// The GPU conv2d takes a ×2 fold only on im2col and where
// implicit::upconv_applies (3×3, stride 1, pad 1, channels multiples of 8);
// only then does it take the backward of the ReLU before the upsample, and
// count 4/9 of its multiply-adds.
TEST(GpuUpsampleFold, ConvAcceptsOnlyWhatTheKernelsTake) {
  HPMC_REQUIRE_GPU();
  struct Case {
    Impl impl;
    int c, k, kernel, pad, scale;
    bool folds;
  };
  const Case cases[] = {
      {Impl::kIm2col, 8, 8, 3, 1, 2, true},    {Impl::kIm2col, 16, 32, 3, 1, 2, true},
      {Impl::kNaive, 8, 8, 3, 1, 2, false},    {Impl::kTiled, 8, 8, 3, 1, 2, false},
      {Impl::kIm2col, 4, 8, 3, 1, 2, false},   // C % 8
      {Impl::kIm2col, 8, 1, 3, 1, 2, true},    // thin (K ≤ 4): the thin fold
      {Impl::kIm2col, 5, 3, 3, 1, 2, true},    // thin: any C
      {Impl::kIm2col, 8, 8, 3, 0, 2, false},   // pad 0
      {Impl::kIm2col, 8, 8, 1, 0, 2, false},   // 1×1
      {Impl::kIm2col, 8, 8, 3, 1, 3, false},   // ×3
  };
  for (const Case& t : cases) {
    SCOPED_TRACE(str(impl_name(t.impl), " ", t.c, "->", t.k, " ", t.kernel, "x", t.kernel, " p",
                     t.pad, " x", t.scale));
    const Conv2dConfig cfg{t.c, t.k, t.kernel, 1, t.pad, true};
    const Shape in(32, t.c, 12, 12);
    LayerPtr conv = make_layer("conv2d",
                               str("{out_channels: ", t.k, ", kernel: ", t.kernel,
                                   ", padding: ", t.pad, "}"),
                               t.impl, in, "conv");
    conv->set_input_shape(in.with_batch(1));
    EXPECT_FALSE(conv->fuse_relu_backward());  // nothing folded yet
    EXPECT_EQ(conv->fold_upsample(t.scale), t.folds);
    EXPECT_EQ(conv->folded_upsample(), t.folds ? t.scale : 1);
    EXPECT_EQ(conv->fuse_relu_backward(), t.folds);
    const double share = t.folds ? 4.0 / 9.0 : 1.0;
    EXPECT_DOUBLE_EQ(conv->forward_flops(in), conv2d_forward_flops(cfg, in) * share);
    EXPECT_DOUBLE_EQ(conv->backward_flops(in, true), conv2d_backward_flops(cfg, in, true) * share);
    EXPECT_EQ(conv->describe().find("folded") != std::string::npos, t.folds) << conv->describe();
  }
}

// Which layers fold and fuse: up1 is folded into conv4 and up2 into conv5;
// relu3's backward runs in conv4 (the layer after the folded upsample) and its
// forward in conv3; relu4 runs in conv4 (forward) and conv5 (backward). conv4
// and conv5 count 4/9 of their unfolded multiply-adds; the table says what is folded where; the folded
// upsample has no output to stop at. naive and tiled fold nothing, nor does
// im2col with training.fold_upsample: false or training.fuse: false.
TEST(GpuUpsampleFold, FoldsTheUpsampleBeforeAWideConv) {
  HPMC_REQUIRE_GPU();
  auto m = build_fold(kFoldAe);
  ASSERT_EQ(m->layers().size(), 13u);
  for (int i = 0; i < 13; ++i) {
    EXPECT_EQ(m->upsample_folded(i), i == kUp1 || i == kUp2) << i;
    EXPECT_EQ(m->layers()[size_t(i)]->folded_upsample(), i == kConv4 || i == 12 ? 2 : 1) << i;
  }
  for (int i : {1, 4, kRelu3, kRelu4}) {
    EXPECT_TRUE(m->forward_fused(i)) << i;
    EXPECT_TRUE(m->backward_fused(i)) << i;
  }
  std::ostringstream table;
  m->print_table(table);
  EXPECT_NE(table.str().find("(folded into conv4)"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("fwd in conv3, bwd in conv4)"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("fwd in conv4, bwd in conv5)"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("(folded into conv5)"), std::string::npos) << table.str();

  auto plain = build_fold(fold_off(kFoldAe));
  for (int i = 0; i < 13; ++i) {
    EXPECT_FALSE(plain->upsample_folded(i)) << i;
    EXPECT_EQ(plain->layers()[size_t(i)]->folded_upsample(), 1) << i;
  }
  EXPECT_TRUE(plain->backward_fused(kRelu3));  // into up1, as without the fold
  std::ostringstream plain_table;
  plain->print_table(plain_table);
  EXPECT_EQ(plain_table.str().find("folded"), std::string::npos) << plain_table.str();

  const auto lf = m->layer_flops(32), plf = plain->layer_flops(32);
  EXPECT_GT(plf[kConv4].forward, 0);
  EXPECT_DOUBLE_EQ(lf[kConv4].forward, plf[kConv4].forward * 4 / 9);
  EXPECT_DOUBLE_EQ(lf[kConv4].backward, plf[kConv4].backward * 4 / 9);
  EXPECT_EQ(lf[kUp1].forward + lf[kUp1].backward, 0);
  EXPECT_DOUBLE_EQ(lf[12].forward, plf[12].forward * 4 / 9);  // conv5: the thin fold

  m->params().init(1);
  m->allocate(4);
  Rng rng(13);
  const Tensor x = testing::random_tensor(Shape(4, 1, 28, 28), rng, 0, 1).to_device(Device::kGPU);
  try {
    m->forward(x, kUp1);
    ADD_FAILURE() << "forward stopped at the folded upsample";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'up1' is an upsample folded into 'conv4'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(m->forward(x, kRelu4).shape(), Shape(4, 8, 14, 14));  // through the fold

  for (Impl impl : {Impl::kNaive, Impl::kTiled}) {
    auto other = build_fold(kFoldAe, impl);
    for (int i = 0; i < 13; ++i) EXPECT_FALSE(other->upsample_folded(i)) << impl_name(impl) << i;
  }
  auto unfused = Model::build(parse_config(kFoldAe, "t.yaml"), Impl::kIm2col, Shape(1, 1, 28, 28),
                              10, /*fuse=*/false);
  for (int i = 0; i < 13; ++i) EXPECT_FALSE(unfused->upsample_folded(i)) << i;
}

// One forward and backward from the same weights and data: the folded model's
// output and its parameter gradients (every layer's: relu3's mask applied by
// conv4 reaches conv1..conv3) agree with the separate layers' to rounding
// (1e-3 for the gradients leaves room for a relu4 mask bit that flips where
// conv4's output rounds across 0; a wrong fold or mask is off by order 1).
TEST(GpuUpsampleFold, OneStepMatchesTheSeparateLayers) {
  HPMC_REQUIRE_GPU();
  auto folded = build_fold(kFoldAe), plain = build_fold(fold_off(kFoldAe));
  ASSERT_TRUE(folded->upsample_folded(kUp1));
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

// Training: the folded model tracks the CPU like any GPU run (every impl; only
// im2col folds), and agrees with its own unfolded run to 1e-3 relative (not
// bit for bit: the fold rounds differently, which also shows it ran).
TEST(GpuUpsampleFold, TrainingTracksTheCpuAndTheUnfoldedRun) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(3200, 15), te = testing::synthetic_blobs(320, 16);
  expect_tracks(kFoldAe, tr, te, 5e-3);  // 200 steps

  GpuRun folded = train(kFoldAe, Impl::kIm2col, tr, te);
  const std::string off = fold_off(kFoldAe);
  GpuRun plain = train(off.c_str(), Impl::kIm2col, tr, te);
  ASSERT_TRUE(folded.model->upsample_folded(kUp1));
  ASSERT_FALSE(plain.model->upsample_folded(kUp1));
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

TEST(GpuUpsampleFold, SameSeedSameWeightsBitForBit) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(640, 17), te = testing::synthetic_blobs(64, 18);
  GpuRun a = train(kFoldAe, Impl::kIm2col, tr, te), b = train(kFoldAe, Impl::kIm2col, tr, te);
  ASSERT_TRUE(a.model->upsample_folded(kUp1));
  Tensor pa = a.model->params().params().to_device(Device::kCPU);
  Tensor pb = b.model->params().params().to_device(Device::kCPU);
  EXPECT_EQ(std::memcmp(pa.raw(), pb.raw(), pa.bytes()), 0);
  EXPECT_EQ(a.epochs.back().train_loss, b.epochs.back().train_loss);
}

// model.features keeps its output: naming up1 stops its fold (relu3's backward
// then runs in up1), and the features forward gives the upsampled tensor.
TEST(GpuUpsampleFold, NoFoldOfTheFeaturesLayer) {
  HPMC_REQUIRE_GPU();
  auto m = build_fold(with(kFoldAe, "features: pool2", "features: up1"));
  for (int i = 0; i < 13; ++i) EXPECT_EQ(m->upsample_folded(i), i == kUp2) << i;
  EXPECT_EQ(m->layers()[kConv4]->folded_upsample(), 1);
  EXPECT_TRUE(m->backward_fused(kRelu3));
  m->params().init(1);
  m->allocate(4);
  Rng rng(19);
  const Tensor x = testing::random_tensor(Shape(4, 1, 28, 28), rng, 0, 1).to_device(Device::kGPU);
  EXPECT_EQ(m->forward(x, kUp1).shape(), Shape(4, 8, 14, 14));
}

// A folded GPU model's checkpoint is an ordinary one: the CPU (no fold) gives
// the same test loss from it.
TEST(GpuUpsampleFold, CheckpointGivesTheSameTestLossOnTheCpu) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(640, 20), te = testing::synthetic_blobs(320, 21);
  GpuRun gpu = train(kFoldAe, Impl::kIm2col, tr, te);
  ASSERT_TRUE(gpu.model->upsample_folded(kUp1));
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
