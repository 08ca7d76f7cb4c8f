// The optimizers' GPU kernels (optim/gpu/optim_kernels.h) against the CPU on
// fresh random buffers of odd lengths (not multiples of 4 or of a block,
// 1 and 3 elements, a misaligned start that takes the scalar path), and
// GPU training with adamw, schedules and clipping against the CPU. Every
// test starts with HPMC_REQUIRE_GPU(), so without CUDA or a device they skip
// with the reason.
//
// Tolerances:
//   * Adam/AdamW: BIT-equal to the CPU loop (both round each operation of
//     update_args.h in its order: _rn intrinsics on the GPU, no contraction
//     in adam.cpp).
//   * the clipping norm, scale and clipped gradients: BIT-equal to the CPU
//     (clip.h's fixed order on both; every double operation rounded).
//   * SGD (with and without Nesterov): BIT-equal to a host reference that
//     rounds every operation (the kernel's formula); ≤ 1e-6 relative to the
//     CPU loop, whose compiler may fuse a multiply-add (plain SGD's CPU loop
//     is hpmc's historical one, kept for its bits).
//   * training: losses within 5e-3 relative of the CPU over 2 epochs, as
//     test_gpu_train.cpp holds the SGD runs (different GEMM summation orders
//     drift by rounding; a wrong update is off by far more).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "cli_runner.h"
#include "core/error.h"
#include "core/rng.h"
#include "gpu_testing.h"
#include "layers/cpu/linear.h"
#include "model/batches.h"
#include "model/checkpoint.h"
#include "model/fused_step.h"
#include "model/model.h"
#include "model/params.h"
#include "model/trainer.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/gpu/optim_kernels.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
#include "synthetic_data.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::to_cpu;
using testing::to_gpu;

#define HPMC_ROUNDED __attribute__((noinline))
HPMC_ROUNDED float fmul(float a, float b) { return float(double(a) * double(b)); }
HPMC_ROUNDED float fadd(float a, float b) { return float(double(a) + double(b)); }
HPMC_ROUNDED float fsub(float a, float b) { return float(double(a) - double(b)); }

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<float> random_vec(size_t n, Rng& rng, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

// A device buffer holding v after `lead` floats (lead 1: not 16-byte aligned).
Tensor gpu_vec(const std::vector<float>& v, size_t lead) {
  Tensor h = Tensor::zeros(Shape(1, int(v.size() + lead), 1, 1));
  std::copy(v.begin(), v.end(), h.data<float>() + lead);
  return to_gpu(h);
}

std::vector<float> host_vec(const Tensor& d, size_t lead, size_t n) {
  const Tensor h = to_cpu(d);
  return std::vector<float>(h.data<float>() + lead, h.data<float>() + lead + n);
}

size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += bits(a[i]) != bits(b[i]);
  return bad;
}

const size_t kLengths[] = {1, 3, 64, 1001, 4099};

// The kernel's SGD formula, each operation rounded (sgd_formula.cuh, and
// PyTorch's order for Nesterov).
void sgd_rounded(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& v,
                 const SgdArgs& a) {
  for (size_t i = 0; i < p.size(); ++i) {
    const float gg = fadd(g[i], fmul(a.weight_decay, p[i]));
    if (a.momentum == 0.0f) {
      p[i] = fsub(p[i], fmul(a.lr, gg));
      continue;
    }
    v[i] = fadd(fmul(a.momentum, v[i]), gg);
    const float d = a.nesterov ? fadd(gg, fmul(a.momentum, v[i])) : v[i];
    p[i] = fsub(p[i], fmul(a.lr, d));
  }
}

