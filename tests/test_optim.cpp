// The optimizers, schedules and gradient clipping (src/optim/) on the CPU:
// each update rule on hand-computed values and in its documented rounding
// order; schedule values at chosen steps; the clipping norm, its order and
// its independence from the thread count; the config keys and their errors;
// golden 30-step trajectories against PyTorch float64 (tools/golden/
// make_optim.py -> tests/golden_optim.h); exact resume for every optimizer
// and schedule; the checks a resume makes; and the command line.
//
// Tolerances:
//   * hand-computed values: 1e-6 relative (float32 against exact decimals).
//   * Adam/AdamW and the clipping norm against references that round every
//     operation (each float32 operation done in double and rounded: exact,
//     as double has more than 2·24 + 2 bits): bit for bit.
//   * golden trajectories: see GoldenOptim below.
//   * resume: bit for bit (the final checkpoint files are compared byte by byte).
#include <gtest/gtest.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli_runner.h"
#include "core/error.h"
#include "golden_optim.h"
#include "io/safetensors.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/fused_step.h"
#include "model/model.h"
#include "model/trainer.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "synthetic_data.h"
#include "testing.h"

namespace hpmc {
namespace {

// ---- helpers --------------------------------------------------------------------------

// Each float32 operation in double, rounded once: the IEEE float result.
// Not inlined, so that this file's compiler cannot fuse one's product into
// the next one's sum (it may narrow each to a float operation, which is the
// same result, and then contract float expressions).
#define HPMC_ROUNDED __attribute__((noinline))
HPMC_ROUNDED float fmul(float a, float b) { return float(double(a) * double(b)); }
HPMC_ROUNDED float fadd(float a, float b) { return float(double(a) + double(b)); }
HPMC_ROUNDED float fsub(float a, float b) { return float(double(a) - double(b)); }
HPMC_ROUNDED float fdiv(float a, float b) { return float(double(a) / double(b)); }
HPMC_ROUNDED float fsqrt(float a) { return float(std::sqrt(double(a))); }

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

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A model config with `training` as its training section.
const char* kMlpModel = R"(name: o
data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 12}
    - {name: relu1, type: relu}
    - {name: fc2, type: linear, out_features: 10}
)";

Config config_with(const std::string& training, const std::vector<Override>& ov = {}) {
  return parse_config(std::string(kMlpModel) + training + "\n", "o.yaml", ov);
}

std::string config_error(const std::string& training, const std::vector<Override>& ov = {}) {
  return error_of([&] { config_with(training, ov); });
}

// ---- update rules on hand-computed values ----------------------------------------------

TEST(OptimRules, SgdMatchesPyTorchOnHandValues) {
  // p = 1, grad 0.5 each step, lr 0.1, momentum 0.9, wd 0.01 (torch.optim.SGD):
  //   g = 0.5 + 0.01·1 = 0.51, v = 0.51, p = 1 − 0.051 = 0.949;
  //   g = 0.5 + 0.00949 = 0.50949, v = 0.459 + 0.50949 = 0.96849, p = 0.949 − 0.096849 = 0.852151.
  float p = 1, v = 0, g = 0.5f;
  SgdArgs a{0.1f, 0.9f, 0.01f, false};
  sgd_update_cpu(&p, &g, &v, 1, a);
  EXPECT_NEAR(p, 0.949, 1e-6);
  sgd_update_cpu(&p, &g, &v, 1, a);
  EXPECT_NEAR(p, 0.852151, 1e-6);
  EXPECT_NEAR(v, 0.96849, 1e-6);
  // Without momentum: p −= lr·(g + wd·p); v is not touched (it may be null).
  p = 1;
  sgd_update_cpu(&p, &g, nullptr, 1, SgdArgs{0.1f, 0.f, 0.f, false});
  EXPECT_NEAR(p, 0.95, 1e-7);
  // Nesterov: the step uses g + μ·v.
  //   g = 0.51, v = 0.51, d = 0.51 + 0.459 = 0.969, p = 0.9031;
  //   g = 0.5 + 0.009031 = 0.509031, v = 0.459 + 0.509031 = 0.968031,
  //   d = 0.509031 + 0.8712279 = 1.3802589, p = 0.9031 − 0.13802589 = 0.76507411.
  p = 1, v = 0;
  SgdArgs n{0.1f, 0.9f, 0.01f, true};
  sgd_update_cpu(&p, &g, &v, 1, n);
  EXPECT_NEAR(p, 0.9031, 1e-6);
  sgd_update_cpu(&p, &g, &v, 1, n);
  EXPECT_NEAR(v, 0.968031, 1e-6);
  EXPECT_NEAR(p, 0.76507411, 1e-6);
}

TEST(OptimRules, AdamAndAdamWMatchPyTorchOnHandValues) {
  // p = 1, lr 0.1, betas (0.9, 0.999), eps 1e-8; grads 0.5 then −0.25.
  // Step 1: m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25: p = 1 − 0.1·0.5/(0.5 + 1e-8).
  // Step 2: m = 0.045 − 0.025 = 0.02, v = 0.00024975 + 0.0000625 = 0.00031225,
  //   p −= 0.1/0.19 · 0.02 / (√0.00031225 / √0.001999 + 1e-8).
  const double p1 = 1 - 0.1 * 0.5 / (0.5 + 1e-8);
  const double p2 = p1 - 0.1 / 0.19 * 0.02 / (std::sqrt(0.00031225) / std::sqrt(0.001999) + 1e-8);
  float p = 1, m = 0, v = 0, g = 0.5f;
  adam_update_cpu(&p, &g, &m, &v, 1, adam_args(0.1, 0.9, 0.999, 1e-8, 0, false, 1));
  EXPECT_NEAR(p, p1, 1e-6);
  g = -0.25f;
  adam_update_cpu(&p, &g, &m, &v, 1, adam_args(0.1, 0.9, 0.999, 1e-8, 0, false, 2));
  EXPECT_NEAR(m, 0.02, 1e-8);
  EXPECT_NEAR(v, 0.00031225, 1e-10);
  EXPECT_NEAR(p, p2, 1e-6);
  // Adam's weight decay is L2 in the gradient: g = 0.5 + 0.1·1 = 0.6 gives the
  // same first step (the normalised update is lr·sign), m = 0.06, v = 0.00036.
  p = 1, m = 0, v = 0, g = 0.5f;
  adam_update_cpu(&p, &g, &m, &v, 1, adam_args(0.1, 0.9, 0.999, 1e-8, 0.1, false, 1));
  EXPECT_NEAR(m, 0.06, 1e-8);
  EXPECT_NEAR(v, 0.00036, 1e-10);
  EXPECT_NEAR(p, 1 - 0.1 * 0.6 / (0.6 + 1e-8), 1e-6);
  // AdamW decays the parameter first: p = 1·(1 − 0.1·0.1) = 0.99, then the same step.
  p = 1, m = 0, v = 0, g = 0.5f;
  adam_update_cpu(&p, &g, &m, &v, 1, adam_args(0.1, 0.9, 0.999, 1e-8, 0.1, true, 1));
  EXPECT_NEAR(m, 0.05, 1e-8);
  EXPECT_NEAR(p, 0.99 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-6);
}

TEST(OptimRules, AdamArgsRoundHostScalarsFromDouble) {
  const AdamArgs a = adam_args(0.001, 0.9, 0.999, 1e-8, 0.01, true, 3);
  EXPECT_EQ(a.c2, float(1.0 - 0.999));  // not 1 − float(0.999), which is 1.3e-5 off
  EXPECT_NE(a.c2, 1.0f - float(0.999));
  EXPECT_EQ(a.step_size, float(0.001 / (1 - 0.9 * 0.9 * 0.9)));
  EXPECT_EQ(a.bc2_sqrt, float(std::sqrt(1 - std::pow(0.999, 3))));
  EXPECT_EQ(a.decay, float(1 - 0.001 * 0.01));
  EXPECT_EQ(a.l2, 0.0f);
  EXPECT_EQ(adam_args(0.001, 0.9, 0.999, 1e-8, 0.01, false, 3).l2, 0.01f);
  EXPECT_EQ(adam_args(0.001, 0.9, 0.999, 1e-8, 0.01, false, 3).decay, 1.0f);
  EXPECT_THROW(adam_args(0.001, 0.9, 0.999, 1e-8, 0, false, 0), Error);
}

