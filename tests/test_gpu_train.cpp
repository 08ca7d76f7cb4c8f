// GPU training end to end: the MLP and a small conv AE trained for a few
// hundred steps on the GPU (each of naive, tiled, im2col) track the CPU run
// from the same weights and data order; a GPU checkpoint loads on the CPU and
// gives the same test loss; a GPU run is deterministic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "gpu_testing.h"
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
  save_checkpoint(t.file("ae.safetensors"), *gpu.model, gpu.cfg, st, tr.size());
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
TEST(GpuTrain, FusedReLUsGiveTheSameBits) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(640, 9), te = testing::synthetic_blobs(64, 10);
  for (Impl impl : {Impl::kIm2col, Impl::kTiled}) {
    SCOPED_TRACE(impl_name(impl));
    GpuRun fused = train(kAe, impl, tr, te), plain = train(kAe, impl, tr, te, /*fuse=*/false);
    const Model& m = *fused.model;
    // conv1 relu1 pool1 conv2 relu2 pool2 up1 conv3 relu3 up2 conv4
    ASSERT_EQ(m.layers().size(), 11u);
    for (int i : {1, 4, 8}) EXPECT_EQ(m.forward_fused(i), impl == Impl::kIm2col) << i;
    for (int i : {1, 4, 8}) EXPECT_TRUE(m.backward_fused(i)) << i;
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

}  // namespace
}  // namespace hpmc
