// The GPU kernels of the activations (layers/gpu/activation_kernels.h) and
// of the element-wise losses (layers/gpu/elementwise_loss_kernels.h), called
// directly on device buffers (CUDA builds only: tests/CMakeLists.txt leaves
// this file out of a build without CUDA), against the CPU ops on fresh random
// inputs of odd sizes (1, 3, 5, 7, sizes that are no multiple of 4 or of a
// block, several blocks), with ±0, NaN and large magnitudes among them.
//   activations  leaky_relu and prelu forward and dx, and every backward of
//                sigmoid and tanh given the same y: bit for bit (any NaN
//                matching any NaN: CUDA returns its canonical NaN). sigmoid and
//                tanh forward: within kTransUlp ulp (CUDA expf/tanhf vs
//                glibc's). Both the float4 path (aligned) and the scalar path
//                (misaligned by one float); guard zones around every output
//                must come back untouched. prelu's slope gradient: bit for
//                bit for planes below 256 elements (one thread sums a plane
//                in the CPU's order), within 1 ulp above (a block's tree);
//                it accumulates; two runs give the same bits.
//   losses       acc[0] to 1e−12 relative (double sums in another order),
//                acc[1] untouched; dpred bit for bit for bce and l1, within
//                1 ulp for bce_with_logits (device exp in double); bce's bad
//                inputs poison acc, zero their dpred and are reported (the
//                first one, sticky until taken) with the CPU's message.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "dev_array.h"
#include "gpu_testing.h"
#include "layers/cpu/activation_ops.h"
#include "layers/cpu/bce_loss_ops.h"
#include "layers/cpu/l1_loss_ops.h"
#include "layers/gpu/activation_kernels.h"
#include "layers/gpu/elementwise_loss_kernels.h"
#include "testing.h"