// The CPU loop rounds exactly the operations of update_args.h, in its
// order, with no fused multiply-add: bit for bit a reference that rounds
// each one. (The GPU kernel is held to the same bits in test_gpu_optim.cpp.)
TEST(OptimRules, AdamLoopRoundsInTheDocumentedOrder) {
  Rng rng(77);
  for (bool decoupled : {false, true}) {
    const size_t n = 1001;
    std::vector<float> p = random_vec(n, rng), m = random_vec(n, rng, -0.1f, 0.1f),
                       v = random_vec(n, rng, 0.f, 0.01f);
    std::vector<float> rp = p, rm = m, rv = v;
    for (int t = 1; t <= 3; ++t) {
      const std::vector<float> g = random_vec(n, rng);
      const AdamArgs a = adam_args(0.01 * t, 0.9, 0.999, 1e-8, 0.02, decoupled, t);
      adam_update_cpu(p.data(), g.data(), m.data(), v.data(), n, a);
      for (size_t i = 0; i < n; ++i) {
        float pi = rp[i], gi = g[i];
        if (decoupled) pi = fmul(pi, a.decay);
        else gi = fadd(gi, fmul(a.l2, pi));
        rm[i] = fadd(fmul(a.beta1, rm[i]), fmul(a.c1, gi));
        rv[i] = fadd(fmul(a.beta2, rv[i]), fmul(fmul(a.c2, gi), gi));
        const float d = fadd(fdiv(fsqrt(rv[i]), a.bc2_sqrt), a.eps);
        rp[i] = fsub(pi, fmul(a.step_size, fdiv(rm[i], d)));
      }
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
      bad += (bits(p[i]) != bits(rp[i])) + (bits(m[i]) != bits(rm[i])) + (bits(v[i]) != bits(rv[i]));
    EXPECT_EQ(bad, 0u) << (decoupled ? "adamw" : "adam");
  }
}

// ---- the optimizer objects -----------------------------------------------------------------

struct Store {
  Config cfg;
  std::unique_ptr<Model> model;
  explicit Store(const std::string& training = "") : cfg(config_with(training)) {
    model = Model::build(cfg, Impl::kCpu, Shape(1, 1, 5, 5), 10);
    model->params().init(3);
  }
  ParamStore& ps() { return model->params(); }
};

TEST(Optimizer, OwnsNamedStateBuffersOfTheStoresLayout) {
  Store s;
  OptimizerConfig sgd;
  EXPECT_TRUE(make_optimizer(sgd, s.ps())->state_names().empty());  // momentum 0: no state
  sgd.momentum = 0.9;
  auto o = make_optimizer(sgd, s.ps());
  ASSERT_EQ(o->state_names(), std::vector<std::string>{"momentum"});
  EXPECT_EQ(o->state_list(), "momentum");
  EXPECT_EQ(o->state(0).numel(), s.ps().params().numel());
  EXPECT_EQ(o->find_state("momentum"), &o->state(0));
  EXPECT_EQ(o->find_state("m"), nullptr);
  for (const char* type : {"adam", "adamw"}) {
    OptimizerConfig c;
    c.type = type;
    auto a = make_optimizer(c, s.ps());
    EXPECT_EQ(a->state_list(), "m,v");
    EXPECT_EQ(a->type(), type);
    EXPECT_EQ(a->state(1).numel(), s.ps().params().numel());
    EXPECT_EQ(a->state(1).device(), Device::kCPU);
  }
  OptimizerConfig bad;
  bad.type = "lion";
  EXPECT_THROW(make_optimizer(bad, s.ps()), ConfigError);
}

TEST(Optimizer, StepsCountAndPaddingStaysZero) {
  for (const char* training :
       {"training: {momentum: 0.9, weight_decay: 0.1}",
        "training: {optimizer: {type: sgd, momentum: 0.9, nesterov: true, weight_decay: 0.1}}",
        "training: {optimizer: {type: adam, weight_decay: 0.1}}",
        "training: {optimizer: {type: adamw, weight_decay: 0.1}}"}) {
    SCOPED_TRACE(training);
    Store s(training);
    ParamStore& ps = s.ps();
    auto o = make_optimizer(s.cfg.training.optimizer, ps);
    Rng rng(5);
    for (int step = 0; step < 3; ++step) {
      // Gradients only in the tensors, zero in the gaps (as backward writes them).
      ps.zero_grads();
      for (const auto& e : ps.entries())
        for (size_t i = 0; i < e.count; ++i)
          ps.grads().data<float>()[e.offset + i] = rng.uniform(-1.f, 1.f);
      o->step(0.05);
    }
    EXPECT_EQ(o->steps(), 3);
    // Every gap of every buffer is still zero; the tensors moved.
    std::vector<const Tensor*> bufs = {&ps.params()};
    for (size_t i = 0; i < o->state_names().size(); ++i) bufs.push_back(&o->state(i));
    std::vector<bool> in_tensor(ps.padded(), false);
    for (const auto& e : ps.entries())
      for (size_t i = 0; i < e.count; ++i) in_tensor[e.offset + i] = true;
    size_t nonzero_gaps = 0;
    for (const Tensor* b : bufs)
      for (size_t i = 0; i < ps.padded(); ++i)
        nonzero_gaps += !in_tensor[i] && b->data<float>()[i] != 0.0f;
    EXPECT_EQ(nonzero_gaps, 0u);
    EXPECT_GT(ps.padded(), ps.total());  // there are gaps to check
    o->reset();
    EXPECT_EQ(o->steps(), 0);
    for (size_t i = 0; i < o->state_names().size(); ++i)
      EXPECT_EQ(o->state(i).data<float>()[0], 0.0f);
  }
}

TEST(Optimizer, DescribeAndCopyState) {
  Store s("training: {optimizer: {type: adamw, lr: 0.002, betas: [0.8, 0.9], eps: 1e-6}}");
  auto a = make_optimizer(s.cfg.training.optimizer, s.ps());
  EXPECT_EQ(a->describe(), "adamw, lr 0.002, betas (0.8, 0.9), eps 1e-06, weight decay 0.01");
  a->state(0).data<float>()[3] = 7;
  a->set_steps(4);
  auto b = make_optimizer(s.cfg.training.optimizer, s.ps());
  b->copy_state_from(*a);
  EXPECT_EQ(b->state(0).data<float>()[3], 7.0f);
  EXPECT_EQ(b->steps(), 4);
  OptimizerConfig sgd;
  sgd.momentum = 0.9;
  EXPECT_EQ(make_optimizer(sgd, s.ps())->describe(), "lr 0.01, momentum 0.9, weight decay 0");
  EXPECT_THROW(make_optimizer(sgd, s.ps())->copy_state_from(*a), Error);
}

// ---- schedules ----------------------------------------------------------------------------

TEST(Schedule, ValuesAtChosenSteps) {
  ScheduleConfig c;
  c.warmup_steps = 4;
  Schedule constant(c, 0.1, 0);
  EXPECT_DOUBLE_EQ(constant.lr(0), 0.025);  // (t + 1)/W · lr
  EXPECT_DOUBLE_EQ(constant.lr(1), 0.05);
  EXPECT_DOUBLE_EQ(constant.lr(3), 0.1);    // the warm-up reaches lr on its last step
  EXPECT_DOUBLE_EQ(constant.lr(4), 0.1);
  EXPECT_DOUBLE_EQ(constant.lr(1000000), 0.1);
  EXPECT_DOUBLE_EQ(Schedule(ScheduleConfig{}, 0.1, 0).lr(0), 0.1);  // no warm-up

  ScheduleConfig st;
  st.type = "step";
  st.warmup_steps = 2;
  st.step_size = 3;
  st.gamma = 0.5;
  Schedule step(st, 0.2, 0);
  EXPECT_DOUBLE_EQ(step.lr(0), 0.1);
  EXPECT_DOUBLE_EQ(step.lr(1), 0.2);
  EXPECT_DOUBLE_EQ(step.lr(2), 0.2);   // u = 0
  EXPECT_DOUBLE_EQ(step.lr(4), 0.2);   // u = 2
  EXPECT_DOUBLE_EQ(step.lr(5), 0.1);   // u = 3: one decay
  EXPECT_DOUBLE_EQ(step.lr(8), 0.05);  // u = 6
  EXPECT_DOUBLE_EQ(step.lr(10), 0.05); // u = 8

  ScheduleConfig co;
  co.type = "cosine";
  co.warmup_steps = 2;
  co.min_lr = 0.1;
  co.total_steps = 12;  // the cosine spans u = 0 .. 10
  Schedule cos(co, 1.0, 999);  // total_steps wins over the run's length
  EXPECT_DOUBLE_EQ(cos.lr(0), 0.5);
  EXPECT_DOUBLE_EQ(cos.lr(2), 1.0);
  EXPECT_NEAR(cos.lr(4), 0.1 + 0.45 * (1 + std::cos(M_PI / 5)), 1e-15);  // 0.914057...
  EXPECT_NEAR(cos.lr(7), 0.55, 1e-15);                                   // halfway
  EXPECT_NEAR(cos.lr(12), 0.1, 1e-15);
  EXPECT_NEAR(cos.lr(50), 0.1, 1e-15);  // held at the floor past the end
  co.total_steps = 0;
  EXPECT_NEAR(Schedule(co, 1.0, 22).lr(12), 0.55, 1e-15);  // over the run's 22 steps
}

TEST(Schedule, IdentityAndErrors) {
  ScheduleConfig co;
  co.type = "cosine";
  co.warmup_steps = 100;
  co.min_lr = 1e-5;
  EXPECT_EQ(Schedule(co, 0.1, 4690).identity(),
            "cosine(warmup_steps=100, min_lr=1e-05, total_steps=4690)");
  ScheduleConfig st;
  st.type = "step";
  st.step_size = 30;
  st.gamma = 0.1;
  EXPECT_EQ(Schedule(st, 0.1, 0).identity(), "step(warmup_steps=0, step_size=30, gamma=0.1)");
  EXPECT_EQ(Schedule(ScheduleConfig{}, 0.5, 10).identity(), Schedule::legacy_identity());
  EXPECT_NE(error_of([&] { Schedule(co, 0.1, 0); }).find("set training.schedule.total_steps"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Schedule(co, 0.1, 100); })
                .find("training.schedule.warmup_steps (100) must be less than the cosine's 100 "
                      "steps (the run's epochs x steps per epoch)"),
            std::string::npos);
}