TEST(GpuOptim, SgdKernelMatchesARoundedReferenceAndTheCpu) {
  HPMC_REQUIRE_GPU();
  Rng rng(2024);
  const SgdArgs cases[] = {{0.1f, 0.f, 0.f, false},
                           {0.05f, 0.9f, 1e-2f, false},
                           {0.05f, 0.9f, 0.f, true},
                           {0.07f, 0.8f, 3e-3f, true}};
  for (size_t n : kLengths)
    for (size_t lead : {size_t(0), size_t(1)})
      for (const SgdArgs& a : cases) {
        const std::string what = str("n ", n, " lead ", lead, " momentum ", a.momentum,
                                     " nesterov ", a.nesterov);
        std::vector<float> p = random_vec(n, rng), v = random_vec(n, rng);
        std::vector<float> rp = p, rv = v, cp = p, cv = v;
        Tensor dp = gpu_vec(p, lead), dv = gpu_vec(v, lead);
        for (int step = 0; step < 3; ++step) {
          const std::vector<float> g = random_vec(n, rng);
          Tensor dg = gpu_vec(g, lead);
          gpu::sgd_pass(dp.data<float>() + lead, dg.data<float>() + lead,
                        dv.data<float>() + lead, n, a);
          sgd_rounded(rp, g, rv, a);
          sgd_update_cpu(cp.data(), g.data(), cv.data(), n, a);
        }
        const std::vector<float> gp = host_vec(dp, lead, n), gv = host_vec(dv, lead, n);
        EXPECT_EQ(differing(gp, rp), 0u) << what << ": parameters";
        EXPECT_EQ(differing(gv, rv), 0u) << what << ": momentum";
        if (a.momentum == 0.f) EXPECT_EQ(differing(gv, v), 0u) << what << ": v touched";
        EXPECT_LE(testing::max_rel_error(gp.data(), cp.data(), n), 1e-6) << what;
        EXPECT_LE(testing::max_rel_error(gv.data(), cv.data(), n), 1e-6) << what;
      }
}

TEST(GpuOptim, AdamKernelMatchesTheCpuBitForBit) {
  HPMC_REQUIRE_GPU();
  Rng rng(2025);
  for (size_t n : kLengths)
    for (size_t lead : {size_t(0), size_t(1)})
      for (bool decoupled : {false, true}) {
        const std::string what = str("n ", n, " lead ", lead, decoupled ? " adamw" : " adam");
        std::vector<float> p = random_vec(n, rng), m(n, 0.f), v(n, 0.f);
        Tensor dp = gpu_vec(p, lead), dm = gpu_vec(m, lead), dv = gpu_vec(v, lead);
        for (int t = 1; t <= 4; ++t) {
          // Gradients of every size, zeros included (as padding has).
          std::vector<float> g = random_vec(n, rng, -3.f, 3.f);
          for (size_t i = 0; i < n; i += 7) g[i] *= 1e-6f;
          if (n > 2) g[2] = 0.f;
          Tensor dg = gpu_vec(g, lead);
          const AdamArgs a = adam_args(1e-3 * t, 0.9, 0.999, 1e-8, 0.05, decoupled, t);
          gpu::adam_pass(dp.data<float>() + lead, dg.data<float>() + lead,
                         dm.data<float>() + lead, dv.data<float>() + lead, n, a);
          adam_update_cpu(p.data(), g.data(), m.data(), v.data(), n, a);
        }
        EXPECT_EQ(differing(host_vec(dp, lead, n), p), 0u) << what << ": parameters";
        EXPECT_EQ(differing(host_vec(dm, lead, n), m), 0u) << what << ": m";
        EXPECT_EQ(differing(host_vec(dv, lead, n), v), 0u) << what << ": v";
      }
}

TEST(GpuOptim, ClipMatchesTheCpuBitForBit) {
  HPMC_REQUIRE_GPU();
  Rng rng(2026);
  for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(4095), size_t(4097), size_t(300001)})
    for (double max_norm : {0.5, 1e6}) {  // clipped, and left alone
      const std::string what = str("n ", n, " max_norm ", max_norm);
      std::vector<float> g = random_vec(n, rng, -1.f, 1.f);
      Tensor dg = gpu_vec(g, 0);
      Tensor scratch = Tensor::zeros(Shape(int(gpu::clip_scratch_doubles(n)), 1, 1, 1),
                                     DType::kF64, Device::kGPU);
      gpu::clip_grad_norm(dg.data<float>(), n, max_norm, scratch.data<double>());
      const double norm = grad_norm_cpu(g.data(), n);
      const float coef = clip_coef(norm, max_norm);
      const Tensor s = to_cpu(scratch);
      const size_t k = s.numel();
      EXPECT_EQ(s.data<double>()[k - 2], norm) << what;
      EXPECT_EQ(s.data<double>()[k - 1], double(coef)) << what;
      std::vector<float> want = g;
      if (coef < 1.f)
        for (float& x : want) x = x * coef;
      EXPECT_EQ(differing(host_vec(dg, 0, n), want), 0u) << what;
    }
}

