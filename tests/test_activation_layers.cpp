// The layers leaky_relu, prelu, sigmoid and tanh and the losses
// bce_with_logits, bce and l1 as the registry builds them (their ops are
// tested in test_activations.cpp, test_losses_bce.cpp and, on the GPU,
// test_gpu_activations.cpp):
//   * keys and defaults from the schema; prelu's parameter (PyTorch's name,
//     one slope per channel, a constant init) and its channel check;
//   * the CPU layers on PyTorch's float64 values (tests/golden_activations.h)
//     through Layer::forward/backward — y, dx, and prelu's slope gradient
//     added into the bound gradient; sigmoid and tanh take their backward
//     from the y they are given;
//   * the CPU losses through Loss::compute on PyTorch's values, and bce's
//     input error through the front door;
//   * GPU layers and losses (Gpu* tests, skipped without a device) against
//     the CPU ones on odd shapes: leaky_relu, prelu, every backward bit for
//     bit, sigmoid/tanh forward within 4 ulp, prelu's slope gradient within
//     1 ulp; loss values to 1e-12, dpred bit for bit (bce, l1) or 1 ulp
//     (bce_with_logits); bce's bad input reported by check_status with the
//     CPU's message;
//   * tiny models written in YAML, built by parse_config + Model::build, that
//     use every new layer and loss and train a few SGD steps with a falling
//     loss, on the CPU and (Gpu*) on the GPU, where they track the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "golden_activations.h"
#include "gpu_testing.h"
#include "layers/activation_spec.h"
#include "model/config.h"
#include "model/model.h"
#include "model/registry.h"
#include "optim/optimizer.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::to_cpu;
using testing::to_gpu;
using testing::ulp_distance;

Tensor from(const Shape& s, const double* v) {
  Tensor t = Tensor::empty(s);
  for (size_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(v[i]);
  return t;
}

Tensor filled(const Shape& s, float v) {
  Tensor t = Tensor::empty(s);
  std::fill(t.data<float>(), t.data<float>() + t.numel(), v);
  return t;
}

// Every float of t within max_ulp of want[i] rounded to float.
void expect_ulps(const Tensor& t, const double* want, int64_t max_ulp, const std::string& what) {
  for (size_t i = 0; i < t.numel(); ++i)
    EXPECT_LE(ulp_distance(t.data<float>()[i], float(want[i])), max_ulp)
        << what << "[" << i << "]: " << t.data<float>()[i] << " vs PyTorch " << want[i];
}

constexpr size_t kActN = sizeof(kActX) / sizeof(kActX[0]);

// ---- schemas and parameters ---------------------------------------------------------

TEST(ActivationLayers, KeysDefaultsAndDescriptions) {
  const Shape in(1, 3, 4, 5);
  LayerPtr l = make_layer("leaky_relu", "{}", Impl::kCpu, in, "act");
  EXPECT_EQ(l->kind(), LayerKind::kLeakyReLU);
  EXPECT_EQ(dynamic_cast<LeakyReLUSpec&>(*l).negative_slope(), 0.01f) << "PyTorch's default";
  EXPECT_EQ(l->describe(), "slope 0.01");
  EXPECT_EQ(l->param_count(), 0u);
  EXPECT_EQ(dynamic_cast<LeakyReLUSpec&>(*make_layer("leaky_relu", "{negative_slope: 0.2}",
                                                     Impl::kCpu, in))
                .negative_slope(),
            0.2f);
  try {
    make_layer("leaky_relu", "{negative_slope: -0.1}", Impl::kCpu, in);
    ADD_FAILURE() << "a negative slope accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("negative_slope"), std::string::npos) << e.what();
  }
  for (const char* t : {"sigmoid", "tanh"}) {
    LayerPtr a = make_layer(t, "{}", Impl::kCpu, in);
    EXPECT_EQ(std::string(a->type()), t);
    EXPECT_EQ(a->output_shape(in), in);
    EXPECT_EQ(a->param_count(), 0u);
  }
}

TEST(ActivationLayers, PreluHasOneConstantSlopePerChannel) {
  LayerPtr p = make_layer("prelu", "{}", Impl::kCpu, Shape(1, 5, 3, 3), "pr");
  const std::vector<ParamSpec> specs = p->param_specs();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].name, "weight");  // nn.PReLU's name: checkpoints say pr.weight
  EXPECT_EQ(specs[0].dims, std::vector<int>{5});
  EXPECT_EQ(specs[0].init, Init::kConstant);
  EXPECT_EQ(specs[0].value, 0.25f) << "nn.PReLU's init";
  EXPECT_EQ(p->describe(), "5 slopes");
  EXPECT_EQ(make_layer("prelu", "{init: -0.5}", Impl::kCpu, Shape(1, 5, 3, 3))->param_specs()[0].value,
            -0.5f);
  // A flat input: one slope per feature.
  EXPECT_EQ(make_layer("prelu", "{}", Impl::kCpu, Shape(1, 16, 1, 1))->param_count(), 16u);
  // Another channel count is a shape error naming both.
  try {
    p->output_shape(Shape(2, 4, 3, 3));
    ADD_FAILURE() << "4 channels accepted by 5 slopes";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("5 slopes"), std::string::npos) << m;
    EXPECT_NE(m.find("4 channels"), std::string::npos) << m;
  }
}