// ---- clipping -------------------------------------------------------------------------------

TEST(Clip, NormAndCoefficientAsPyTorch) {
  const float g[2] = {3, 4};
  EXPECT_EQ(grad_norm_cpu(g, 2), 5.0);
  EXPECT_EQ(grad_norm_cpu(g, 0), 0.0);
  EXPECT_EQ(clip_coef(5.0, 1.0), float(1.0 / (5.0 + 1e-6)));
  EXPECT_EQ(clip_coef(5.0, 10.0), 1.0f);
  EXPECT_EQ(clip_coef(5.0, 5.0), float(5.0 / (5.0 + 1e-6)));  // at the threshold: just below 1
  EXPECT_EQ(clip_coef(0.0, 1.0), 1.0f);
}

// The fixed order of clip.h, reimplemented plainly: bit for bit; and the
// result does not depend on the number of threads.
TEST(Clip, NormFollowsTheFixedOrderOnAnyThreadCount) {
  Rng rng(9);
  for (size_t n : {size_t(1), size_t(255), size_t(4096), size_t(4097), size_t(300001)}) {
    const std::vector<float> g = random_vec(n, rng, -2.f, 2.f);
    const size_t chunks = (n + kClipChunk - 1) / kClipChunk;
    std::vector<double> partial(chunks);
    auto fold = [](std::vector<double> lane) {
      for (int h = kClipLanes / 2; h >= 1; h /= 2)
        for (int j = 0; j < h; ++j) lane[size_t(j)] = lane[size_t(j)] + lane[size_t(j + h)];
      return lane[0];
    };
    for (size_t c = 0; c < chunks; ++c) {
      std::vector<double> lane(kClipLanes, 0.0);
      for (size_t k = 0; k < kClipChunk / kClipLanes; ++k)
        for (size_t j = 0; j < size_t(kClipLanes); ++j) {
          const size_t i = c * kClipChunk + k * kClipLanes + j;
          if (i < n) {
            const double sq = double(g[i]) * double(g[i]);  // exact: 48 bits
            lane[j] = lane[j] + sq;
          }
        }
      partial[c] = fold(lane);
    }
    std::vector<double> lane(kClipLanes, 0.0);
    for (size_t c = 0; c < chunks; ++c) lane[c % kClipLanes] = lane[c % kClipLanes] + partial[c];
    const double want = std::sqrt(fold(lane));
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const double one = grad_norm_cpu(g.data(), n);
    omp_set_num_threads(3);
    const double three = grad_norm_cpu(g.data(), n);
    omp_set_num_threads(threads);
#else
    const double one = grad_norm_cpu(g.data(), n), three = one;
#endif
    EXPECT_EQ(one, want) << "n " << n;
    EXPECT_EQ(three, want) << "n " << n;
    long double exact = 0;
    for (float x : g) exact += (long double)x * x;
    EXPECT_NEAR(want, double(std::sqrt(exact)), 1e-12 * want) << "n " << n;
  }
}

TEST(Clip, ClipperScalesOnlyAboveTheThreshold) {
  Store s;
  ParamStore& ps = s.ps();
  Rng rng(4);
  testing::fill_uniform(ps.grads(), rng);
  const std::vector<float> before(ps.grads().data<float>(), ps.grads().data<float>() + ps.padded());
  const double norm = grad_norm_cpu(before.data(), before.size());
  GradClipper loose(2 * norm);
  loose.clip(ps);
  EXPECT_EQ(loose.last_norm(), norm);
  EXPECT_EQ(loose.last_coef(), 1.0f);
  EXPECT_EQ(std::memcmp(before.data(), ps.grads().data<float>(), before.size() * 4), 0);
  GradClipper tight(0.5);
  tight.clip(ps);
  const float c = float(0.5 / (norm + 1e-6));
  EXPECT_EQ(tight.last_coef(), c);
  for (size_t i = 0; i < before.size(); ++i)
    ASSERT_EQ(bits(ps.grads().data<float>()[i]), bits(before[i] * c)) << i;
  EXPECT_NEAR(grad_norm_cpu(ps.grads().data<float>(), ps.padded()), 0.5, 1e-6);
}

// ---- config ------------------------------------------------------------------------------

TEST(OptimConfig, FlatKeysMeanSgdAndTheResolvedConfigSpellsItOut) {
  Config c = config_with("training: {lr: 0.2, momentum: 0.5, weight_decay: 0.001}");
  const OptimizerConfig& o = c.training.optimizer;
  EXPECT_EQ(o.type, "sgd");
  EXPECT_EQ(o.lr, 0.2);
  EXPECT_EQ(o.momentum, 0.5);
  EXPECT_EQ(o.weight_decay, 0.001);
  EXPECT_FALSE(o.nesterov);
  EXPECT_TRUE(o.flat);
  EXPECT_EQ(o.key("lr"), "training.lr");
  EXPECT_EQ(c.training.schedule.type, "constant");
  EXPECT_EQ(c.training.clip_grad_norm, 0.0);
  const YAML::Node t = c.resolved["training"];
  EXPECT_FALSE(t["lr"]);
  EXPECT_FALSE(t["momentum"]);
  EXPECT_EQ(t["optimizer"]["type"].as<std::string>(), "sgd");
  EXPECT_EQ(t["optimizer"]["lr"].as<double>(), 0.2);
  EXPECT_EQ(t["optimizer"]["momentum"].as<double>(), 0.5);
  EXPECT_EQ(t["optimizer"]["nesterov"].as<bool>(), false);
  EXPECT_EQ(t["schedule"]["type"].as<std::string>(), "constant");
  EXPECT_EQ(t["schedule"]["warmup_steps"].as<int>(), 0);
  EXPECT_EQ(t["clip_grad_norm"].as<double>(), 0.0);
  // No training section at all: hpmc's old defaults.
  Config d = config_with("");
  EXPECT_EQ(d.training.optimizer.type, "sgd");
  EXPECT_EQ(d.training.optimizer.lr, 0.01);
}

