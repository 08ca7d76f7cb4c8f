// The training-time input transforms on the GPU (layers/gpu/augment_kernels.cu)
// against the CPU loops (data/augment.h) on fresh random batches of odd shapes,
// and training with them on the GPU: it tracks the CPU run, stops and continues
// exactly, and the fused MLP step hands such runs to the layer-by-layer path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "data/augment.h"
#include "gpu_testing.h"
#include "model/batches.h"
#include "model/model.h"
#include "model/trainer.h"
#include "synthetic_data.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::to_cpu;
using testing::to_gpu;

TEST(GpuAugment, AugmentKernelEqualsTheCpuOnOddShapes) {
  HPMC_REQUIRE_GPU();
  Rng rng(21);
  const Shape shapes[] = {Shape(1, 1, 5, 7), Shape(3, 3, 9, 4), Shape(2, 5, 13, 11),
                          Shape(1, 3, 1, 1), Shape(64, 3, 32, 32), Shape(37, 1, 28, 28)};
  for (const Shape& s : shapes)
    for (int pad : {0, 1, 2, 4, 9})
      for (bool hflip : {false, true})
        for (int64_t step : {int64_t(0), int64_t(7), int64_t(123456789012)}) {
          SCOPED_TRACE(str(s.str(), " pad ", pad, " hflip ", hflip, " step ", step));
          AugmentConfig a;
          a.hflip = hflip;
          a.crop_padding = pad;
          const Shape img(1, s.c, s.h, s.w);
          Tensor x = testing::random_tensor(s, rng);
          Tensor y = Tensor::empty(s);
          augment_batch(x, y, img, a, 5, step);
          Tensor xg = to_gpu(x), yg = Tensor::empty(s, DType::kF32, Device::kGPU);
          augment_batch(xg, yg, img, a, 5, step);
          Tensor back = to_cpu(yg);
          EXPECT_EQ(std::memcmp(back.raw(), y.raw(), y.bytes()), 0);
        }
}

// How many floats lie between a and b (for the message).
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = int32_t(0x80000000u) - ia;
  if (ib < 0) ib = int32_t(0x80000000u) - ib;
  return std::llabs(int64_t(ia) - int64_t(ib));
}

TEST(GpuAugment, NoiseKernelsEqualTheCpu) {
  HPMC_REQUIRE_GPU();
  Rng rng(22);
  size_t differing = 0, compared = 0;
  for (const Shape& s : {Shape(1, 1, 1, 1), Shape(1, 3, 1, 1), Shape(7, 1, 11, 13),
                         Shape(5, 3, 33, 17), Shape(129, 3, 32, 32)}) {
    Tensor x = testing::random_tensor(s, rng, 0.f, 1.f);
    Tensor xg = to_gpu(x);
    for (int64_t step : {int64_t(0), int64_t(99), int64_t(1) << 40}) {
      SCOPED_TRACE(str(s.str(), " step ", step));
      InputNoiseConfig mask;
      mask.type = InputNoiseConfig::Type::kMask;
      for (double p : {0.1, 0.5}) {
        mask.p = p;
        Tensor y = Tensor::empty(s), yg = Tensor::empty(s, DType::kF32, Device::kGPU);
        add_input_noise(x, y, mask, 3, step);
        add_input_noise(xg, yg, mask, 3, step);
        Tensor back = to_cpu(yg);
        EXPECT_EQ(std::memcmp(back.raw(), y.raw(), y.bytes()), 0) << "mask p " << p;
      }
      InputNoiseConfig g;
      g.type = InputNoiseConfig::Type::kGaussian;
      for (double sd : {0.1, 1.0}) {
        g.std = sd;
        Tensor y = Tensor::empty(s), yg = Tensor::empty(s, DType::kF32, Device::kGPU);
        add_input_noise(x, y, g, 3, step);
        add_input_noise(xg, yg, g, 3, step);
        Tensor back = to_cpu(yg);
        for (size_t i = 0; i < y.numel(); ++i) {
          const float a = back.data<float>()[i], b = y.data<float>()[i];
          ++compared;
          if (a != b) ++differing;
          // z agrees to 1 ulp at worst (≤ 2⁻²¹ for |z| ≤ 6.67, augment_ops.h), so the two
          // fma(std, z, x) differ by at most std·2⁻²¹ plus their own roundings.
          const double tol = sd * std::ldexp(1.0, -21) +
                             std::ldexp(1.0, -23) * std::max(std::fabs(a), std::fabs(b));
          ASSERT_LE(std::fabs(double(a) - double(b)), tol)
              << "gaussian std " << sd << " at " << i << ": " << a << " vs " << b << " ("
              << ulps(a, b) << " ulps)";
        }
        // In place on the device gives the same.
        Tensor inplace = to_gpu(x);
        add_input_noise(inplace, inplace, g, 3, step);
        Tensor ib = to_cpu(inplace);
        EXPECT_EQ(std::memcmp(ib.raw(), back.raw(), ib.bytes()), 0);
      }
    }
  }
  // Bit for bit in practice: a libm difference shows in about one value in 1e8.
  EXPECT_LE(double(differing), 1e-5 * double(compared))
      << differing << " of " << compared << " gaussian values differ by 1 ulp";
  std::cout << "[ gaussian noise: " << differing << " of " << compared
            << " values differ between GPU and CPU ]\n";
}