// ---- the CPU layers on PyTorch's values -------------------------------------------

// Forward and backward of a parameter-free layer on x; y is the layer's
// output; dx starts as garbage (it must be overwritten).
struct Pass {
  Tensor y, dx;
};

Pass run(Layer& l, const Tensor& x, const Tensor& dy) {
  l.set_input_shape(x.shape().with_batch(1));
  Pass p{filled(x.shape(), 123.f), filled(x.shape(), 321.f)};
  if (x.device() == Device::kGPU) {
    p.y = to_gpu(p.y);
    p.dx = to_gpu(p.dx);
  }
  l.forward(x, p.y);
  l.backward(x, p.y, dy, &p.dx);
  return p;
}

TEST(ActivationLayers, CpuLayersMatchPyTorch) {
  const Shape s(1, int(kActN), 1, 1);
  const Tensor x = from(s, kActX), dy = from(s, kActDy);
  struct Case {
    const char* type;
    const char* keys;
    const double *y, *dx;
  };
  for (const Case& c : {Case{"sigmoid", "{}", kSigmoidY, kSigmoidDx},
                        Case{"tanh", "{}", kTanhY, kTanhDx},
                        Case{"leaky_relu", "{}", kLeakyDefaultY, kLeakyDefaultDx},
                        Case{"leaky_relu", "{negative_slope: 0.2}", kLeaky02Y, kLeaky02Dx}}) {
    LayerPtr l = make_layer(c.type, c.keys, Impl::kCpu, s.with_batch(1));
    const Pass p = run(*l, x, dy);
    expect_ulps(p.y, c.y, 2, std::string(c.type) + " y");
    // dx from the float y: where 1 − y (sigmoid) or 1 − y² (tanh) cancels,
    // y's rounding moves dx by up to ~2.4e−7·|dy| (test_activations.cpp).
    for (size_t i = 0; i < kActN; ++i) {
      if (ulp_distance(p.dx.data<float>()[i], float(c.dx[i])) <= 4) continue;
      EXPECT_LE(std::fabs(p.dx.data<float>()[i] - c.dx[i]), 6e-7 * std::fabs(kActDy[i]))
          << c.type << " dx[" << i << "]";
    }
  }
}

TEST(ActivationLayers, SigmoidAndTanhBackwardReadTheOutput) {
  // Given y = 0.5 whatever x is, sigmoid's dx = dy·0.25 and tanh's dy·0.75.
  const Shape s(1, 1, 1, 2);
  Tensor x = filled(s, 7.0f), y = filled(s, 0.5f), dy = filled(s, 2.0f), dx = filled(s, 0.f);
  LayerPtr sig = make_layer("sigmoid", "{}", Impl::kCpu, s);
  sig->set_input_shape(s);
  sig->backward(x, y, dy, &dx);
  EXPECT_EQ(dx.data<float>()[0], 0.5f);
  LayerPtr th = make_layer("tanh", "{}", Impl::kCpu, s);
  th->set_input_shape(s);
  th->backward(x, y, dy, &dx);
  EXPECT_EQ(dx.data<float>()[1], 1.5f);
  // A null dx is skipped.
  EXPECT_NO_THROW(th->backward(x, y, dy, nullptr));
}