TEST(OptimConfig, OptimizerMapsWithPyTorchsDefaults) {
  Config a = config_with("training: {optimizer: {type: adam}}");
  const OptimizerConfig& o = a.training.optimizer;
  EXPECT_EQ(o.type, "adam");
  EXPECT_EQ(o.lr, 0.001);
  EXPECT_EQ(o.beta1, 0.9);
  EXPECT_EQ(o.beta2, 0.999);
  EXPECT_EQ(o.eps, 1e-8);
  EXPECT_EQ(o.weight_decay, 0.0);
  EXPECT_FALSE(o.flat);
  EXPECT_EQ(o.key("momentum"), "training.optimizer.momentum");
  EXPECT_EQ(config_with("training: {optimizer: {type: adamw}}").training.optimizer.weight_decay, 0.01);
  Config s = config_with("training: {optimizer: {type: sgd, momentum: 0.9, nesterov: true}}");
  EXPECT_EQ(s.training.optimizer.lr, 0.01);
  EXPECT_TRUE(s.training.optimizer.nesterov);
  Config w = config_with(
      "training:\n  optimizer: {type: adamw, lr: 0.003, betas: [0.8, 0.95], eps: 1e-6, "
      "weight_decay: 0.1}\n  schedule: {type: cosine, warmup_steps: 10, min_lr: 1e-5}\n"
      "  clip_grad_norm: 1.5");
  EXPECT_EQ(w.training.optimizer.beta1, 0.8);
  EXPECT_EQ(w.training.optimizer.beta2, 0.95);
  EXPECT_EQ(w.training.optimizer.eps, 1e-6);
  EXPECT_EQ(w.training.schedule.type, "cosine");
  EXPECT_EQ(w.training.schedule.warmup_steps, 10);
  EXPECT_EQ(w.training.schedule.min_lr, 1e-5);
  EXPECT_EQ(w.training.schedule.total_steps, 0);
  EXPECT_EQ(w.training.clip_grad_norm, 1.5);
  // The resolved map has every key, defaults filled in, and reads back the same.
  const YAML::Node r = w.resolved["training"];
  EXPECT_EQ(r["optimizer"]["betas"][1].as<double>(), 0.95);
  EXPECT_EQ(r["schedule"]["total_steps"].as<int>(), 0);
  YAML::Emitter em;
  em << w.resolved;
  Config again = parse_config(em.c_str(), "resolved.yaml");
  EXPECT_EQ(again.training.optimizer.type, "adamw");
  EXPECT_EQ(again.training.optimizer.beta1, 0.8);
  EXPECT_EQ(again.training.optimizer.eps, 1e-6);
  EXPECT_EQ(again.training.schedule.min_lr, 1e-5);
  EXPECT_EQ(again.training.clip_grad_norm, 1.5);
  YAML::Emitter em2;
  em2 << config_with("training: {lr: 0.2, momentum: 0.5}").resolved;
  Config flat_again = parse_config(em2.c_str(), "resolved.yaml");
  EXPECT_EQ(flat_again.training.optimizer.momentum, 0.5);
  EXPECT_FALSE(flat_again.training.optimizer.flat);
  Config st = config_with("training: {schedule: {type: step, step_size: 5}}");
  EXPECT_EQ(st.training.schedule.gamma, 0.1);
  EXPECT_EQ(st.resolved["training"]["schedule"]["gamma"].as<double>(), 0.1);
}