const char* kAe = R"(name: ae
data: {format: mnist, augment: {hflip: true, crop_padding: 3}}
model:
  loss: mse
  layers:
    - {name: conv1, type: conv2d, out_channels: 8, kernel: 3, padding: 1}
    - {name: relu1, type: relu}
    - {name: pool1, type: maxpool2d}
    - {name: up1, type: upsample2d}
    - {name: conv2, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
training: {epochs: 2, batch_size: 32, lr: 0.05, momentum: 0.9, seed: 4,
           input_noise: {type: gaussian, std: 0.2}}
)";

const char* kMlp = R"(name: mlp
data: {format: mnist, augment: {crop_padding: 2}}
model:
  loss: softmax_cross_entropy
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 64}
    - {name: relu1, type: relu}
    - {name: fc2, type: linear, out_features: 10}
training: {epochs: 2, batch_size: 64, lr: 0.03, momentum: 0.9, seed: 4,
           input_noise: {type: mask, p: 0.2}}
)";

struct Trained {
  Config cfg;
  std::unique_ptr<Model> model;
  std::vector<EpochResult> epochs;
  std::string path;
};

Trained train(const char* yaml, Impl impl, const Dataset& tr, const Dataset& te) {
  Trained r;
  r.cfg = parse_config(yaml, "t.yaml");
  r.model = Model::build(r.cfg, impl, Shape(1, 1, 28, 28), 10);
  r.model->params().init(r.cfg.training.seed);
  Trainer t(*r.model, r.cfg.training);
  t.set_progress(Trainer::Progress::kQuiet);
  {
    BatchFeeder probe(tr, r.model->device(), 8, r.model->input_shape());
    r.path = t.step_path(probe);
  }
  std::ostringstream log;
  r.epochs = t.fit(tr, te, log);
  return r;
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

// 40 steps with noise and augmentation: the GPU's losses stay within rounding drift of
// the CPU's (a wrong crop, flip or noise draw on one side moves them by far more).
TEST(GpuAugment, TrainingTracksTheCpu) {
  HPMC_REQUIRE_GPU();
  for (const char* yaml : {kAe, kMlp}) {
    const bool ae = yaml == kAe;
    SCOPED_TRACE(ae ? "autoencoder" : "mlp");
    Dataset tr = ae ? testing::synthetic_blobs(640, 3) : testing::synthetic_classes(1280, 3);
    Dataset te = ae ? testing::synthetic_blobs(128, 4) : testing::synthetic_classes(256, 4);
    Trained cpu = train(yaml, Impl::kCpu, tr, te);
    for (Impl impl : {Impl::kNaive, Impl::kTiled, Impl::kIm2col}) {
      SCOPED_TRACE(impl_name(impl));
      Trained gpu = train(yaml, impl, tr, te);
      EXPECT_EQ(gpu.path.rfind("layer by layer: training.input_noise is ", 0), 0u) << gpu.path;
      ASSERT_EQ(gpu.epochs.size(), cpu.epochs.size());
      for (size_t e = 0; e < cpu.epochs.size(); ++e) {
        EXPECT_LE(rel(gpu.epochs[e].train_loss, cpu.epochs[e].train_loss), 5e-3)
            << "epoch " << e + 1 << ": " << gpu.epochs[e].train_loss << " vs cpu "
            << cpu.epochs[e].train_loss;
        EXPECT_LE(rel(gpu.epochs[e].test.loss, cpu.epochs[e].test.loss), 5e-3)
            << "epoch " << e + 1 << ": " << gpu.epochs[e].test.loss << " vs cpu "
            << cpu.epochs[e].test.loss;
      }
    }
  }
}

// Stopped mid-epoch and continued by a fresh trainer on the GPU (with the optimizer's
// state, as a checkpoint carries it): the very bits of an uninterrupted GPU run,
// which is itself repeatable.
TEST(GpuAugment, StopAndContinueIsExact) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_blobs(300, 5);  // 10 steps an epoch
  Dataset none;
  none.images = Tensor::empty(Shape(0, 1, 28, 28), DType::kU8);
  none.labels = Tensor::empty(Shape(0, 1, 1, 1), DType::kI32);
  Trained whole = train(kAe, Impl::kIm2col, tr, none), again = train(kAe, Impl::kIm2col, tr, none);
  Tensor pw = to_cpu(whole.model->params().params()), pa = to_cpu(again.model->params().params());
  EXPECT_EQ(std::memcmp(pw.raw(), pa.raw(), pw.bytes()), 0);

  Config cfg = parse_config(kAe, "t.yaml");
  auto model = Model::build(cfg, Impl::kIm2col, Shape(1, 1, 28, 28), 10);
  model->params().init(cfg.training.seed);
  TrainState state;
  Trainer second(*model, cfg.training);
  {
    Trainer first(*model, cfg.training);
    first.set_progress(Trainer::Progress::kQuiet);
    first.on_step([](TrainState& s) { return s.epoch == 1 && s.step == 4; });
    std::ostringstream log;
    first.fit(tr, none, log, state);
    second.optimizer().copy_state_from(first.optimizer());  // as a checkpoint carries it
  }
  ASSERT_EQ(state.global_step, 14);
  second.set_progress(Trainer::Progress::kQuiet);
  std::ostringstream log;
  second.fit(tr, none, log, state);
  Tensor p = to_cpu(model->params().params());
  EXPECT_EQ(std::memcmp(p.raw(), pw.raw(), p.bytes()), 0);
}

}  // namespace
}  // namespace hpmc