TEST(ActivationLayers, CpuPreluMatchesPyTorchAndAccumulatesItsGradient) {
  const Shape s(2, 3, 2, 2);  // the golden shape
  const Tensor x = from(s, kPreluX), dy = from(s, kPreluDy);
  LayerPtr l = make_layer("prelu", "{}", Impl::kCpu, s.with_batch(1), "pr");
  std::vector<float> slope(kPreluSlope, kPreluSlope + 3), grad = {1.0f, 2.0f, 3.0f};
  l->bind({slope.data()}, {grad.data()});
  const Pass p = run(*l, x, dy);
  expect_ulps(p.y, kPreluY, 0, "prelu y");
  expect_ulps(p.dx, kPreluDx, 0, "prelu dx");
  for (int c = 0; c < 3; ++c)
    EXPECT_LE(ulp_distance(grad[size_t(c)], float(kPreluDslope[c] + (c + 1))), 1) << c;
  // Once more without dx: the gradient is added again.
  l->backward(x, p.y, dy, nullptr);
  for (int c = 0; c < 3; ++c)
    EXPECT_NEAR(grad[size_t(c)], 2 * kPreluDslope[c] + (c + 1), 1e-6) << c;
}

// ---- the CPU losses through the front door ------------------------------------------

Tensor make_acc() { return Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64); }

TEST(ActivationLayers, CpuLossesMatchPyTorch) {
  const Shape s(3, 2, 1, 2);  // the golden shape
  struct Case {
    const char* type;
    const double *p, *t, *loss, *grad;
  };
  for (const Case& c : {Case{"bce_with_logits", kLogits, kLogitTargets, kBceWithLogitsLoss,
                             kBceWithLogitsGrad},
                        Case{"bce", kProbs, kProbTargets, kBceLoss, kBceGrad},
                        Case{"l1", kL1Pred, kL1Target, kL1Loss, kL1Grad}}) {
    LossPtr l = make_loss(c.type, Impl::kCpu);
    EXPECT_EQ(std::string(l->type()), c.type);
    EXPECT_FALSE(l->is_classifier());
    EXPECT_EQ(l->target_dtype(), DType::kF32);
    Tensor acc = make_acc(), dp = filled(s, 99.f);
    acc.data<double>()[1] = 5;
    l->compute(from(s, c.p), from(s, c.t), &dp, acc);
    EXPECT_NEAR(acc.data<double>()[0] / s.n, c.loss[0], 1e-14 * c.loss[0]) << c.type;
    EXPECT_EQ(acc.data<double>()[1], 5.0) << c.type << ": acc[1] is not a reconstruction's";
    expect_ulps(dp, c.grad, 1, std::string(c.type) + " dpred");
    // The front door checks the target's shape.
    EXPECT_THROW(l->compute(from(s, c.p), Tensor::zeros(Shape(3, 2, 2, 1)), &dp, acc), Error)
        << c.type;
  }
}

TEST(ActivationLayers, CpuBceRejectsAnOutputOutsideTheUnitInterval) {
  LossPtr l = make_loss("bce", Impl::kCpu);
  Tensor p = filled(Shape(2, 1, 2, 2), 0.5f), t = filled(Shape(2, 1, 2, 2), 1.0f);
  p.data<float>()[6] = 1.25f;
  Tensor acc = make_acc();
  try {
    l->compute(p, t, nullptr, acc);
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bce: prediction 1.25 at sample 1"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(acc.data<double>()[0], 0.0) << "nothing added on an error";
}

// ---- GPU layers and losses against the CPU --------------------------------------------

const std::vector<Shape>& gpu_shapes() {
  static const std::vector<Shape> s = {Shape(1, 1, 7, 5), Shape(1, 3, 13, 11), Shape(64, 1, 7, 5),
                                       Shape(3, 5, 5, 7), Shape(5, 33, 1, 1),  Shape(2, 3, 17, 19)};
  return s;
}

// Random values with ±0, NaN and large magnitudes among them.
Tensor act_input(const Shape& s, Rng& rng) {
  Tensor x = testing::random_tensor(s, rng, -5, 5);
  const float special[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(), 60.0f, -60.0f};
  for (size_t i = 0; i < x.numel(); i += 11) x.data<float>()[i] = special[(i / 11) % 5];
  return x;
}

void expect_close_ulps(const Tensor& cpu, const Tensor& gpu, int64_t max_ulp,
                       const std::string& what) {
  ASSERT_EQ(cpu.numel(), gpu.numel()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < cpu.numel() && bad < 5; ++i)
    if (ulp_distance(cpu.data<float>()[i], gpu.data<float>()[i]) > max_ulp) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu.data<float>()[i] << ", gpu "
                    << gpu.data<float>()[i];
    }
}