TEST(OptimConfig, ErrorsAreOneLocatedLine) {
  struct Case {
    std::string training, message;
  };
  const std::vector<Case> cases = {
      {"training:\n  lr: 0.1\n  optimizer: {type: adam}",
       "o.yaml:11:7: training.lr: cannot be given beside training.optimizer (o.yaml:12:14)"},
      {"training:\n  optimizer: {type: adam}\n  weight_decay: 0.1",
       "o.yaml:12:17: training.weight_decay: cannot be given beside training.optimizer"},
      {"training: {optimizer: {lr: 0.1}}",
       "training.optimizer.type: is required (one of: sgd, adam, adamw)"},
      {"training: {optimizer: {type: adamv}}",
       "training.optimizer.type: unknown value 'adamv' (did you mean 'adam'?)"},
      {"training: {optimizer: adam}", "training.optimizer must be a mapping of keys to values"},
      {"training: {optimizer: {type: adam, beta: [0.9, 0.99]}}",
       "unknown key 'training.optimizer.beta' (did you mean 'betas'?)"},
      {"training: {optimizer: {type: adam, momentum: 0.9}}",
       "unknown key 'training.optimizer.momentum'; known keys here: betas, eps, lr, type, "
       "weight_decay"},
      {"training: {optimizer: {type: sgd, betas: [0.9, 0.99]}}",
       "unknown key 'training.optimizer.betas'"},
      {"training: {optimizer: {type: adam, betas: [0.9]}}",
       "training.optimizer.betas: expected a list of two numbers [beta1, beta2], got a list of 1"},
      {"training: {optimizer: {type: adam, betas: 0.9}}",
       "training.optimizer.betas: expected a list of two numbers [beta1, beta2], got '0.9'"},
      {"training: {optimizer: {type: adam, betas: [0.9, 1]}}",
       "training.optimizer.betas: beta2 must be at least 0 and less than 1, got 1"},
      {"training: {optimizer: {type: adam, betas: [x, 0.9]}}",
       "training.optimizer.betas: beta1 is not a number"},
      {"training: {optimizer: {type: adam, eps: 0}}", "training.optimizer.eps: must be greater than 0"},
      {"training: {optimizer: {type: adamw, lr: -1}}",
       "training.optimizer.lr: must be between 0 and 1e+06, got -1"},
      {"training: {optimizer: {type: sgd, nesterov: true}}",
       "training.optimizer.nesterov: needs momentum greater than 0"},
      {"training: {optimizer: {type: sgd, momentum: 1}}",
       "training.optimizer.momentum: must be between 0 and 0.999999, got 1"},
      {"training: {schedule: {type: cosin}}",
       "training.schedule.type: unknown value 'cosin' (did you mean 'cosine'?); choose one of: "
       "constant, step, cosine"},
      {"training: {schedule: {warmup_steps: 5}}", "training.schedule.type: is required"},
      {"training: {schedule: {type: step}}", "training.schedule.step_size: is required"},
      {"training: {schedule: {type: step, step_sise: 3}}",
       "unknown key 'training.schedule.step_sise' (did you mean 'step_size'?)"},
      {"training: {schedule: {type: cosine, gamma: 0.5}}",
       "unknown key 'training.schedule.gamma'; known keys here: min_lr, total_steps, type, "
       "warmup_steps"},
      {"training: {schedule: {type: step, step_size: 0}}",
       "training.schedule.step_size: must be between 1 and"},
      {"training: {schedule: {type: step, step_size: 2, gamma: 2}}",
       "training.schedule.gamma: must be between 0 and 1, got 2"},
      {"training: {schedule: {type: cosine, warmup_steps: 10, total_steps: 10}}",
       "training.schedule.warmup_steps: must be less than total_steps (10)"},
      {"training: {lr: 0.01, schedule: {type: cosine, min_lr: 0.1}}",
       "training.schedule.min_lr: must be at most the learning rate (training.lr = 0.01), got 0.1"},
      {"training: {schedule: {type: constant, warmup_steps: -1}}",
       "training.schedule.warmup_steps: must be between 0 and"},
      {"training: {clip_grad_norm: -1}", "training.clip_grad_norm: must be between 0 and 1e+06"},
      {"training: {clip_grad: 1}", "unknown key 'training.clip_grad' (did you mean 'clip_grad_norm'?)"},
      {"training: {optimiser: {type: adam}}", "unknown key 'training.optimiser' (did you mean 'optimizer'?)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.training);
    const std::string e = config_error(c.training);
    EXPECT_NE(e.find(c.message), std::string::npos) << e;
    EXPECT_EQ(e.rfind("o.yaml:", 0), 0u) << e;  // located in the file
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// `hpmc info` lists each type's keys and defaults from optimizer_keys() and
// schedule_keys(): exactly the keys the reader takes, with the defaults it
// fills in.
TEST(OptimConfig, InfoKeysAreWhatTheReaderTakes) {
  auto emit = [](const YAML::Node& n) {
    YAML::Emitter e;
    e << n;
    return std::string(e.c_str());
  };
  auto check = [&](const char* section, const char* type, const std::vector<OptimKey>& keys) {
    SCOPED_TRACE(str(section, " ", type));
    std::string all = str("{type: ", type), minimal = all;
    std::set<std::string> names = {"type"};
    for (const OptimKey& k : keys) {
      all += str(", ", k.name, ": ", k.value.empty() ? "5" : k.value);
      if (k.value.empty()) minimal += str(", ", k.name, ": 5");  // required
      names.insert(k.name);
    }
    const Config a = config_with(str("training: {", section, ": ", all, "}}"));
    const Config b = config_with(str("training: {", section, ": ", minimal, "}}"));
    const YAML::Node ra = a.resolved["training"][section], rb = b.resolved["training"][section];
    EXPECT_EQ(emit(ra), emit(rb));
    std::set<std::string> resolved;
    for (auto it = ra.begin(); it != ra.end(); ++it) resolved.insert(it->first.as<std::string>());
    EXPECT_EQ(resolved, names);
  };
  for (const char* const* t = optimizer_types(); *t; ++t) check("optimizer", *t, optimizer_keys(*t));
  for (const char* const* t = schedule_types(); *t; ++t) check("schedule", *t, schedule_keys(*t));
  auto r = testing::run_hpmc("info");
  EXPECT_NE(r.out.find("    adamw: lr=0.001 (learning rate), betas=[0.9, 0.999]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    cosine: warmup_steps=0"), std::string::npos) << r.out;
}

TEST(OptimConfig, LrFlagSetsTheOptimizersLr) {
  const std::string adam = "training: {optimizer: {type: adam, lr: 0.003}}";
  // --lr (an override of training.lr) reaches training.optimizer.lr ...
  Config c = config_with(adam, {{"training.lr=0.5", "--lr 0.5"}});
  EXPECT_EQ(c.training.optimizer.lr, 0.5);
  EXPECT_EQ(c.training.optimizer.type, "adam");
  EXPECT_EQ(config_with(adam, {{"training.lr=0.25", ""}}).training.optimizer.lr, 0.25);
  // ... and its errors name the flag.
  std::string e = config_error(adam, {{"training.lr=-2", "--lr -2"}});
  EXPECT_EQ(e, "--lr -2: training.optimizer.lr: must be between 0 and 1e+06, got -2") << e;
  // With flat keys it is training.lr, as always.
  EXPECT_EQ(config_with("training: {lr: 0.1}", {{"training.lr=0.5", "--lr 0.5"}})
                .training.optimizer.lr,
            0.5);
  // The other flat keys beside training.optimizer stay an error.
  e = config_error(adam, {{"training.momentum=0.9", ""}});
  EXPECT_EQ(e.rfind("--set training.momentum=0.9: training.momentum: cannot be given beside "
                    "training.optimizer",
                    0),
            0u)
      << e;
  // And overrides reach the optimizer's own keys.
  EXPECT_EQ(config_with(adam, {{"training.optimizer.betas=[0.5, 0.6]", ""}}).training.optimizer.beta2,
            0.6);
}

// ---- the trainer ------------------------------------------------------------------------

Tensor formula_batch(int s, int n, int features) {
  Tensor x = Tensor::empty(Shape(n, 1, 5, 5));
  for (int i = 0; i < n * features; ++i)
    x.data<float>()[i] = float(0.5 + 0.5 * std::sin(1.3 * double(i) + 0.7 * double(s) + 0.2));
  return x;
}

Tensor formula_labels(int s, int n) {
  Tensor y = Tensor::empty(Shape(n, 1, 1, 1), DType::kI32);
  for (int b = 0; b < n; ++b) y.data<int32_t>()[b] = (3 * b + s) % 10;
  return y;
}

TEST(OptimTrainer, AppliesTheScheduleStepByStep) {
  Store s("training: {optimizer: {type: sgd, lr: 0.4}, "
          "schedule: {type: step, warmup_steps: 2, step_size: 2, gamma: 0.5}}");
  s.model->allocate(4);
  Trainer t(*s.model, s.cfg.training);
  Tensor acc = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64);
  const double want[] = {0.2, 0.4, 0.4, 0.4, 0.2, 0.2, 0.1};
  for (int k = 0; k < 7; ++k) {
    EXPECT_DOUBLE_EQ(t.next_lr(), want[k]) << "step " << k;
    // The step moves the weights by lr·grad (plain SGD), to float rounding.
    std::vector<float> p0(s.ps().params().data<float>(), s.ps().params().data<float>() + s.ps().padded());
    t.step(formula_batch(k, 4, 25), formula_labels(k, 4), acc);
    const float* p = s.ps().params().data<float>();
    const float* g = s.ps().grads().data<float>();
    for (size_t i = 0; i < 5; ++i)
      EXPECT_NEAR(p[i], double(p0[i]) - want[k] * double(g[i]), 1e-7) << "step " << k << " " << i;
  }
  EXPECT_EQ(t.optimizer().steps(), 7);
  // A cosine needs the run's length: fit() gives it, a bare step() cannot.
  Store c("training: {schedule: {type: cosine}}");
  c.model->allocate(4);
  Trainer tc(*c.model, c.cfg.training);
  EXPECT_NE(error_of([&] { tc.step(formula_batch(0, 4, 25), formula_labels(0, 4), acc); })
                .find("set training.schedule.total_steps"),
            std::string::npos);
  tc.set_run_steps(10);
  EXPECT_DOUBLE_EQ(tc.next_lr(), 0.01);
}

TEST(OptimTrainer, ClipsTheGradientBeforeTheUpdate) {
  // Plain SGD at lr 1 with max norm 0.001: the step moves the weights by
  // exactly the clipped gradient, of norm 0.001.
  Store s("training: {optimizer: {type: sgd, lr: 1}, clip_grad_norm: 0.001}");
  s.model->allocate(4);
  Trainer t(*s.model, s.cfg.training);
  Tensor acc = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64);
  std::vector<float> p0(s.ps().params().data<float>(), s.ps().params().data<float>() + s.ps().padded());
  t.step(formula_batch(0, 4, 25), formula_labels(0, 4), acc);
  std::vector<float> d(p0.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = p0[i] - s.ps().params().data<float>()[i];
  EXPECT_NEAR(grad_norm_cpu(d.data(), d.size()), 0.001, 1e-7);
  EXPECT_NEAR(grad_norm_cpu(s.ps().grads().data<float>(), s.ps().padded()), 0.001, 1e-7);
}

// ---- golden trajectories against PyTorch float64 --------------------------------------

// Each case of tools/golden/make_optim.py: 30 steps of the 25-12-10 MLP from
// formula weights on formula batches, against PyTorch float64. Bounds:
//   * every step's loss within 1e-7 (relative). hpmc sums the loss in
//     double and departs by 2e-9..1e-8 here; PyTorch's float32 run, which
//     sums in float, by 1.2e-7..1.3e-7.
//   * every final parameter within 3x PyTorch's own float32 departure (the
//     header records it per case: 2.3e-7, 3.2e-7, 1.4e-6 of the largest
//     |parameter|); hpmc's is 2.4e-7..1.4e-6 (recorded as test properties),
//     i.e. float32 rounding and no more.
// The bounds catch rounding mistakes, not only wrong formulas: computing
// Adam's 1 − β2 in float32 (1 − float(0.999), off by 1.3e-5) moves the adam
// case's parameters by 7.7e-6 and its losses by 2e-7, and fails both.
TEST(GoldenOptim, TrajectoriesMatchPyTorchFloat64) {
  for (const GoldenOptimCase& c : kOptimCases) {
    SCOPED_TRACE(c.name);
    Config cfg = config_with(c.training);
    auto m = Model::build(cfg, Impl::kCpu, Shape(1, 1, 5, 5), 10);
    ASSERT_EQ(m->params().total(), size_t(kOptimParams));
    float* p = m->params().params().data<float>();
    int k = 0;
    for (const auto& e : m->params().entries()) {
      const size_t fan = e.dims.size() > 1 ? e.count / size_t(e.dims[0]) : e.count;
      for (size_t i = 0; i < e.count; ++i)
        p[e.offset + i] =
            float(std::sin(2.399963229728653 * double(i) + 0.5 * k) / std::sqrt(double(fan)));
      ++k;
    }
    const int B = kOptimBatch;
    m->allocate(B);
    Trainer t(*m, cfg.training);
    Tensor acc = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64);
    double prev = 0, worst_loss = 0;
    for (int s = 0; s < kOptimSteps; ++s) {
      t.step(formula_batch(s, B, 25), formula_labels(s, B), acc);
      const double loss = (acc.data<double>()[0] - prev) / B;
      prev = acc.data<double>()[0];
      worst_loss = std::max(worst_loss, std::fabs(loss - c.losses[s]) / std::fabs(c.losses[s]));
    }
    double scale = 0, worst_param = 0;
    size_t idx = 0;
    for (const auto& e : m->params().entries())
      for (size_t i = 0; i < e.count; ++i, ++idx) {
        scale = std::max(scale, std::fabs(c.params[idx]));
        worst_param = std::max(worst_param, std::fabs(double(p[e.offset + i]) - c.params[idx]));
      }
    worst_param /= scale;
    char buf[96];
    std::snprintf(buf, sizeof buf, "loss %.3g (torch f32 %.3g), params %.3g (torch f32 %.3g)",
                  worst_loss, c.f32_loss_departure, worst_param, c.f32_param_departure);
    RecordProperty(std::string("departure_") + c.name, buf);
    EXPECT_LE(worst_loss, 1e-7) << buf;
    EXPECT_LE(worst_param, 3 * c.f32_param_departure) << buf;
  }
}

// ---- exact resume -----------------------------------------------------------------------

const char* kResumeModel = R"(name: r
data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 24}
    - {name: relu1, type: relu}
    - {name: fc2, type: linear, out_features: 10}
)";