// Two stores of the same layout, one per device, the same random start; the
// optimizers take the same steps.
TEST(GpuOptim, OptimizerOnAGpuStoreMatchesTheCpuStore) {
  HPMC_REQUIRE_GPU();
  const char* configs[] = {"sgd", "sgd_momentum", "sgd_nesterov", "adam", "adamw"};
  Rng rng(2027);
  for (const char* name : configs) {
    SCOPED_TRACE(name);
    OptimizerConfig oc;
    const std::string n = name;
    if (n == "adam" || n == "adamw") {
      oc.type = n;
      oc.weight_decay = 0.01;
    } else {
      oc.momentum = n == "sgd" ? 0 : 0.9;
      oc.nesterov = n == "sgd_nesterov";
      oc.weight_decay = 1e-3;
    }
    LayerPtr lc = std::make_shared<LinearCPU>("fc", LinearConfig{7, 13, true});
    LayerPtr lg = std::make_shared<LinearCPU>("fc", LinearConfig{7, 13, true});
    ParamStore cpu, gpu;
    cpu.build({lc}, Device::kCPU);
    gpu.build({lg}, Device::kGPU);
    ASSERT_EQ(cpu.padded(), gpu.padded());
    testing::fill_uniform(cpu.params(), rng);
    gpu.params().copy_from(cpu.params());
    auto oc_cpu = make_optimizer(oc, cpu), oc_gpu = make_optimizer(oc, gpu);
    GradClipper clip_cpu(0.7), clip_gpu(0.7);
    for (int step = 0; step < 4; ++step) {
      testing::fill_uniform(cpu.grads(), rng);
      gpu.grads().copy_from(cpu.grads());
      if (step % 2) {  // clipping on every other step
        clip_cpu.clip(cpu);
        clip_gpu.clip(gpu);
        const Tensor gg = to_cpu(gpu.grads());
        EXPECT_EQ(std::memcmp(gg.data<float>(), cpu.grads().data<float>(), cpu.padded() * 4), 0);
        EXPECT_EQ(clip_gpu.last_norm(), clip_cpu.last_norm());
        EXPECT_EQ(clip_gpu.last_coef(), clip_cpu.last_coef());
      }
      oc_cpu->step(0.01 * (step + 1));
      oc_gpu->step(0.01 * (step + 1));
    }
    const bool exact = oc.type != "sgd";
    const Tensor p = to_cpu(gpu.params());
    const size_t len = cpu.padded();
    if (exact)
      EXPECT_EQ(std::memcmp(p.data<float>(), cpu.params().data<float>(), len * 4), 0);
    else
      EXPECT_LE(testing::max_rel_error(cpu.params().data<float>(), p.data<float>(), len), 1e-6);
    for (size_t i = 0; i < oc_cpu->state_names().size(); ++i) {
      const Tensor s = to_cpu(oc_gpu->state(i));
      if (exact)
        EXPECT_EQ(std::memcmp(s.data<float>(), oc_cpu->state(i).data<float>(), len * 4), 0)
            << oc_cpu->state_names()[i];
      else
        EXPECT_LE(testing::max_rel_error(oc_cpu->state(i).data<float>(), s.data<float>(), len), 1e-6);
    }
  }
}

// ---- training -----------------------------------------------------------------------

const char* kMlp = R"(name: mlp
data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 64}
    - {name: relu1, type: relu}
    - {name: fc2, type: linear, out_features: 10}
)";

const char* kTrainings[] = {
    "training: {epochs: 2, batch_size: 64, seed: 4, optimizer: {type: adamw, lr: 0.002}, "
    "schedule: {type: cosine, warmup_steps: 10, min_lr: 0.0001}, clip_grad_norm: 1}",
    "training: {epochs: 2, batch_size: 64, seed: 4, optimizer: {type: adam, lr: 0.001, "
    "weight_decay: 0.0001}, schedule: {type: step, step_size: 30, gamma: 0.5}}",
    "training: {epochs: 2, batch_size: 64, seed: 4, optimizer: {type: sgd, lr: 0.03, momentum: "
    "0.9, nesterov: true}, clip_grad_norm: 2}",
};

struct GpuRun {
  std::unique_ptr<Model> model;
  std::unique_ptr<Trainer> trainer;
  std::vector<EpochResult> epochs;
  std::string path;
};