TEST(GpuActivationLayers, MatchTheCpuLayers) {
  HPMC_REQUIRE_GPU();
  Rng rng(1901);
  struct Case {
    const char* type;
    const char* keys;
    int64_t fwd_ulp;
  };
  for (const Shape& s : gpu_shapes()) {
    for (const Case& c : {Case{"sigmoid", "{}", 4}, Case{"tanh", "{}", 4},
                          Case{"leaky_relu", "{negative_slope: 0.15}", 0}}) {
      const std::string what = std::string(c.type) + " " + s.str();
      const Tensor x = act_input(s, rng), dy = testing::random_tensor(s, rng);
      LayerPtr cpu = make_layer(c.type, c.keys, Impl::kCpu, s.with_batch(1));
      LayerPtr gpu = make_layer(c.type, c.keys, Impl::kIm2col, s.with_batch(1));
      EXPECT_EQ(gpu->device(), Device::kGPU);
      const Pass pc = run(*cpu, x, dy);
      // The GPU forward on its own, then its backward from the CPU's y, so
      // the backward compares bit for bit.
      gpu->set_input_shape(s.with_batch(1));
      Tensor xg = to_gpu(x), yg = to_gpu(filled(s, 123.f)), dxg = to_gpu(filled(s, 321.f));
      gpu->forward(xg, yg);
      expect_close_ulps(pc.y, to_cpu(yg), c.fwd_ulp, what + " forward");
      gpu->backward(xg, to_gpu(pc.y), to_gpu(dy), &dxg);
      expect_close_ulps(pc.dx, to_cpu(dxg), 0, what + " backward");
    }
  }
}

TEST(GpuActivationLayers, PreluMatchesTheCpuLayer) {
  HPMC_REQUIRE_GPU();
  Rng rng(1902);
  for (const Shape& s : gpu_shapes()) {
    const std::string what = "prelu " + s.str();
    // No NaN: it would make its channel's slope gradient NaN on both sides.
    Tensor x = act_input(s, rng);
    for (size_t i = 0; i < x.numel(); ++i)
      if (std::isnan(x.data<float>()[i])) x.data<float>()[i] = -3.0f;
    const Tensor dy = testing::random_tensor(s, rng);
    LayerPtr cpu = make_layer("prelu", "{}", Impl::kCpu, s.with_batch(1));
    LayerPtr gpu = make_layer("prelu", "{}", Impl::kIm2col, s.with_batch(1));
    const size_t c = size_t(s.c);
    Tensor slope = testing::random_tensor(Shape(int(c), 1, 1, 1), rng, -0.5, 0.9);
    Tensor grad = testing::random_tensor(Shape(int(c), 1, 1, 1), rng);
    Tensor slope_g = to_gpu(slope), grad_g = to_gpu(grad);
    cpu->bind({slope.data<float>()}, {grad.data<float>()});
    gpu->bind({slope_g.data<float>()}, {grad_g.data<float>()});
    const Pass pc = run(*cpu, x, dy);
    const Pass pg = run(*gpu, to_gpu(x), to_gpu(dy));
    expect_close_ulps(pc.y, to_cpu(pg.y), 0, what + " forward");
    expect_close_ulps(pc.dx, to_cpu(pg.dx), 0, what + " dx");
    // Planes below 256 elements are summed in the CPU's order (bit for bit),
    // larger ones by a block's tree.
    expect_close_ulps(grad, to_cpu(grad_g), size_t(s.h) * s.w < 256 ? 0 : 1, what + " slope grad");
  }
}

struct LossOut {
  double acc0, acc1;
  Tensor dp;
};

LossOut run_loss(Loss& l, const Tensor& p, const Tensor& t) {
  const bool gpu = l.device() == Device::kGPU;
  Tensor acc = make_acc();
  acc.data<double>()[0] = 0.25;
  acc.data<double>()[1] = 3;
  Tensor dp = filled(p.shape(), 99.f);
  if (gpu) {
    Tensor pg = to_gpu(p), tg = to_gpu(t), accg = to_gpu(acc), dpg = to_gpu(dp);
    l.compute(pg, tg, &dpg, accg);
    l.check_status();
    acc = to_cpu(accg);
    dp = to_cpu(dpg);
  } else {
    l.compute(p, t, &dp, acc);
  }
  return {acc.data<double>()[0], acc.data<double>()[1], dp};
}