struct ResumeCase {
  const char* name;
  const char* training;
};
// 200 samples in batches of 16: 13 steps an epoch (the last of 8), 39 in all.
const ResumeCase kResumeCases[] = {
    {"sgd_flat", "{epochs: 3, batch_size: 16, seed: 3, lr: 0.05, momentum: 0.9, weight_decay: 0.001}"},
    {"sgd_nesterov_step",
     "{epochs: 3, batch_size: 16, seed: 3, optimizer: {type: sgd, lr: 0.05, momentum: 0.9, "
     "nesterov: true}, schedule: {type: step, warmup_steps: 4, step_size: 7, gamma: 0.5}}"},
    {"sgd_plain_cosine", "{epochs: 3, batch_size: 16, seed: 3, lr: 0.1, schedule: {type: cosine}}"},
    {"adam_constant",
     "{epochs: 3, batch_size: 16, seed: 3, optimizer: {type: adam, lr: 0.003, weight_decay: 0.0001}}"},
    {"adam_step_clip",
     "{epochs: 3, batch_size: 16, seed: 3, optimizer: {type: adam, lr: 0.003}, "
     "schedule: {type: step, step_size: 10, gamma: 0.3}, clip_grad_norm: 0.5}"},
    {"adamw_warmup_cosine_clip",
     "{epochs: 3, batch_size: 16, seed: 3, optimizer: {type: adamw, lr: 0.004, betas: [0.8, "
     "0.99]}, schedule: {type: cosine, warmup_steps: 6, min_lr: 0.0001}, clip_grad_norm: 0.3}"},
};

Config resume_config(const char* training) {
  return parse_config(std::string(kResumeModel) + "training: " + training + "\n", "r.yaml");
}

std::unique_ptr<Model> resume_model(const Config& cfg) {
  return Model::build(cfg, Impl::kCpu, Shape(1, 1, 28, 28), 10);
}

Dataset no_data() {
  Dataset d;
  d.images = Tensor::empty(Shape(0, 1, 28, 28), DType::kU8);
  d.labels = Tensor::empty(Shape(0, 1, 1, 1), DType::kI32);
  return d;
}

// Trains to the end (stopping after `stop` global steps, if > 0, and
// checkpointing there) and writes the final checkpoint.
TrainState train_run(const Config& cfg, Model& m, Trainer& t, const Dataset& data,
                     TrainState state, int64_t stop) {
  t.set_progress(Trainer::Progress::kQuiet);
  if (stop > 0) t.on_step([stop](TrainState& s) { return s.global_step == stop; });
  std::ostringstream log;
  t.fit(data, no_data(), log, state);
  return state;
}

TEST(OptimResume, EveryOptimizerAndScheduleResumesBitForBit) {
  const Dataset data = testing::synthetic_classes(200, 12);
  testing::TempDir dir;
  for (const ResumeCase& c : kResumeCases) {
    SCOPED_TRACE(c.name);
    const Config cfg = resume_config(c.training);
    // Uninterrupted: 39 steps.
    auto whole = resume_model(cfg);
    whole->params().init(cfg.training.seed);
    Trainer tw(*whole, cfg.training);
    const TrainState end = train_run(cfg, *whole, tw, data, TrainState{}, 0);
    ASSERT_EQ(end.global_step, 39);
    const std::string a = dir.file(std::string(c.name) + "_whole.safetensors");
    save_checkpoint(a, *whole, tw.optimizer(), cfg, end, data.size());

    // 18 steps (mid-epoch 2), a checkpoint, then a new model, trainer and
    // optimizer that resume from it for the other 21.
    const std::string mid = dir.file(std::string(c.name) + "_mid.safetensors");
    {
      auto first = resume_model(cfg);
      first->params().init(cfg.training.seed);
      Trainer t1(*first, cfg.training);
      const TrainState at = train_run(cfg, *first, t1, data, TrainState{}, 18);
      ASSERT_EQ(at.global_step, 18);
      ASSERT_EQ(at.epoch, 1);
      save_checkpoint(mid, *first, t1.optimizer(), cfg, at, data.size());
    }
    auto second = resume_model(cfg);
    Trainer t2(*second, cfg.training);
    TrainState at;
    load_checkpoint(mid, *second, t2.optimizer(), cfg, at, data.size());
    EXPECT_EQ(t2.optimizer().steps(), 18);
    const TrainState end2 = train_run(cfg, *second, t2, data, at, 0);
    ASSERT_EQ(end2.global_step, 39);
    const std::string b = dir.file(std::string(c.name) + "_resumed.safetensors");
    save_checkpoint(b, *second, t2.optimizer(), cfg, end2, data.size());
    EXPECT_TRUE(testing::slurp(a) == testing::slurp(b))
        << "the resumed run's final weights or optimizer state differ";
    // And the state is really there: the checkpoint names it.
    SafetensorsFile f = SafetensorsFile::read(b);
    EXPECT_EQ(f.metadata().at("optimizer"), cfg.training.optimizer.type);
    EXPECT_EQ(f.metadata().at("optimizer_steps"), "39");
    for (const std::string& s : t2.optimizer().state_names())
      EXPECT_NE(f.find("optimizer." + s + ".fc1.weight"), nullptr) << s;
  }
}