GpuRun train(const std::string& yaml, Impl impl, const Dataset& tr, const Dataset& te) {
  GpuRun r;
  Config cfg = parse_config(yaml, "t.yaml");
  r.model = Model::build(cfg, impl, Shape(1, 1, 28, 28), 10);
  r.model->params().init(cfg.training.seed);
  r.trainer = std::make_unique<Trainer>(*r.model, cfg.training);
  r.trainer->set_progress(Trainer::Progress::kQuiet);
  {
    BatchFeeder feed(tr, r.model->device(), cfg.training.batch_size, r.model->input_shape());
    r.path = r.trainer->step_path(feed);
  }
  std::ostringstream log;
  r.epochs = r.trainer->fit(tr, te, log);
  return r;
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

TEST(GpuOptim, TrainingTracksTheCpu) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_classes(3200, 1), te = testing::synthetic_classes(320, 2);
  for (const char* training : kTrainings) {
    SCOPED_TRACE(training);
    const std::string yaml = std::string(kMlp) + training + "\n";
    GpuRun cpu = train(yaml, Impl::kCpu, tr, te);
    EXPECT_LT(cpu.epochs.back().train_loss, cpu.epochs.front().train_loss);
    for (Impl impl : {Impl::kNaive, Impl::kIm2col}) {
      SCOPED_TRACE(impl_name(impl));
      GpuRun gpu = train(yaml, impl, tr, te);
      EXPECT_EQ(gpu.path.rfind("layer by layer", 0), 0u) << gpu.path;
      ASSERT_EQ(gpu.epochs.size(), cpu.epochs.size());
      for (size_t e = 0; e < cpu.epochs.size(); ++e) {
        EXPECT_LE(rel(gpu.epochs[e].train_loss, cpu.epochs[e].train_loss), 5e-3) << "epoch " << e + 1;
        EXPECT_LE(rel(gpu.epochs[e].test.loss, cpu.epochs[e].test.loss), 5e-3) << "epoch " << e + 1;
      }
    }
  }
}

// On the GPU too, stopping, checkpointing and resuming gives the very bits
// of an uninterrupted run (the kernels and the clipping norm are deterministic).
TEST(GpuOptim, ResumeIsExactOnTheGpu) {
  HPMC_REQUIRE_GPU();
  Dataset tr = testing::synthetic_classes(1000, 3);  // 16 steps an epoch
  Dataset none;
  none.images = Tensor::empty(Shape(0, 1, 28, 28), DType::kU8);
  none.labels = Tensor::empty(Shape(0, 1, 1, 1), DType::kI32);
  testing::TempDir dir;
  for (const char* training : kTrainings) {
    SCOPED_TRACE(training);
    const Config cfg = parse_config(std::string(kMlp) + training + "\n", "t.yaml");
    auto build = [&] { return Model::build(cfg, Impl::kIm2col, Shape(1, 1, 28, 28), 10); };
    std::ostringstream log;
    auto whole = build();
    whole->params().init(cfg.training.seed);
    Trainer tw(*whole, cfg.training);
    tw.set_progress(Trainer::Progress::kQuiet);
    TrainState end;
    tw.fit(tr, none, log, end);
    save_checkpoint(dir.file("a.safetensors"), *whole, tw.optimizer(), cfg, end, tr.size());

    auto first = build();
    first->params().init(cfg.training.seed);
    Trainer t1(*first, cfg.training);
    t1.set_progress(Trainer::Progress::kQuiet);
    t1.on_step([](TrainState& s) { return s.global_step == 21; });
    TrainState mid;
    t1.fit(tr, none, log, mid);
    save_checkpoint(dir.file("mid.safetensors"), *first, t1.optimizer(), cfg, mid, tr.size());
    auto second = build();
    Trainer t2(*second, cfg.training);
    t2.set_progress(Trainer::Progress::kQuiet);
    TrainState at;
    load_checkpoint(dir.file("mid.safetensors"), *second, t2.optimizer(), cfg, at, tr.size());
    t2.fit(tr, none, log, at);
    save_checkpoint(dir.file("b.safetensors"), *second, t2.optimizer(), cfg, at, tr.size());
    EXPECT_TRUE(testing::slurp(dir.file("a.safetensors")) == testing::slurp(dir.file("b.safetensors")));
  }
}

}  // namespace
}  // namespace hpmc