TEST(GpuActivationLayers, LossesMatchTheCpuLosses) {
  HPMC_REQUIRE_GPU();
  Rng rng(1903);
  const std::vector<Shape> shapes = {Shape(1, 1, 1, 1), Shape(1, 3, 13, 11), Shape(5, 1, 28, 28),
                                     Shape(3, 3, 32, 32), Shape(7, 10, 1, 1)};
  for (const char* type : {"bce_with_logits", "bce", "l1"}) {
    LossPtr cpu = make_loss(type, Impl::kCpu), gpu = make_loss(type, Impl::kIm2col);
    EXPECT_EQ(gpu->device(), Device::kGPU);
    for (const Shape& s : shapes) {
      const std::string what = std::string(type) + " " + s.str();
      const bool probs = std::string(type) == "bce";
      const Tensor p = testing::random_tensor(s, rng, probs ? 0.f : -4.f, probs ? 1.f : 4.f);
      const Tensor t = testing::random_tensor(s, rng, 0, 1);
      const LossOut c = run_loss(*cpu, p, t), g = run_loss(*gpu, p, t);
      EXPECT_NEAR(g.acc0, c.acc0, 1e-12 * std::fabs(c.acc0)) << what;
      EXPECT_EQ(g.acc1, 3.0) << what;
      expect_close_ulps(c.dp, g.dp, std::string(type) == "bce_with_logits" ? 1 : 0, what + " dpred");
    }
  }
}