// Rewrites a checkpoint with some metadata changed ("" erases the key).
void edit_metadata(const std::string& from, const std::string& to,
                   const std::map<std::string, std::string>& edits) {
  SafetensorsFile f = SafetensorsFile::read(from);
  std::vector<SafetensorsEntry> entries;
  for (const SafetensorsTensor& t : f.tensors())
    entries.push_back({t.name, t.dtype, t.shape, f.data(t), t.end - t.begin});
  std::map<std::string, std::string> meta = f.metadata();
  for (const auto& [key, value] : edits) {
    if (value.empty()) meta.erase(key);
    else meta[key] = value;
  }
  write_safetensors(to, entries, meta);
}

std::string resume_error(const std::string& path, const Config& cfg, int train_size = 200) {
  auto m = resume_model(cfg);
  Trainer t(*m, cfg.training);
  TrainState st;
  const std::string e = error_of([&] { load_checkpoint(path, *m, t.optimizer(), cfg, st, train_size); });
  if (e != "(no error)") {
    EXPECT_EQ(st.global_step, 0) << "restored despite: " << e;
    EXPECT_EQ(t.optimizer().steps(), 0) << "restored despite: " << e;
  }
  return e;
}

TEST(OptimResume, ADifferentOptimizerOrScheduleIsRefused) {
  const Dataset data = testing::synthetic_classes(200, 12);
  testing::TempDir dir;
  const Config adamw = resume_config(kResumeCases[5].training);
  const std::string ckpt = dir.file("adamw.safetensors");
  {
    auto m = resume_model(adamw);
    m->params().init(3);
    Trainer t(*m, adamw.training);
    save_checkpoint(ckpt, *m, t.optimizer(), adamw, train_run(adamw, *m, t, data, {}, 5), 200);
  }
  SafetensorsFile f = SafetensorsFile::read(ckpt);
  EXPECT_EQ(f.metadata().at("optimizer_state"), "m,v");
  EXPECT_EQ(f.metadata().at("schedule"), "cosine(warmup_steps=6, min_lr=0.0001, total_steps=39)");
  EXPECT_EQ(f.metadata().at("momentum"), "false");
  EXPECT_NE(f.find("optimizer.m.fc2.bias"), nullptr);
  EXPECT_NE(f.find("optimizer.v.fc2.bias"), nullptr);

  std::string e = resume_error(ckpt, resume_config(kResumeCases[0].training));
  EXPECT_EQ(e, "cannot resume from " + ckpt + ": it was written with the optimizer adamw but this "
               "run has sgd (the default, without training.optimizer); restore the setting, or "
               "start a new run from its weights with --init " + ckpt) << e;
  e = resume_error(ckpt, resume_config("{epochs: 3, batch_size: 16, seed: 3, optimizer: {type: sgd}}"));
  EXPECT_NE(e.find("adamw but this run has sgd (training.optimizer.type)"), std::string::npos) << e;
  e = resume_error(ckpt, resume_config(kResumeCases[3].training));
  EXPECT_NE(e.find("written with the optimizer adamw but this run has adam"), std::string::npos) << e;
  // The same optimizer under another schedule, or the cosine over another length.
  std::string other = kResumeCases[5].training;
  other.replace(other.find("min_lr: 0.0001"), 14, "min_lr: 0.0002");
  e = resume_error(ckpt, resume_config(other.c_str()));
  EXPECT_NE(e.find("it was written with the schedule cosine(warmup_steps=6, min_lr=0.0001, "
                   "total_steps=39) but this run has cosine(warmup_steps=6, min_lr=0.0002, "
                   "total_steps=39)"),
            std::string::npos)
      << e;
  other = kResumeCases[5].training;
  other.replace(other.find("epochs: 3"), 9, "epochs: 4");
  e = resume_error(ckpt, resume_config(other.c_str()));
  EXPECT_NE(e.find("total_steps=52) (training.schedule; a cosine spans the run's epochs"),
            std::string::npos) << e;
  // Hyperparameters may change, as --lr always could.
  other = kResumeCases[5].training;
  other.replace(other.find("lr: 0.004"), 9, "lr: 0.002");
  EXPECT_EQ(resume_error(ckpt, resume_config(other.c_str())), "(no error)");

  // SGD with and without momentum keep different state.
  const Config mom = resume_config(kResumeCases[0].training);
  const std::string sgd = dir.file("sgd.safetensors");
  {
    auto m = resume_model(mom);
    m->params().init(3);
    Trainer t(*m, mom.training);
    save_checkpoint(sgd, *m, t.optimizer(), mom, train_run(mom, *m, t, data, {}, 5), 200);
  }
  e = resume_error(sgd, resume_config(
                            "{epochs: 3, batch_size: 16, seed: 3, optimizer: {type: sgd, lr: 0.05}}"));
  EXPECT_NE(e.find("written with momentum on but this run has training.optimizer.momentum 0; use "
                   "--init"),
            std::string::npos)
      << e;
}

TEST(OptimResume, MetadataFieldsAreChecked) {
  const Dataset data = testing::synthetic_classes(200, 12);
  testing::TempDir dir;
  const Config cfg = resume_config(kResumeCases[3].training);
  const std::string good = dir.file("good.safetensors");
  {
    auto m = resume_model(cfg);
    m->params().init(3);
    Trainer t(*m, cfg.training);
    save_checkpoint(good, *m, t.optimizer(), cfg, train_run(cfg, *m, t, data, {}, 5), 200);
  }
  const std::string bad = dir.file("bad.safetensors");
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"optimizer", "lion"}}, "checkpoint metadata 'optimizer' is 'lion', not sgd, adam or adamw"},
      {{{"optimizer_state", "m"}}, "checkpoint metadata 'optimizer_state' is 'm' but adam keeps 'm,v'"},
      {{{"optimizer_state", ""}}, "checkpoint metadata 'optimizer_state' is missing"},
      {{{"optimizer_steps", "4"}},
       "checkpoint metadata 'optimizer_steps' is 4 but the run has taken 5 steps (global_step)"},
      {{{"optimizer_steps", "x"}}, "checkpoint metadata 'optimizer_steps' is 'x', not a decimal integer"},
      {{{"schedule", ""}}, "checkpoint metadata 'schedule' is missing"},
  };
  for (const auto& [edits, message] : cases) {
    SCOPED_TRACE(message);
    edit_metadata(good, bad, edits);
    const std::string e = resume_error(bad, cfg);
    EXPECT_EQ(e.rfind(bad + ": " + message, 0), 0u) << e;
  }
  // A state tensor missing from the file: named, nothing restored.
  {
    SafetensorsFile f = SafetensorsFile::read(good);
    std::vector<SafetensorsEntry> entries;
    for (const SafetensorsTensor& t : f.tensors())
      if (t.name != "optimizer.v.fc1.bias")
        entries.push_back({t.name, t.dtype, t.shape, f.data(t), t.end - t.begin});
    write_safetensors(bad, entries, f.metadata());
    const std::string e = resume_error(bad, cfg);
    EXPECT_NE(e.find("optimizer.v.fc1.bias"), std::string::npos) << e;
  }
}