namespace hpmc {
namespace {

using namespace hpmc::testing;  // dev_array.h, ulp_distance

// sigmoid and tanh forward: CUDA's expf/tanhf (≤ 2 ulp each) against glibc's
// (≤ 1-2 ulp), then the same divisions: a few ulp apart at worst.
constexpr int64_t kTransUlp = 4;
constexpr float kUnwritten = 777.0f;  // outputs' payload before a kernel runs

const std::vector<size_t>& act_sizes() {
  static const std::vector<size_t> sizes = {1, 3, 5, 7, 31, 1001, 4099, 65537, (size_t(1) << 20) + 3};
  return sizes;
}

// U(−6, 6) with ±0, NaN, ±100, ±1000 and tiny values sprinkled in.
std::vector<float> act_inputs(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(-6.f, 6.f);
  const float special[] = {0.0f, -0.0f, kNaN, 100.0f, -100.0f, 1000.0f, -1000.0f, 1e-30f, -20.0f};
  for (size_t i = 0; i < n; i += 13) v[i] = special[(i / 13) % 9];
  return v;
}

// Runs a GPU element-wise function from `ins` into a fresh output array and
// returns the output; checks the guards.
template <typename F>
std::vector<float> on_gpu(const std::vector<std::vector<float>>& ins, size_t misalign, F f,
                          const std::string& what) {
  std::vector<std::unique_ptr<DevArray>> d;
  for (const auto& v : ins) d.push_back(input(v, misalign));
  DevArray out(ins[0].size(), misalign);
  out.upload(std::vector<float>(ins[0].size(), kUnwritten), kGuard);
  f(d, out.ptr());
  finish(what.c_str());
  EXPECT_TRUE(out.guards_intact(kGuard)) << what;
  return out.payload();
}

// ulp distance at most max_ulp everywhere (NaN where the CPU has NaN);
// returns the largest.
int64_t expect_ulps(const std::vector<float>& cpu, const std::vector<float>& gpu, int64_t max_ulp,
                    const std::string& what) {
  int64_t worst = 0;
  size_t reported = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const int64_t d = ulp_distance(cpu[i], gpu[i]);
    worst = std::max(worst, d);
    if (d > max_ulp && reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << ", gpu " << gpu[i] << " (" << d
                    << " ulp)";
  }
  return worst;
}

// The same bits, or both NaN: arithmetic on a NaN gives the CPU's operand
// back (its payload and sign) but CUDA's canonical NaN.
void expect_same_bits(const std::vector<float>& cpu, const std::vector<float>& gpu,
                      const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  size_t reported = 0;
  for (size_t i = 0; i < cpu.size(); ++i)
    if (!same_bits(cpu[i], gpu[i]) && !(std::isnan(cpu[i]) && std::isnan(gpu[i])) &&
        reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << ", gpu " << gpu[i];
}

// ---- sigmoid, tanh, leaky_relu ----------------------------------------------------

TEST(GpuActivations, ElementwiseMatchCpu) {
  HPMC_REQUIRE_GPU();
  Rng rng(1801);
  int64_t worst_sigmoid = 0, worst_tanh = 0;
  for (size_t n : act_sizes()) {
    for (size_t misalign : {size_t(0), size_t(1)}) {
      const std::string at = " n=" + std::to_string(n) + " misalign=" + std::to_string(misalign);
      const std::vector<float> x = act_inputs(n, rng), dy = random_floats(n, rng);
      std::vector<float> y(n), dx(n);
      using Arrays = std::vector<std::unique_ptr<DevArray>>;

      sigmoid_forward(x.data(), y.data(), n);
      worst_sigmoid = std::max(
          worst_sigmoid,
          expect_ulps(y, on_gpu({x}, misalign, [&](Arrays& d, float* o) {
            gpu::sigmoid_forward(d[0]->ptr(), o, n);
          }, "sigmoid forward" + at), kTransUlp, "sigmoid forward" + at));
      sigmoid_backward(y.data(), dy.data(), dx.data(), n);
      expect_same_bits(dx, on_gpu({y, dy}, misalign, [&](Arrays& d, float* o) {
        gpu::sigmoid_backward(d[0]->ptr(), d[1]->ptr(), o, n);
      }, "sigmoid backward" + at), "sigmoid backward" + at);

      tanh_forward(x.data(), y.data(), n);
      worst_tanh = std::max(
          worst_tanh, expect_ulps(y, on_gpu({x}, misalign, [&](Arrays& d, float* o) {
            gpu::tanh_forward(d[0]->ptr(), o, n);
          }, "tanh forward" + at), kTransUlp, "tanh forward" + at));
      tanh_backward(y.data(), dy.data(), dx.data(), n);
      expect_same_bits(dx, on_gpu({y, dy}, misalign, [&](Arrays& d, float* o) {
        gpu::tanh_backward(d[0]->ptr(), d[1]->ptr(), o, n);
      }, "tanh backward" + at), "tanh backward" + at);

      for (float slope : {0.01f, 0.2f, -0.3f}) {
        const std::string s = " slope " + std::to_string(slope) + at;
        leaky_relu_forward(x.data(), y.data(), n, slope);
        expect_same_bits(y, on_gpu({x}, misalign, [&](Arrays& d, float* o) {
          gpu::leaky_relu_forward(d[0]->ptr(), o, n, slope);
        }, "leaky_relu forward" + s), "leaky_relu forward" + s);
        leaky_relu_backward(x.data(), dy.data(), dx.data(), n, slope);
        expect_same_bits(dx, on_gpu({x, dy}, misalign, [&](Arrays& d, float* o) {
          gpu::leaky_relu_backward(d[0]->ptr(), d[1]->ptr(), o, n, slope);
        }, "leaky_relu backward" + s), "leaky_relu backward" + s);
      }
    }
  }
  std::cout << "  sigmoid forward: at most " << worst_sigmoid << " ulp from the CPU; tanh: "
            << worst_tanh << " ulp\n";
}

TEST(GpuActivations, NullDxAndEmptyInputsWriteNothing) {
  HPMC_REQUIRE_GPU();
  Rng rng(1802);
  const std::vector<float> x = random_floats(9, rng);
  auto dx = input(x);  // guards NaN; payload must stay x
  DevArray out(9);
  out.upload(std::vector<float>(9, kUnwritten), kGuard);
  gpu::sigmoid_forward(dx->ptr(), out.ptr(), 0);
  gpu::sigmoid_backward(dx->ptr(), dx->ptr(), nullptr, 9);
  gpu::leaky_relu_backward(dx->ptr(), dx->ptr(), nullptr, 9, 0.1f);
  gpu::prelu_forward(dx->ptr(), dx->ptr(), out.ptr(), 0, 3, 3);
  gpu::prelu_forward(dx->ptr(), dx->ptr(), out.ptr(), 3, 3, 0);
  finish("empty activations");
  EXPECT_EQ(out.payload(), std::vector<float>(9, kUnwritten));
  EXPECT_TRUE(out.guards_intact(kGuard));
}

// ---- prelu --------------------------------------------------------------------------

struct PreluCase {
  int n, c;
  size_t plane;
};

std::string str_case(const PreluCase& k) {
  return "prelu n=" + std::to_string(k.n) + " c=" + std::to_string(k.c) +
         " plane=" + std::to_string(k.plane);
}

TEST(GpuActivations, PreluMatchesCpu) {
  HPMC_REQUIRE_GPU();
  Rng rng(1803);
  // Planes below 256 take the thread-per-plane kernel (bit for bit), from
  // 256 on the block-per-plane kernel.
  const PreluCase cases[] = {{1, 1, 1},   {1, 3, 35},   {2, 5, 1},    {300, 7, 1},
                             {5, 1, 255}, {3, 3, 256},  {2, 5, 323},  {64, 3, 143},
                             {1, 1, 70001}, {7, 5, 1023}};
  for (const PreluCase& k : cases) {
    const std::string what = str_case(k);
    const size_t count = size_t(k.n) * size_t(k.c) * k.plane;
    // No NaN here: one would make its channel's slope gradient NaN and hide
    // the sums this test compares (test_activations.cpp covers NaN).
    std::vector<float> x = act_inputs(count, rng);
    for (auto& v : x)
      if (std::isnan(v)) v = -3.0f;
    const std::vector<float> dy = random_floats(count, rng);
    std::vector<float> a(size_t(k.c));
    for (auto& v : a) v = rng.uniform(-0.5f, 0.9f);
    a[0] = 0.0f;
    std::vector<float> da0(size_t(k.c));
    for (auto& v : da0) v = rng.uniform(-1.f, 1.f);

    std::vector<float> y(count), dx(count), da = da0;
    prelu_forward(x.data(), a.data(), y.data(), k.n, k.c, k.plane);
    prelu_backward(x.data(), a.data(), dy.data(), dx.data(), da.data(), k.n, k.c, k.plane);

    auto dxg = input(x), dyg = input(dy), ag = input(a);
    DevArray yg(count), dxo(count), dag(size_t(k.c));
    yg.upload(std::vector<float>(count, kUnwritten), kGuard);
    dxo.upload(std::vector<float>(count, kUnwritten), kGuard);
    dag.upload(da0, kGuard);
    auto ws = gpu::allocate_shared(gpu::prelu_backward_workspace_bytes(k.n, k.c));
    gpu::prelu_forward(dxg->ptr(), ag->ptr(), yg.ptr(), k.n, k.c, k.plane);
    gpu::prelu_backward(dxg->ptr(), ag->ptr(), dyg->ptr(), dxo.ptr(), dag.ptr(), k.n, k.c, k.plane,
                        ws.get());
    finish(what.c_str());
    EXPECT_TRUE(yg.guards_intact(kGuard)) << what;
    EXPECT_TRUE(dxo.guards_intact(kGuard)) << what;
    EXPECT_TRUE(dag.guards_intact(kGuard)) << what;
    expect_same_bits(y, yg.payload(), what + " forward");
    expect_same_bits(dx, dxo.payload(), what + " dx");
    const std::vector<float> dag1 = dag.payload();
    if (k.plane < 256)
      expect_same_bits(da, dag1, what + " dslope");
    else
      expect_ulps(da, dag1, 1, what + " dslope");

    // Again without dx: the slope gradient accumulates once more, to the
    // same bits as the CPU's second pass, and two GPU runs agree.
    prelu_backward(x.data(), a.data(), dy.data(), static_cast<float*>(nullptr), da.data(), k.n,
                   k.c, k.plane);
    gpu::prelu_backward(dxg->ptr(), ag->ptr(), dyg->ptr(), nullptr, dag.ptr(), k.n, k.c, k.plane,
                        ws.get());
    finish(what.c_str());
    const std::vector<float> dag2 = dag.payload();
    if (k.plane < 256) expect_same_bits(da, dag2, what + " dslope, second pass");
    else expect_ulps(da, dag2, 2, what + " dslope, second pass");
    DevArray dag_b(size_t(k.c));
    dag_b.upload(da0, kGuard);
    gpu::prelu_backward(dxg->ptr(), ag->ptr(), dyg->ptr(), nullptr, dag_b.ptr(), k.n, k.c,
                        k.plane, ws.get());
    finish(what.c_str());
    expect_same_bits(dag1, dag_b.payload(), what + " dslope, a second run");
  }
}

// ---- losses ---------------------------------------------------------------------------

using gpu::ElementwiseLoss;

const char* loss_name(ElementwiseLoss k) {
  return k == ElementwiseLoss::kBceWithLogits ? "bce_with_logits"
         : k == ElementwiseLoss::kBce         ? "bce"
                                              : "l1";
}

double cpu_loss(ElementwiseLoss k, const std::vector<float>& p, const std::vector<float>& t,
                float* dp, int n, size_t per) {
  switch (k) {
    case ElementwiseLoss::kBceWithLogits: return bce_with_logits_loss(p.data(), t.data(), dp, n, per);
    case ElementwiseLoss::kBce: return bce_loss(p.data(), t.data(), dp, n, per);
    case ElementwiseLoss::kL1: return l1_loss(p.data(), t.data(), dp, n, per);
  }
  return 0;
}

// Inputs each loss accepts, with its edge values among them.
void loss_inputs(ElementwiseLoss k, size_t count, Rng& rng, std::vector<float>& p,
                 std::vector<float>& t) {
  p.resize(count);
  t.resize(count);
  for (auto& v : t) v = rng.uniform01();
  for (size_t i = 0; i < count; i += 11) t[i] = (i / 11) % 2 ? 1.0f : 0.0f;
  for (size_t i = 0; i < count; ++i) {
    switch (k) {
      case ElementwiseLoss::kBceWithLogits:
        p[i] = i % 17 == 3 ? (i % 2 ? 1000.0f : -1000.0f) : rng.uniform(-8.f, 8.f);
        break;
      case ElementwiseLoss::kBce:
        p[i] = i % 13 == 5 ? float(i % 2) : rng.uniform01();
        break;
      case ElementwiseLoss::kL1:
        p[i] = i % 7 == 1 ? t[i] : rng.uniform(-1.f, 1.f);
        break;
    }
  }
}

struct GpuLossRun {
  std::vector<double> acc;
  std::vector<float> dp;
};

struct GpuLoss {
  Tensor ws, status;
  explicit GpuLoss(int n)
      : ws(Tensor::empty(Shape(int((gpu::elementwise_loss_workspace_bytes(n) + 7) / 8) + 1, 1, 1, 1),
                         DType::kF64, Device::kGPU)),
        status(Tensor::zeros(Shape(gpu::kLossStatusInts, 1, 1, 1), DType::kI32, Device::kGPU)) {}

  // acc starts at (1.5, 7); dp (if with_dp) at NaN.
  GpuLossRun run(ElementwiseLoss k, const std::vector<float>& p, const std::vector<float>& t,
                 int n, size_t per, bool with_dp = true, Tensor* acc_in = nullptr) {
    // Flat device copies of all of p and t (n · per may be less, or 0).
    const Shape s(int(p.size()), 1, 1, 1);
    Tensor pg = Tensor::empty(s, DType::kF32, Device::kGPU),
           tg = Tensor::empty(s, DType::kF32, Device::kGPU),
           dp = Tensor::empty(s, DType::kF32, Device::kGPU);
    gpu::copy(pg.data<float>(), Device::kGPU, p.data(), Device::kCPU, p.size() * 4);
    gpu::copy(tg.data<float>(), Device::kGPU, t.data(), Device::kCPU, t.size() * 4);
    std::vector<float> nan(p.size(), kNaN);
    gpu::copy(dp.data<float>(), Device::kGPU, nan.data(), Device::kCPU, nan.size() * 4);
    Tensor acc_local;
    if (!acc_in) {
      Tensor h = Tensor::empty(Shape(2, 1, 1, 1), DType::kF64);
      h.data<double>()[0] = 1.5;
      h.data<double>()[1] = 7.0;
      acc_local = to_gpu(h);
      acc_in = &acc_local;
    }
    gpu::elementwise_loss(k, pg.data<float>(), tg.data<float>(),
                          with_dp ? dp.data<float>() : nullptr, n, per, ws.data<double>(),
                          acc_in->data<double>(), status.data<int32_t>());
    finish(loss_name(k));
    GpuLossRun r;
    Tensor acc_h = to_cpu(*acc_in);
    r.acc = {acc_h.data<double>()[0], acc_h.data<double>()[1]};
    Tensor dp_h = to_cpu(dp);
    r.dp.assign(dp_h.data<float>(), dp_h.data<float>() + p.size());
    return r;
  }
};

TEST(GpuElementwiseLosses, MatchCpu) {
  HPMC_REQUIRE_GPU();
  Rng rng(1804);
  const Shape shapes[] = {Shape(1, 1, 1, 1),  Shape(1, 3, 5, 7),    Shape(3, 1, 28, 28),
                          Shape(5, 3, 13, 11), Shape(2, 1000, 1, 1), Shape(64, 1, 28, 28),
                          Shape(7, 3, 32, 32)};
  for (ElementwiseLoss k :
       {ElementwiseLoss::kBceWithLogits, ElementwiseLoss::kBce, ElementwiseLoss::kL1}) {
    int64_t worst = 0;
    for (const Shape& s : shapes) {
      const std::string what = std::string(loss_name(k)) + " " + s.str();
      std::vector<float> p, t;
      loss_inputs(k, s.count(), rng, p, t);
      std::vector<float> dp(s.count());
      const double sum = cpu_loss(k, p, t, dp.data(), s.n, s.per_sample());
      GpuLoss g(s.n);
      const GpuLossRun r = g.run(k, p, t, s.n, s.per_sample());
      EXPECT_NEAR(r.acc[0], 1.5 + sum, 1e-12 * (1.5 + std::fabs(sum))) << what;
      EXPECT_EQ(r.acc[1], 7.0) << what << ": acc[1] must be left alone";
      if (k == ElementwiseLoss::kBceWithLogits)
        worst = std::max(worst, expect_ulps(dp, r.dp, 1, what + " dpred"));
      else
        expect_same_bits(dp, r.dp, what + " dpred");
      // Bit-identical when run again; a null dpred adds the same loss.
      const GpuLossRun again = g.run(k, p, t, s.n, s.per_sample());
      EXPECT_EQ(again.acc, r.acc) << what << ": two runs differ";
      expect_same_bits(r.dp, again.dp, what + " dpred, a second run");
      const GpuLossRun no_dp = g.run(k, p, t, s.n, s.per_sample(), false);
      EXPECT_EQ(no_dp.acc, r.acc) << what << ": a null dpred changes the loss";
      EXPECT_TRUE(std::all_of(no_dp.dp.begin(), no_dp.dp.end(), [](float v) { return std::isnan(v); }))
          << what << ": a null dpred still wrote";
      EXPECT_FALSE(gpu::take_loss_status(g.status.data<int32_t>()).bad) << what;
    }
    if (k == ElementwiseLoss::kBceWithLogits)
      std::cout << "  bce_with_logits dpred: at most " << worst << " ulp from the CPU\n";
  }
}

TEST(GpuElementwiseLosses, AccumulatesAndEmptyBatchesAddNothing) {
  HPMC_REQUIRE_GPU();
  Rng rng(1805);
  std::vector<float> p, t;
  loss_inputs(ElementwiseLoss::kL1, 30, rng, p, t);
  GpuLoss g(3);
  Tensor h = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64);
  Tensor acc = to_gpu(h);
  const double one = g.run(ElementwiseLoss::kL1, p, t, 3, 10, true, &acc).acc[0];
  const double two = g.run(ElementwiseLoss::kL1, p, t, 3, 10, true, &acc).acc[0];
  EXPECT_DOUBLE_EQ(two, 2 * one);
  EXPECT_EQ(g.run(ElementwiseLoss::kL1, p, t, 0, 10, true, &acc).acc[0], two);
  EXPECT_EQ(g.run(ElementwiseLoss::kL1, p, t, 3, 0, true, &acc).acc[0], two);
}

TEST(GpuElementwiseLosses, NaNPredictionsGiveANaNLoss) {
  HPMC_REQUIRE_GPU();
  const std::vector<float> p = {0.5f, kNaN, 0.25f}, t = {1.0f, 0.0f, 0.5f};
  for (ElementwiseLoss k :
       {ElementwiseLoss::kBceWithLogits, ElementwiseLoss::kBce, ElementwiseLoss::kL1}) {
    GpuLoss g(1);
    std::vector<float> dp(3);
    cpu_loss(k, p, t, dp.data(), 1, 3);
    const GpuLossRun r = g.run(k, p, t, 1, 3);
    EXPECT_TRUE(std::isnan(r.acc[0])) << loss_name(k);
    expect_same_bits(dp, r.dp, std::string(loss_name(k)) + " NaN dpred");
    EXPECT_FALSE(gpu::take_loss_status(g.status.data<int32_t>()).bad)
        << loss_name(k) << ": a NaN prediction is not an input error";
  }
}

TEST(GpuElementwiseLosses, BceBadInputsPoisonTheLossAndAreReportedOnce) {
  HPMC_REQUIRE_GPU();
  Rng rng(1806);
  const int n = 5;
  const size_t per = 300;
  std::vector<float> p, t;
  loss_inputs(ElementwiseLoss::kBce, n * per, rng, p, t);
  p[3 * per + 7] = -0.5f;   // sample 3: a prediction
  t[2 * per + 299] = 1.5f;  // sample 2, the last element: a target — the first bad one
  p[2 * per + 299] = 2.0f;
  GpuLoss g(n);
  const GpuLossRun r = g.run(ElementwiseLoss::kBce, p, t, n, per);
  EXPECT_TRUE(std::isnan(r.acc[0]));
  EXPECT_EQ(r.dp[3 * per + 7], 0.0f);
  EXPECT_EQ(r.dp[2 * per + 299], 0.0f);
  EXPECT_FALSE(std::isnan(r.dp[0]));

  gpu::LossStatus st = gpu::take_loss_status(g.status.data<int32_t>());
  ASSERT_TRUE(st.bad);
  EXPECT_EQ(st.sample, 2);
  EXPECT_EQ(st.element, size_t(299));
  EXPECT_TRUE(st.is_target);
  EXPECT_EQ(st.value, 1.5f);
  // The CPU's message for the same input, found on the GPU.
  try {
    bce_range_error(st.sample, st.element, st.is_target, st.value, " (found on the GPU)");
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("bce: target 1.5 at sample 2 of the batch, element 299"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(gpu::take_loss_status(g.status.data<int32_t>()).bad) << "reported twice";

  // A pending report is not overwritten by a later batch's.
  std::vector<float> p2 = p, t2 = t;
  t2[2 * per + 299] = 0.5f;
  p2[2 * per + 299] = 0.5f;  // now the first bad one is sample 3's prediction
  g.run(ElementwiseLoss::kBce, p2, t2, n, per);
  g.run(ElementwiseLoss::kBce, p, t, n, per);
  st = gpu::take_loss_status(g.status.data<int32_t>());
  ASSERT_TRUE(st.bad);
  EXPECT_EQ(st.sample, 3);
  EXPECT_EQ(st.element, size_t(7));
  EXPECT_FALSE(st.is_target);
  EXPECT_EQ(st.value, -0.5f);

  // bce_with_logits and l1 accept any value and leave the status alone.
  g.run(ElementwiseLoss::kBceWithLogits, p, t, n, per);
  g.run(ElementwiseLoss::kL1, p, t, n, per);
  EXPECT_FALSE(gpu::take_loss_status(g.status.data<int32_t>()).bad);
}

}  // namespace
}  // namespace hpmc