TEST(GpuActivationLayers, BceBadTargetIsReportedByCheckStatusWithTheCpuMessage) {
  HPMC_REQUIRE_GPU();
  const Shape s(3, 1, 4, 4);
  Tensor p = filled(s, 0.5f), t = filled(s, 0.25f);
  t.data<float>()[16 + 5] = -0.5f;  // sample 1, element 5
  std::string cpu_msg;
  try {
    Tensor acc = make_acc();
    make_loss("bce", Impl::kCpu)->compute(p, t, nullptr, acc);
  } catch (const DataError& e) {
    cpu_msg = e.what();
  }
  ASSERT_FALSE(cpu_msg.empty());
  LossPtr gpu = make_loss("bce", Impl::kIm2col);
  Tensor acc = to_gpu(make_acc());
  Tensor pg = to_gpu(p), tg = to_gpu(t);
  gpu->compute(pg, tg, nullptr, acc);
  try {
    gpu->check_status();
    ADD_FAILURE() << "no report";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.substr(0, cpu_msg.size()), cpu_msg) << m;
    EXPECT_NE(m.find("found on the GPU"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(gpu->check_status()) << "reported twice";
  EXPECT_TRUE(std::isnan(to_cpu(acc).data<double>()[0]));
}

// ---- tiny models from YAML that train -------------------------------------------------

// Conv autoencoders on 1×12×12 "images" in [0, 1] that use every new layer
// and loss. SGD with momentum; losses of the first and last steps.
const char* kModels[] = {
    R"(name: ae_bce
data: {format: mnist}
model:
  loss: bce
  layers:
    - {name: c1, type: conv2d, out_channels: 4, kernel: 3, padding: 1}
    - {name: a1, type: prelu}
    - {name: p1, type: maxpool2d}
    - {name: c2, type: conv2d, out_channels: 4, kernel: 3, padding: 1}
    - {name: a2, type: tanh}
    - {name: u1, type: upsample2d}
    - {name: c3, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
    - {name: out, type: sigmoid}
)",
    R"(name: ae_logits
data: {format: mnist}
model:
  loss: bce_with_logits
  layers:
    - {name: c1, type: conv2d, out_channels: 5, kernel: 3, padding: 1}
    - {name: a1, type: leaky_relu, negative_slope: 0.1}
    - {name: c2, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
)",
    R"(name: ae_l1
data: {format: mnist}
model:
  loss: l1
  layers:
    - {name: c1, type: conv2d, out_channels: 3, kernel: 3, padding: 1}
    - {name: a1, type: leaky_relu}
    - {name: c2, type: conv2d, out_channels: 3, kernel: 3, padding: 1}
    - {name: a2, type: prelu, init: 0.1}
    - {name: c3, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
)"};

constexpr int kSteps = 25;

// Smooth images in [0, 1]: blobs, so an autoencoder can learn something.
Tensor images(int n) {
  Tensor x = Tensor::empty(Shape(n, 1, 12, 12));
  for (int s = 0; s < n; ++s)
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 12; ++j)
        x.data<float>()[(size_t(s) * 12 + i) * 12 + j] =
            float(0.5 + 0.45 * std::sin(0.5 * i + 0.9 * s) * std::cos(0.4 * j - 0.3 * s));
  return x;
}

std::vector<double> train(const char* yaml, Impl impl) {
  Config cfg = parse_config(yaml, "tiny.yaml");
  auto m = Model::build(cfg, impl, Shape(1, 1, 12, 12), 10);
  m->params().init(7);
  const int n = 6;
  m->allocate(n);
  const bool gpu = m->device() == Device::kGPU;
  Tensor x = gpu ? to_gpu(images(n)) : images(n);
  Tensor acc = make_acc();
  if (gpu) acc = to_gpu(acc);
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  std::unique_ptr<Optimizer> opt = make_optimizer(sgd, m->params());
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    m->set_mode(true, step);
    m->params().zero_grads();
    acc.fill_zero();
    const Tensor& pred = m->forward(x);
    Tensor& dpred = m->output_grad();
    dpred.set_batch(n);
    m->loss().compute(pred, x, &dpred, acc);
    m->backward(x, dpred);
    opt->step(sgd.lr);
    m->loss().check_status();
    const Tensor a = gpu ? to_cpu(acc) : acc;
    losses.push_back(a.data<double>()[0] / n);
  }
  return losses;
}

// The lowest loss the model could reach: 0 for l1; for bce the targets'
// mean entropy −(t log t + (1 − t) log(1 − t)), which no output beats.
double loss_floor(const char* yaml) {
  if (std::string(yaml).find("loss: bce") == std::string::npos) return 0;
  const Tensor x = images(6);
  double h = 0;
  for (size_t i = 0; i < x.numel(); ++i) {
    const double t = x.data<float>()[i];
    h -= t * std::log(t) + (1 - t) * std::log(1 - t);
  }
  return h / double(x.numel());
}

std::string model_name(const char* yaml) {
  const std::string s(yaml);
  return s.substr(6, s.find('\n') - 6);
}

TEST(ActivationLayers, TinyModelsFromYamlTrain) {
  for (const char* yaml : kModels) {
    const std::vector<double> l = train(yaml, Impl::kCpu);
    const std::string name = model_name(yaml);
    const double floor = loss_floor(yaml);
    for (double v : l) ASSERT_TRUE(std::isfinite(v)) << name;
    // The distance to the floor falls below 60% of where it started.
    EXPECT_LT(l.back() - floor, 0.6 * (l.front() - floor))
        << name << ": loss " << l.front() << " -> " << l.back() << ", floor " << floor;
    std::cout << "  " << name << ": loss " << l.front() << " -> " << l.back() << " in " << kSteps
              << " steps (floor " << floor << ")\n";
  }
}

TEST(GpuActivationLayers, TinyModelsFromYamlTrainAndTrackTheCpu) {
  HPMC_REQUIRE_GPU();
  for (const char* yaml : kModels) {
    const std::vector<double> c = train(yaml, Impl::kCpu);
    for (Impl impl : {Impl::kNaive, Impl::kTiled, Impl::kIm2col}) {
      const std::vector<double> g = train(yaml, impl);
      const std::string what = model_name(yaml) + " " + impl_name(impl);
      const double floor = loss_floor(yaml);
      EXPECT_LT(g.back() - floor, 0.6 * (g.front() - floor)) << what;
      // Float32 rounding differs (conv kernels, expf/tanhf), and 25 SGD
      // steps with momentum amplify it a little; a wrong layer is far off.
      for (size_t i = 0; i < c.size(); ++i)
        EXPECT_NEAR(g[i], c[i], 1e-3 * std::fabs(c[i]) + 1e-6) << what << " step " << i;
    }
  }
}

}  // namespace
}  // namespace hpmc