// A checkpoint written before optimizers were pluggable (no optimizer fields;
// the momentum buffers as optimizer.momentum.*) resumes as sgd at a constant
// rate, momentum and all, and gives the very bits of an uninterrupted run.
TEST(OptimResume, OldCheckpointsStillResume) {
  const Dataset data = testing::synthetic_classes(200, 12);
  testing::TempDir dir;
  const Config cfg = resume_config(kResumeCases[0].training);
  auto whole = resume_model(cfg);
  whole->params().init(3);
  Trainer tw(*whole, cfg.training);
  const TrainState end = train_run(cfg, *whole, tw, data, {}, 0);
  const std::string a = dir.file("whole.safetensors");
  save_checkpoint(a, *whole, tw.optimizer(), cfg, end, 200);

  const std::string mid = dir.file("mid.safetensors"), old = dir.file("old.safetensors");
  {
    auto m = resume_model(cfg);
    m->params().init(3);
    Trainer t(*m, cfg.training);
    save_checkpoint(mid, *m, t.optimizer(), cfg, train_run(cfg, *m, t, data, {}, 18), 200);
  }
  edit_metadata(mid, old, {{"optimizer", ""}, {"optimizer_state", ""}, {"optimizer_steps", ""},
                           {"optimizer_settings", ""}, {"schedule", ""}, {"clip_grad_norm", ""}});
  EXPECT_EQ(SafetensorsFile::read(old).metadata().count("optimizer"), 0u);
  auto m = resume_model(cfg);
  Trainer t(*m, cfg.training);
  TrainState st;
  load_checkpoint(old, *m, t.optimizer(), cfg, st, 200);
  EXPECT_EQ(t.optimizer().steps(), 18);  // the global step
  const TrainState end2 = train_run(cfg, *m, t, data, st, 0);
  const std::string b = dir.file("resumed.safetensors");
  save_checkpoint(b, *m, t.optimizer(), cfg, end2, 200);
  EXPECT_TRUE(testing::slurp(a) == testing::slurp(b));
  // An old checkpoint is an sgd one: another optimizer, or a schedule, is refused.
  EXPECT_NE(resume_error(old, resume_config(kResumeCases[3].training))
                .find("written with the optimizer sgd but this run has adam"),
            std::string::npos);
  EXPECT_NE(resume_error(old, resume_config(kResumeCases[1].training))
                .find("written with the schedule constant(warmup_steps=0) but this run has step("),
            std::string::npos);
}

// ---- the fused MLP step's reasons -----------------------------------------------------------

TEST(OptimFused, RefusesWhatItsKernelCannotDo) {
  EXPECT_EQ(fused_optimizer_refusal(config_with("training: {lr: 0.1, momentum: 0.9}").training), "");
  EXPECT_EQ(fused_optimizer_refusal(
                config_with("training: {lr: 0.1, schedule: {type: cosine, total_steps: 9}}").training),
            "");  // the scheduled rate is passed per step
  EXPECT_EQ(fused_optimizer_refusal(config_with("training: {optimizer: {type: adamw}}").training),
            "the fused kernel applies SGD, and training.optimizer.type is adamw");
  EXPECT_EQ(fused_optimizer_refusal(config_with("training: {optimizer: {type: adam}}").training),
            "the fused kernel applies SGD, and training.optimizer.type is adam");
  EXPECT_EQ(fused_optimizer_refusal(
                config_with("training: {optimizer: {type: sgd, momentum: 0.9, nesterov: true}}")
                    .training),
            "the fused kernel applies SGD without Nesterov momentum");
  EXPECT_NE(fused_optimizer_refusal(config_with("training: {clip_grad_norm: 1}").training)
                .find("gradient clipping (training.clip_grad_norm) needs the whole gradient"),
            std::string::npos);
}

// ---- the command line ----------------------------------------------------------------------

// Synthetic data (no dataset needed): 256 samples in batches of 32, 8 steps an epoch.
const char* kCliModel = R"(name: om
data: {format: mnist, synthetic: true, train_limit: 256, test_limit: 64}
model:
  loss: softmax_cross_entropy
  layers:
    - {type: flatten}
    - {type: linear, out_features: 32}
    - {type: relu}
    - {type: linear, out_features: 10}
)";

std::string write_config(const testing::TempDir& t, const std::string& name,
                         const std::string& training) {
  const std::string path = t.file(name);
  std::ofstream(path) << kCliModel << training << "\n";
  return path;
}

std::string dirs(const testing::TempDir& t, const std::string& name) {
  return " --progress quiet --out " + t.file(name) + " --weights-dir " + t.file(name + "_w") + " ";
}

TEST(OptimCli, AdamwRunRecordsItsOptimizerAndResumesExactly) {
  testing::TempDir t;
  const std::string adamw = write_config(
      t, "adamw.yaml",
      "training:\n  batch_size: 32\n  optimizer: {type: adamw, lr: 0.002}\n"
      "  schedule: {type: cosine, warmup_steps: 3, min_lr: 0.0001, total_steps: 16}\n"
      "  clip_grad_norm: 1");
  auto whole = testing::run_hpmc("run " + adamw + " --epochs 2" + dirs(t, "a"));
  ASSERT_EQ(whole.code, 0) << whole.err << whole.out;
  EXPECT_NE(whole.out.find("training: 2 epochs, batch 32, adamw, lr 0.002, betas (0.9, 0.999), "
                           "eps 1e-08, weight decay 0.01, schedule cosine(warmup_steps=3, "
                           "min_lr=0.0001, total_steps=16), clip_grad_norm 1, seed 1"),
            std::string::npos)
      << whole.out;
  const std::string resolved = testing::slurp(t.file("a/config.yaml"));
  for (const char* s : {"optimizer:", "type: adamw", "betas: [0.9", "eps: 1e-08",
                        "weight_decay: 0.01", "schedule:", "type: cosine", "total_steps: 16",
                        "clip_grad_norm: 1"})
    EXPECT_NE(resolved.find(s), std::string::npos) << s << "\n" << resolved;
  // The resolved config runs again as it is, to the same bits.
  auto again = testing::run_hpmc("run " + t.file("a/config.yaml") + dirs(t, "c"));
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(testing::slurp(t.file("a_w/om.safetensors")) ==
              testing::slurp(t.file("c_w/om.safetensors")));

  // One epoch, then --resume to two: the schedule spans total_steps, so the
  // second half continues the same cosine, and the result is the same bits.
  auto half = testing::run_hpmc("run " + adamw + " --epochs 1" + dirs(t, "b"));
  ASSERT_EQ(half.code, 0) << half.err;
  auto rest = testing::run_hpmc("run " + adamw + " --epochs 2 --resume" + dirs(t, "b"));
  ASSERT_EQ(rest.code, 0) << rest.err;
  EXPECT_NE(rest.out.find("resuming from"), std::string::npos);
  EXPECT_TRUE(testing::slurp(t.file("a_w/om.safetensors")) ==
              testing::slurp(t.file("b_w/om.safetensors")))
      << "the resumed run's checkpoint differs from the uninterrupted one's";

  // Resuming it as sgd is refused before any training (exit code 3).
  const std::string sgd = write_config(t, "sgd.yaml", "training: {batch_size: 32, momentum: 0.9}");
  auto r = testing::run_hpmc("run " + sgd + " --epochs 3 --resume" + dirs(t, "b"));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("it was written with the optimizer adamw but this run has sgd (the "
                       "default, without training.optimizer)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.out.find("epoch 3/3"), std::string::npos) << r.out;
}

TEST(OptimCli, LrFlagAndConfigErrors) {
  testing::TempDir t;
  const std::string adam =
      write_config(t, "adam.yaml", "training: {batch_size: 32, optimizer: {type: adam}}");
  auto r = testing::run_hpmc("run " + adam + " --epochs 1 --lr 0.02" + dirs(t, "a"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("adam, lr 0.02, betas"), std::string::npos) << r.out;
  EXPECT_NE(testing::slurp(t.file("a/config.yaml")).find("lr: 0.02"), std::string::npos);
  r = testing::run_hpmc("run " + adam + " --lr -1" + dirs(t, "b"));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.err, "hpmc: error: --lr -1: training.optimizer.lr: must be between 0 and 1e+06, got "
                   "-1\n");
  r = testing::run_hpmc("run configs/fashion_mlp.yaml --set 'training.optimizer={type: adam}'" +
                        dirs(t, "c"));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("configs/fashion_mlp.yaml:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": training.lr: cannot be given beside training.optimizer (--set "
                       "training.optimizer={type: adam})"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace hpmc
