// The parameter-free GPU layers (ReLU, MaxPool2D, UpSample2D, Flatten), the
// GPU losses (MSE, softmax cross-entropy) and the training kernels (SGD,
// batch gather), each against its CPU counterpart on fresh random inputs.
// Every test starts with HPMC_REQUIRE_GPU(), so without CUDA or a device they
// skip with the reason.
//
// Tolerances:
//   * element-wise layers (forward and backward) and gather_batch: BIT-equal.
//     Each output element is computed by the same float operations in the
//     same order as on the CPU (maxpool backward gathers the CPU's scatter
//     terms in the CPU's order; upsample backward sums its block in the CPU's
//     order), and none of them can be contracted into an FMA.
//   * MSE dpred: bit-equal too (gscale · (p − t) on both sides).
//   * loss values (acc[0]) and cross-entropy dpred: ≤ 1e-6 relative. The GPU
//     sums per-sample losses (and MSE's squares) in double in a tree, not
//     serially, and uses the device's double exp/log, which may differ from
//     glibc's in the last bit; both effects are ~1e-15 relative in double,
//     and can flip the last bit (6e-8 relative) of a softmax rounded to
//     float. 1e-6 leaves ample headroom while any real bug (a wrong term, a
//     missing sample, a wrong scale) is off by far more.
//   * correct counts (acc[1]): exact (integers, from identical comparisons).
//   * SGD (factory.h's gpu::sgd_step): bit-equal with a host reference that
//     rounds every operation (the GPU kernel does, with _rn intrinsics). The
//     optimizers' own kernels against the CPU are in test_gpu_optim.cpp.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "gpu_testing.h"
#include "layers/cpu/flatten.h"
#include "layers/cpu/linear.h"
#include "layers/cpu/maxpool2d.h"
#include "layers/cpu/mse_loss.h"
#include "layers/cpu/relu.h"
#include "layers/cpu/softmax_ce_loss.h"
#include "layers/cpu/upsample2d.h"
#include "layers/gpu/factory.h"
#include "model/registry.h"
#include "model/params.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::to_cpu;
using testing::to_gpu;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- helpers ------------------------------------------------------------------------

// The GPU maxpool2d layer through the registry, as a config would build it.
LayerPtr gpu_maxpool(const std::string& name, const MaxPool2dConfig& cfg) {
  return make_layer("maxpool2d",
                    str("{kernel: ", cfg.kernel, cfg.stride ? str(", stride: ", cfg.stride) : "", "}"),
                    Impl::kIm2col, Shape(), name);
}

Tensor filled(const Shape& s, float v) {
  Tensor t = Tensor::empty(s);
  std::fill(t.data<float>(), t.data<float>() + t.numel(), v);
  return t;
}

// A GPU tensor whose every element is NaN, so an element a kernel forgets to
// write shows up.
Tensor gpu_nan(const Shape& s) { return to_gpu(filled(s, kNaN)); }

// Integer values in [-2, 2]: plenty of ties in every pooling window.
Tensor integer_tensor(const Shape& s, Rng& rng) {
  Tensor t = Tensor::empty(s);
  for (size_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(int(rng.below(5)) - 2);
  return t;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

uint64_t bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

// Both host float tensors of one shape, equal bit for bit.
void expect_bit_equal(const Tensor& want, const Tensor& got, const std::string& what) {
  ASSERT_TRUE(want.shape() == got.shape())
      << what << ": shape " << got.shape().str() << ", expected " << want.shape().str();
  const float* a = want.data<float>();
  const float* b = got.data<float>();
  size_t mismatches = 0, first = 0;
  for (size_t i = 0; i < want.numel(); ++i)
    if (bits(a[i]) != bits(b[i]) && mismatches++ == 0) first = i;
  EXPECT_EQ(mismatches, 0u) << what << ": " << mismatches << " of " << want.numel()
                            << " elements differ; first at " << first << ": cpu " << a[first]
                            << ", gpu " << b[first];
}

size_t count_nan(const Tensor& t) {
  size_t n = 0;
  for (size_t i = 0; i < t.numel(); ++i) n += std::isnan(t.data<float>()[i]) ? 1 : 0;
  return n;
}

// |a − b| ≤ rel · max(|a|, |b|) + abs_floor.
void expect_close(double want, double got, double rel, const std::string& what,
                  double abs_floor = 0.0) {
  EXPECT_LE(std::fabs(want - got), rel * std::max(std::fabs(want), std::fabs(got)) + abs_floor)
      << what << ": cpu " << want << ", gpu " << got;
}

void expect_all_close(const Tensor& want, const Tensor& got, double rel, double abs_floor,
                      const std::string& what) {
  ASSERT_TRUE(want.shape() == got.shape()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < want.numel() && bad < 5; ++i) {
    const double a = want.data<float>()[i], b = got.data<float>()[i];
    if (!(std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b)) + abs_floor)) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: cpu " << a << ", gpu " << b;
    }
  }
}

struct Pass {
  Tensor y, dx;  // host copies
};

// Forward and backward on the CPU layer (dx pre-filled with garbage).
Pass run_cpu(Layer& layer, const Tensor& x, const Tensor& dy) {
  Pass r;
  r.y = filled(layer.output_shape(x.shape()), 123.f);
  layer.forward(x, r.y);
  r.dx = filled(x.shape(), 123.f);
  layer.backward(x, r.y, dy, &r.dx);
  return r;
}

// The same on the GPU layer, every output pre-filled with NaN.
Pass run_gpu(Layer& layer, const Tensor& x_host, const Tensor& dy_host) {
  Tensor x = to_gpu(x_host);
  Tensor y = gpu_nan(layer.output_shape(x_host.shape()));
  layer.forward(x, y);
  Tensor dy = to_gpu(dy_host);
  Tensor dx = gpu_nan(x_host.shape());
  layer.backward(x, y, dy, &dx);
  return {to_cpu(y), to_cpu(dx)};
}

// Build both layers for x's shape, run both, compare bit for bit, and check
// the GPU wrote every element (inputs are finite, so the CPU's outputs are).
void compare_layers(Layer& cpu, Layer& gpu, const Tensor& x, Rng& rng, const std::string& what) {
  cpu.set_input_shape(x.shape());
  gpu.set_input_shape(x.shape());
  const Shape out = cpu.output_shape(x.shape());
  ASSERT_TRUE(gpu.output_shape(x.shape()) == out) << what;
  const Tensor dy = testing::random_tensor(out, rng);
  const Pass c = run_cpu(cpu, x, dy);
  const Pass g = run_gpu(gpu, x, dy);
  EXPECT_EQ(count_nan(g.y), 0u) << what << ": forward left elements unwritten";
  EXPECT_EQ(count_nan(g.dx), 0u) << what << ": backward left elements unwritten";
  expect_bit_equal(c.y, g.y, what + " forward");
  expect_bit_equal(c.dx, g.dx, what + " backward");
}

const std::vector<Shape>& layer_shapes() {
  static const std::vector<Shape> shapes = {
      Shape(1, 1, 7, 5), Shape(1, 3, 13, 11), Shape(64, 1, 7, 5), Shape(64, 3, 13, 11),
      Shape(2, 5, 9, 9), Shape(3, 5, 5, 7),
  };
  return shapes;
}

// ---- ReLU ---------------------------------------------------------------------------

TEST(GpuLayers, ReLUMatchesCpuBitForBit) {
  HPMC_REQUIRE_GPU();
  Rng rng(101);
  for (const Shape& s : layer_shapes()) {
    Tensor x = testing::random_tensor(s, rng);
    // Exact zeros of both signs (the kink: dx = 0) among the values.
    for (size_t i = 0; i < x.numel(); i += 7) x.data<float>()[i] = (i % 2) ? 0.0f : -0.0f;
    ReLUCPU cpu("r");
    LayerPtr gpu = make_layer("relu", "", Impl::kIm2col, Shape(), "r");
    compare_layers(cpu, *gpu, x, rng, "relu " + s.str());
  }
}

TEST(GpuLayers, ReLUPassesNaNLikeTheCpu) {
  HPMC_REQUIRE_GPU();
  Tensor x = Tensor::empty(Shape(1, 1, 1, 5));
  const float v[5] = {kNaN, -1.f, 2.f, 0.f, -kNaN};
  std::copy(v, v + 5, x.data<float>());
  Tensor dy = filled(x.shape(), 3.f);
  ReLUCPU cpu("r");
  LayerPtr gpu = make_layer("relu", "", Impl::kIm2col, Shape(), "r");
  cpu.set_input_shape(x.shape());
  gpu->set_input_shape(x.shape());
  const Pass c = run_cpu(cpu, x, dy), g = run_gpu(*gpu, x, dy);
  expect_bit_equal(c.y, g.y, "relu NaN forward");
  expect_bit_equal(c.dx, g.dx, "relu NaN backward");
  EXPECT_TRUE(std::isnan(g.y.data<float>()[0]));
}

// ---- MaxPool2D ----------------------------------------------------------------------

TEST(GpuLayers, MaxPoolMatchesCpuIncludingOverlapsAndTies) {
  HPMC_REQUIRE_GPU();
  Rng rng(202);
  const MaxPool2dConfig configs[] = {{2, 0}, {2, 1}, {3, 1}, {3, 2}, {2, 3}, {1, 1}, {3, 3}, {5, 2}};
  for (const MaxPool2dConfig& cfg : configs)
    for (const Shape& s : layer_shapes()) {
      if (s.h < cfg.kernel || s.w < cfg.kernel) continue;
      for (bool ties : {false, true}) {
        const Tensor x = ties ? integer_tensor(s, rng) : testing::random_tensor(s, rng);
        MaxPool2dCPU cpu("p", cfg);
        LayerPtr gpu = gpu_maxpool("p", cfg);
        compare_layers(cpu, *gpu, x, rng,
                       str("maxpool k", cfg.kernel, " s", cfg.stride, " ", s.str(),
                           ties ? " ties" : " random"));
      }
    }
}

TEST(GpuLayers, MaxPoolAllEqualWindowsRouteToTheFirst) {
  HPMC_REQUIRE_GPU();
  // Every value equal: every window's first element takes its dy; with k3 s1
  // an element is the first of up to one window, others get 0.
  Rng rng(203);
  const Tensor x = filled(Shape(2, 3, 7, 5), 0.5f);
  for (const MaxPool2dConfig cfg : {MaxPool2dConfig{3, 1}, MaxPool2dConfig{3, 2}}) {
    MaxPool2dCPU cpu("p", cfg);
    LayerPtr gpu = gpu_maxpool("p", cfg);
    compare_layers(cpu, *gpu, x, rng, str("maxpool constant k3 s", cfg.stride));
  }
}

TEST(GpuLayers, MaxPoolNaNPropagatesLikeTheCpu) {
  HPMC_REQUIRE_GPU();
  Rng rng(204);
  for (const MaxPool2dConfig cfg : {MaxPool2dConfig{2, 2}, MaxPool2dConfig{3, 1}}) {
    Tensor x = testing::random_tensor(Shape(2, 3, 7, 5), rng);
    for (size_t i = 3; i < x.numel(); i += 17) x.data<float>()[i] = kNaN;
    MaxPool2dCPU cpu("p", cfg);
    LayerPtr gpu = gpu_maxpool("p", cfg);
    cpu.set_input_shape(x.shape());
    gpu->set_input_shape(x.shape());
    const Tensor dy = testing::random_tensor(cpu.output_shape(x.shape()), rng);
    const Pass c = run_cpu(cpu, x, dy), g = run_gpu(*gpu, x, dy);
    EXPECT_GT(count_nan(g.y), 0u);
    expect_bit_equal(c.y, g.y, str("maxpool NaN forward s", cfg.stride));
    expect_bit_equal(c.dx, g.dx, str("maxpool NaN backward s", cfg.stride));
  }
}

// ReLU inputs at ±0 every 11th element (the edge of its derivative) and,
// with nans, NaN every 23rd.
void add_signed_zeros(Tensor& u, bool nans) {
  for (size_t i = 0; i < u.numel(); i += 11) u.data<float>()[i] = (i % 2) ? 0.0f : -0.0f;
  if (nans)
    for (size_t i = 5; i < u.numel(); i += 23) u.data<float>()[i] = kNaN;
}

// A fused layer [relu, layer] (layers/fused_spec.h: the ReLU's forward
// kernel, then the layer's, whose backward applies the ReLU's mask to the
// gradient it writes: maxpool2d_backward / upsample2d_backward with the mask,
// simple_kernels.h), against the CPU pair relu → cpu on input u: the same
// output and the same gradient with respect to u, bit for bit.
void expect_matches_relu_pair(Layer& cpu, ChainStep step, const Tensor& u, Rng& rng,
                              const std::string& what) {
  const Shape& s = u.shape();
  ReLUCPU relu("r");
  relu.set_input_shape(s);
  cpu.set_input_shape(s);
  Tensor x = filled(s, 0.f), y = filled(cpu.output_shape(s), 0.f);
  relu.forward(u, x);
  cpu.forward(x, y);
  const Tensor dy = testing::random_tensor(y.shape(), rng);
  Tensor dp = filled(s, 0.f), du = filled(s, 0.f);
  cpu.backward(x, y, dy, &dp);
  relu.backward(u, x, dp, &du);
  ChainStep r;
  r.kind = ChainStep::Kind::kAct;
  r.act = Activation::relu();
  r.layers = {"r"};
  step.mask_input = true;
  LayerPtr gpu = gpu::make_fused_layer({r, step});
  gpu->set_input_shape(s);
  const Pass g = run_gpu(*gpu, u, dy);
  // NaN among u reaches y (the pool and the upsample pass it): as many as the CPU's.
  EXPECT_EQ(count_nan(g.y), count_nan(y)) << what << ": forward left elements unwritten";
  expect_bit_equal(y, g.y, what + " forward");
  expect_bit_equal(du, g.dx, what + " backward");
}

ChainStep pool_step(const MaxPool2dConfig& cfg) {
  ChainStep p;
  p.kind = ChainStep::Kind::kMaxPool;
  p.win = maxpool2d_window("p", cfg);
  p.layers = {"p"};
  return p;
}

ChainStep upsample_step(int scale) {
  ChainStep p;
  p.kind = ChainStep::Kind::kUpsample;
  p.scale = scale;
  p.layers = {"u"};
  return p;
}

// A ReLU's backward fused into the max pool after it (a fused layer [relu,
// maxpool2d]): the pool's backward on x = relu(u) with the mask must give, bit
// for bit, the CPU pool's backward followed by the CPU ReLU's (mask u > 0). Every backward kernel:
// the 2×2 stride-2 vector path (W % 4 == 0), the cells path (stride ≥ kernel)
// and the gather (overlapping windows); ties, exact zeros of both signs and
// NaN among u.


TEST(GpuLayers, MaxPoolWithFusedReLUBackwardMatchesTheCpuPair) {
  HPMC_REQUIRE_GPU();
  Rng rng(205);
  std::vector<Shape> shapes = layer_shapes();
  shapes.push_back(Shape(3, 4, 8, 12));  // the 2×2 vector path
  shapes.push_back(Shape(1, 2, 6, 4));
  const MaxPool2dConfig configs[] = {{2, 0}, {2, 1}, {3, 2}, {2, 3}};
  for (const MaxPool2dConfig& cfg : configs)
    for (const Shape& s : shapes) {
      if (s.h < cfg.kernel || s.w < cfg.kernel) continue;
      for (int kind = 0; kind < 3; ++kind) {  // random, integer ties, with NaN
        Tensor u = kind == 1 ? integer_tensor(s, rng) : testing::random_tensor(s, rng);
        add_signed_zeros(u, kind == 2);
        MaxPool2dCPU pool("p", cfg);
        expect_matches_relu_pair(pool, pool_step(cfg), u, rng,
                                 str("maxpool k", cfg.kernel, " s", cfg.stride, " ", s.str(),
                                     " kind ", kind, " with fused relu"));
      }
    }
}

// ---- UpSample2D -----------------------------------------------------------------------

TEST(GpuLayers, UpSampleMatchesCpuForScales1To3) {
  HPMC_REQUIRE_GPU();
  Rng rng(303);
  for (int scale : {1, 2, 3})
    for (const Shape& s : layer_shapes()) {
      const Tensor x = testing::random_tensor(s, rng);
      UpSample2dCPU cpu("u", scale);
      LayerPtr gpu = make_layer("upsample2d", str("{scale: ", scale, "}"), Impl::kIm2col, Shape(), "u");
      compare_layers(cpu, *gpu, x, rng, str("upsample x", scale, " ", s.str()));
    }
}

// ---- the float4 kernels ------------------------------------------------------------------

// Shapes the vector kernels take (ReLU: any aligned tensor; MaxPool 2×2 s2: H
// even and W % 4 == 0; UpSample ×2: W even) next to near misses that go to
// the scalar kernels (H odd, W ≡ 2 mod 4), and element counts that leave a
// ReLU tail of 1..3.
const std::vector<Shape>& vector_shapes() {
  static const std::vector<Shape> shapes = {
      Shape(1, 1, 2, 4),  Shape(3, 5, 8, 8),  Shape(2, 3, 16, 12), Shape(64, 4, 32, 32),
      Shape(2, 3, 7, 8),  Shape(2, 3, 6, 6),  Shape(1, 2, 4, 36),  Shape(1, 1, 1, 7),
      Shape(1, 1, 3, 2),  Shape(5, 1, 2, 2),
  };
  return shapes;
}

// dy with exact zeros of both signs among random values: the CPU's zeroed dx
// plus a dy of −0 is +0, which the GPU must reproduce.
Tensor dy_with_signed_zeros(const Shape& s, Rng& rng) {
  Tensor t = testing::random_tensor(s, rng);
  for (size_t i = 0; i < t.numel(); i += 5) t.data<float>()[i] = (i % 2) ? 0.0f : -0.0f;
  return t;
}

void compare_with_dy(Layer& cpu, Layer& gpu, const Tensor& x, const Tensor& dy,
                     const std::string& what) {
  cpu.set_input_shape(x.shape());
  gpu.set_input_shape(x.shape());
  const Pass c = run_cpu(cpu, x, dy);
  const Pass g = run_gpu(gpu, x, dy);
  EXPECT_EQ(count_nan(g.y), 0u) << what << ": forward left elements unwritten";
  EXPECT_EQ(count_nan(g.dx), 0u) << what << ": backward left elements unwritten";
  expect_bit_equal(c.y, g.y, what + " forward");
  expect_bit_equal(c.dx, g.dx, what + " backward");
}

TEST(GpuLayers, VectorKernelsMatchCpuBitForBit) {
  HPMC_REQUIRE_GPU();
  Rng rng(707);
  for (const Shape& s : vector_shapes()) {
    {
      Tensor x = testing::random_tensor(s, rng);
      for (size_t i = 0; i < x.numel(); i += 7) x.data<float>()[i] = (i % 2) ? 0.0f : -0.0f;
      ReLUCPU cpu("r");
      LayerPtr gpu = make_layer("relu", "", Impl::kIm2col, Shape(), "r");
      compare_with_dy(cpu, *gpu, x, dy_with_signed_zeros(s, rng), "relu " + s.str());
    }
    for (const MaxPool2dConfig& cfg :
         {MaxPool2dConfig{2, 0}, MaxPool2dConfig{2, 2}, MaxPool2dConfig{2, 3},
          MaxPool2dConfig{3, 3}, MaxPool2dConfig{1, 2}, MaxPool2dConfig{2, 1}}) {
      if (s.h < cfg.kernel || s.w < cfg.kernel) continue;
      for (int kind = 0; kind < 3; ++kind) {  // random, ties, NaNs
        Tensor x = kind == 1 ? integer_tensor(s, rng) : testing::random_tensor(s, rng);
        if (kind == 2)
          for (size_t i = 3; i < x.numel(); i += 11) x.data<float>()[i] = kNaN;
        MaxPool2dCPU cpu("p", cfg);
        LayerPtr gpu = gpu_maxpool("p", cfg);
        const Shape out = cpu.output_shape(s);
        const std::string what = str("maxpool k", cfg.kernel, " s", cfg.stride, " ", s.str(),
                                     kind == 0 ? " random" : kind == 1 ? " ties" : " NaN");
        if (kind == 2) {
          // NaN outputs compare bit for bit; count_nan in compare_with_dy
          // would flag them, so compare here.
          cpu.set_input_shape(s);
          gpu->set_input_shape(s);
          const Tensor dy = dy_with_signed_zeros(out, rng);
          const Pass c = run_cpu(cpu, x, dy), g = run_gpu(*gpu, x, dy);
          expect_bit_equal(c.y, g.y, what + " forward");
          expect_bit_equal(c.dx, g.dx, what + " backward");
        } else {
          compare_with_dy(cpu, *gpu, x, dy_with_signed_zeros(out, rng), what);
        }
      }
    }
    for (int scale : {2, 3}) {
      const Tensor x = testing::random_tensor(s, rng);
      UpSample2dCPU cpu("u", scale);
      LayerPtr gpu = make_layer("upsample2d", str("{scale: ", scale, "}"), Impl::kIm2col, Shape(), "u");
      compare_with_dy(cpu, *gpu, x,
                      dy_with_signed_zeros(cpu.output_shape(s), rng),
                      str("upsample x", scale, " ", s.str()));
    }
  }
}

// A ReLU's backward fused into the upsample after it ([relu, upsample2d]): as for the max pool,
// the GPU upsample's backward on x = relu(u) must give the CPU upsample's
// backward followed by the CPU ReLU's, bit for bit (the scale-2 vector path
// and the scalar one; zeros of both signs and NaN among u).
TEST(GpuLayers, UpSampleWithFusedReLUBackwardMatchesTheCpuPair) {
  HPMC_REQUIRE_GPU();
  Rng rng(305);
  std::vector<Shape> shapes = layer_shapes();
  shapes.push_back(Shape(3, 4, 8, 12));
  for (int scale : {2, 3})
    for (const Shape& s : shapes)
      for (bool with_nan : {false, true}) {
        Tensor u = testing::random_tensor(s, rng);
        add_signed_zeros(u, with_nan);
        UpSample2dCPU up("u", scale);
        expect_matches_relu_pair(up, upsample_step(scale), u, rng,
                                 str("upsample x", scale, " ", s.str(), with_nan ? " NaN" : "",
                                     " with fused relu"));
      }
}

// ---- Flatten ----------------------------------------------------------------------------

TEST(GpuLayers, FlattenIsABitExactCopy) {
  HPMC_REQUIRE_GPU();
  Rng rng(404);
  for (const Shape& s : layer_shapes()) {
    const Tensor x = testing::random_tensor(s, rng);
    FlattenCPU cpu("f");
    LayerPtr gpu = make_layer("flatten", "", Impl::kIm2col, Shape(), "f");
    EXPECT_TRUE(gpu->output_shape(s) == Shape(s.n, int(s.per_sample()), 1, 1));
    compare_layers(cpu, *gpu, x, rng, "flatten " + s.str());
  }
}

// ---- conventions shared by the layers --------------------------------------------------

TEST(GpuLayers, NamesShapesAndErrorsMatchTheCpuLayers) {
  HPMC_REQUIRE_GPU();
  const std::vector<std::pair<LayerPtr, LayerPtr>> pairs = {
      {std::make_shared<ReLUCPU>("a"), make_layer("relu", "", Impl::kIm2col, Shape(), "a")},
      {std::make_shared<MaxPool2dCPU>("a", MaxPool2dConfig{3, 2}),
       make_layer("maxpool2d", "{kernel: 3, stride: 2}", Impl::kIm2col, Shape(), "a")},
      {std::make_shared<MaxPool2dCPU>("a", MaxPool2dConfig{2, 0}),
       make_layer("maxpool2d", "{kernel: 2}", Impl::kIm2col, Shape(), "a")},
      {std::make_shared<UpSample2dCPU>("a", 3), make_layer("upsample2d", str("{scale: ", 3, "}"), Impl::kIm2col, Shape(), "a")},
      {std::make_shared<FlattenCPU>("a"), make_layer("flatten", "", Impl::kIm2col, Shape(), "a")},
  };
  for (const auto& [cpu, gpu] : pairs) {
    EXPECT_EQ(gpu->device(), Device::kGPU);
    EXPECT_STREQ(gpu->impl(), "gpu");
    EXPECT_STREQ(gpu->type(), cpu->type());
    EXPECT_EQ(gpu->describe(), cpu->describe());
    EXPECT_EQ(gpu->param_count(), 0u);
    for (const Shape& s : {Shape(4, 3, 7, 5), Shape(1, 5, 13, 11)})
      EXPECT_TRUE(gpu->output_shape(s) == cpu->output_shape(s)) << cpu->type() << " " << s.str();
  }
  // The same ShapeError, word for word.
  MaxPool2dCPU cpu_pool("p", MaxPool2dConfig{3, 1});
  LayerPtr gpu_pool = make_layer("maxpool2d", "{kernel: 3, stride: 1}", Impl::kIm2col, Shape(), "p");
  std::string cpu_msg, gpu_msg;
  try {
    cpu_pool.output_shape(Shape(1, 4, 2, 5));
  } catch (const ShapeError& e) {
    cpu_msg = e.what();
  }
  try {
    gpu_pool->output_shape(Shape(1, 4, 2, 5));
  } catch (const ShapeError& e) {
    gpu_msg = e.what();
  }
  EXPECT_FALSE(gpu_msg.empty());
  EXPECT_EQ(gpu_msg, cpu_msg);
  // The same ConfigErrors.
  EXPECT_THROW(make_layer("maxpool2d", "{kernel: 0}", Impl::kIm2col, Shape(), "p"), ConfigError);
  EXPECT_THROW(make_layer("maxpool2d", "{kernel: 2, stride: -1}", Impl::kIm2col, Shape(), "p"), ConfigError);
  EXPECT_THROW(make_layer("upsample2d", str("{scale: ", 0, "}"), Impl::kIm2col, Shape(), "u"), ConfigError);
  // A CPU tensor handed to a GPU layer is refused, not silently used.
  LayerPtr relu = make_layer("relu", "", Impl::kIm2col, Shape(), "r");
  relu->set_input_shape(Shape(1, 1, 2, 2));
  Tensor host_x = Tensor::zeros(Shape(1, 1, 2, 2));
  Tensor gpu_y = gpu_nan(Shape(1, 1, 2, 2));
  EXPECT_THROW(relu->forward(host_x, gpu_y), RuntimeError);
}

TEST(GpuLayers, NullDxIsSkippedAndASmallerBatchWorks) {
  HPMC_REQUIRE_GPU();
  Rng rng(505);
  const Shape built(64, 3, 13, 11);
  std::vector<std::pair<LayerPtr, LayerPtr>> pairs = {
      {std::make_shared<ReLUCPU>("a"), make_layer("relu", "", Impl::kIm2col, Shape(), "a")},
      {std::make_shared<MaxPool2dCPU>("a", MaxPool2dConfig{3, 1}),
       make_layer("maxpool2d", "{kernel: 3, stride: 1}", Impl::kIm2col, Shape(), "a")},
      {std::make_shared<UpSample2dCPU>("a", 2), make_layer("upsample2d", str("{scale: ", 2, "}"), Impl::kIm2col, Shape(), "a")},
      {std::make_shared<FlattenCPU>("a"), make_layer("flatten", "", Impl::kIm2col, Shape(), "a")},
  };
  for (auto& [cpu, gpu] : pairs) {
    cpu->set_input_shape(built);
    gpu->set_input_shape(built);
    // Buffers allocated for 64 samples, used for the last, partial batch of 5.
    Tensor x = to_gpu(testing::random_tensor(built, rng));
    Tensor y = gpu_nan(gpu->output_shape(built));
    x.set_batch(5);
    y.set_batch(5);
    gpu->forward(x, y);
    Tensor dy = to_gpu(testing::random_tensor(y.shape(), rng));
    EXPECT_NO_THROW(gpu->backward(x, y, dy, nullptr)) << gpu->type();
    Tensor dx = gpu_nan(built);
    dx.set_batch(5);
    gpu->backward(x, y, dy, &dx);
    // Against the CPU on the 5 samples.
    const Tensor xh = to_cpu(x), dyh = to_cpu(dy);
    const Pass c = run_cpu(*cpu, xh, dyh);
    expect_bit_equal(c.y, to_cpu(y), str(gpu->type(), " batch 5 forward"));
    expect_bit_equal(c.dx, to_cpu(dx), str(gpu->type(), " batch 5 backward"));
    // Samples 5..63 of the buffers were not touched.
    dx.set_batch(64);
    const Tensor all = to_cpu(dx);
    EXPECT_EQ(count_nan(all), all.numel() - size_t(5) * built.per_sample()) << gpu->type();
  }
}

TEST(GpuLayers, TwoRunsAreBitIdentical) {
  HPMC_REQUIRE_GPU();
  Rng rng(606);
  const Tensor x = integer_tensor(Shape(64, 3, 13, 11), rng);
  LayerPtr pool = make_layer("maxpool2d", "{kernel: 3, stride: 1}", Impl::kIm2col, Shape(), "p");
  LayerPtr up = make_layer("upsample2d", str("{scale: ", 3, "}"), Impl::kIm2col, Shape(), "u");
  for (LayerPtr layer : {pool, up}) {
    layer->set_input_shape(x.shape());
    const Tensor dy = testing::random_tensor(layer->output_shape(x.shape()), rng);
    const Pass a = run_gpu(*layer, x, dy);
    const Pass b = run_gpu(*layer, x, dy);
    expect_bit_equal(a.y, b.y, str(layer->type(), " forward run 2"));
    expect_bit_equal(a.dx, b.dx, str(layer->type(), " backward run 2"));
  }
}

// ---- losses -------------------------------------------------------------------------------

Tensor acc_host(double a0 = 0, double a1 = 0) {
  Tensor t = Tensor::empty(Shape(2, 1, 1, 1), DType::kF64);
  t.data<double>()[0] = a0;
  t.data<double>()[1] = a1;
  return t;
}

Tensor random_labels(int n, int k, Rng& rng) {
  Tensor t = Tensor::empty(Shape(n, 1, 1, 1), DType::kI32);
  for (int i = 0; i < n; ++i) t.data<int32_t>()[i] = int32_t(rng.below(uint64_t(k)));
  return t;
}

Tensor labels_of(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty(Shape(int(v.size()), 1, 1, 1), DType::kI32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

struct LossOut {
  Tensor acc, dpred;  // host copies
};

LossOut run_loss_cpu(Loss& loss, const Tensor& pred, const Tensor& target, const Tensor& acc0) {
  LossOut r;
  r.acc = Tensor::empty(acc0.shape(), DType::kF64);
  r.acc.copy_from(acc0);
  r.dpred = filled(pred.shape(), 123.f);
  loss.compute(pred, target, &r.dpred, r.acc);
  return r;
}

LossOut run_loss_gpu(Loss& loss, const Tensor& pred, const Tensor& target, const Tensor& acc0,
                     int calls = 1) {
  Tensor p = to_gpu(pred), t = to_gpu(target), acc = to_gpu(acc0);
  Tensor d = gpu_nan(pred.shape());
  for (int i = 0; i < calls; ++i) loss.compute(p, t, &d, acc);
  return {to_cpu(acc), to_cpu(d)};
}

const std::vector<Shape>& mse_shapes() {
  static const std::vector<Shape> shapes = {Shape(1, 1, 7, 5), Shape(64, 3, 13, 11),
                                            Shape(3, 5, 4, 4), Shape(64, 1, 28, 28),
                                            Shape(5, 1000, 1, 1)};
  return shapes;
}

TEST(GpuLayersLoss, MseMatchesCpu) {
  HPMC_REQUIRE_GPU();
  Rng rng(707);
  for (const Shape& s : mse_shapes()) {
    const Tensor pred = testing::random_tensor(s, rng), target = testing::random_tensor(s, rng, 0, 1);
    MseLossCPU cpu;
    LossPtr gpu = make_loss("mse", Impl::kIm2col);
    EXPECT_STREQ(gpu->type(), "mse");
    EXPECT_EQ(gpu->device(), Device::kGPU);
    EXPECT_FALSE(gpu->is_classifier());
    EXPECT_EQ(gpu->target_dtype(), DType::kF32);
    const LossOut c = run_loss_cpu(cpu, pred, target, acc_host());
    const LossOut g = run_loss_gpu(*gpu, pred, target, acc_host());
    expect_close(c.acc.data<double>()[0], g.acc.data<double>()[0], 1e-6, "mse loss " + s.str());
    EXPECT_EQ(g.acc.data<double>()[1], 0.0) << "mse must leave acc[1] alone";
    expect_bit_equal(c.dpred, g.dpred, "mse dpred " + s.str());
  }
}

TEST(GpuLayersLoss, MseAccumulatesAndNullGradientIsSkipped) {
  HPMC_REQUIRE_GPU();
  Rng rng(708);
  const Shape s(7, 3, 5, 5);
  const Tensor pred = testing::random_tensor(s, rng), target = testing::random_tensor(s, rng);
  MseLossCPU cpu;
  LossPtr gpu = make_loss("mse", Impl::kIm2col);
  Tensor cacc = acc_host(0.25, 7);
  cpu.compute(pred, target, nullptr, cacc);
  cpu.compute(pred, target, nullptr, cacc);
  cpu.compute(pred, target, nullptr, cacc);
  Tensor gacc = to_gpu(acc_host(0.25, 7));
  Tensor p = to_gpu(pred), t = to_gpu(target);
  for (int i = 0; i < 3; ++i) gpu->compute(p, t, nullptr, gacc);
  const Tensor h = to_cpu(gacc);
  expect_close(cacc.data<double>()[0], h.data<double>()[0], 1e-6, "mse acc after 3 calls");
  EXPECT_EQ(h.data<double>()[1], 7.0);
  // Overwrite: three calls into one dpred equal one.
  const LossOut once = run_loss_gpu(*gpu, pred, target, acc_host(), 1);
  const LossOut thrice = run_loss_gpu(*gpu, pred, target, acc_host(), 3);
  expect_bit_equal(once.dpred, thrice.dpred, "mse dpred overwritten");
}

TEST(GpuLayersLoss, MseNaNGivesNaNLoss) {
  HPMC_REQUIRE_GPU();
  Tensor pred = filled(Shape(2, 1, 3, 3), 0.5f), target = filled(Shape(2, 1, 3, 3), 0.25f);
  pred.data<float>()[11] = kNaN;
  LossPtr gpu = make_loss("mse", Impl::kIm2col);
  const LossOut g = run_loss_gpu(*gpu, pred, target, acc_host());
  EXPECT_TRUE(std::isnan(g.acc.data<double>()[0]));
}

TEST(GpuLayersLoss, SoftmaxCeMatchesCpu) {
  HPMC_REQUIRE_GPU();
  Rng rng(808);
  struct Case {
    int n, k;
    float scale;
  };
  const Case cases[] = {{1, 10, 3.f},  {64, 10, 3.f},     {37, 3, 1.f},  {64, 1, 2.f},
                        {5, 100, 5.f}, {64, 10, 1000.f}, {9, 7, 1000.f}};
  for (const Case& cs : cases) {
    const Shape s(cs.n, cs.k, 1, 1);
    Tensor pred = testing::random_tensor(s, rng, -cs.scale, cs.scale);
    const Tensor labels = random_labels(cs.n, cs.k, rng);
    // Make about half the samples correct, so the count is not trivially 0.
    for (int i = 0; i < cs.n; i += 2)
      pred.data<float>()[size_t(i) * cs.k + size_t(labels.data<int32_t>()[i])] = 2 * cs.scale;
    SoftmaxCrossEntropyCPU cpu;
    LossPtr gpu = make_loss("softmax_cross_entropy", Impl::kIm2col);
    EXPECT_STREQ(gpu->type(), "softmax_cross_entropy");
    EXPECT_TRUE(gpu->is_classifier());
    EXPECT_EQ(gpu->target_dtype(), DType::kI32);
    const std::string what = str("ce n", cs.n, " k", cs.k, " scale ", cs.scale);
    const LossOut c = run_loss_cpu(cpu, pred, labels, acc_host());
    const LossOut g = run_loss_gpu(*gpu, pred, labels, acc_host());
    EXPECT_TRUE(std::isfinite(g.acc.data<double>()[0])) << what;
    expect_close(c.acc.data<double>()[0], g.acc.data<double>()[0], 1e-6, what + " loss");
    EXPECT_EQ(c.acc.data<double>()[1], g.acc.data<double>()[1]) << what << " correct count";
    EXPECT_EQ(count_nan(g.dpred), 0u) << what;
    expect_all_close(c.dpred, g.dpred, 1e-6, 1e-12, what + " dpred");
  }
}

TEST(GpuLayersLoss, SoftmaxCeAccumulatesAndCountsFirstMaxOnTies) {
  HPMC_REQUIRE_GPU();
  Tensor pred = Tensor::empty(Shape(5, 4, 1, 1));
  const float v[20] = {0, 5, 1, 2,      // argmax 1
                       3, 3, 3, 3,      // tie: argmax 0
                       1, 2, 9, 9,      // tie: argmax 2
                       -1, -2, -3, -4,  // argmax 0
                       0, 0, 0, 1};     // argmax 3
  std::copy(v, v + 20, pred.data<float>());
  const Tensor labels = labels_of({1, 1, 2, 0, 2});
  SoftmaxCrossEntropyCPU cpu;
  LossPtr gpu = make_loss("softmax_cross_entropy", Impl::kIm2col);
  Tensor cacc = acc_host(1.5, 4);
  cpu.compute(pred, labels, nullptr, cacc);
  cpu.compute(pred, labels, nullptr, cacc);
  Tensor gacc = to_gpu(acc_host(1.5, 4));
  Tensor p = to_gpu(pred), t = to_gpu(labels);
  gpu->compute(p, t, nullptr, gacc);
  gpu->compute(p, t, nullptr, gacc);
  const Tensor h = to_cpu(gacc);
  EXPECT_EQ(h.data<double>()[1], 4.0 + 2 * 3.0);  // samples 0, 2 and 3, twice
  expect_close(cacc.data<double>()[0], h.data<double>()[0], 1e-6, "ce acc after 2 calls");
}

TEST(GpuLayersLoss, SoftmaxCeBadLabelPoisonsTheLossAndIsReportedByCheckStatus) {
  HPMC_REQUIRE_GPU();
  const Tensor pred = Tensor::zeros(Shape(3, 4, 1, 1));
  LossPtr gpu = make_loss("softmax_cross_entropy", Impl::kIm2col);
  Tensor p = to_gpu(pred), acc = to_gpu(acc_host());
  Tensor d = gpu_nan(pred.shape());
  // The bad call itself does not throw (no host sync), but its loss is NaN,
  // the bad sample counts as wrong and adds no gradient.
  ASSERT_NO_THROW(gpu->compute(p, to_gpu(labels_of({0, 3, 7})), &d, acc));
  const Tensor a = to_cpu(acc), dh = to_cpu(d);
  EXPECT_TRUE(std::isnan(a.data<double>()[0]));
  EXPECT_EQ(a.data<double>()[1], 1.0);  // sample 0: argmax 0 = label 0
  for (int j = 0; j < 4; ++j) EXPECT_EQ(dh.data<float>()[8 + j], 0.0f) << j;
  // The valid rows are what the CPU gives them.
  SoftmaxCrossEntropyCPU cpu;
  const LossOut c = run_loss_cpu(cpu, pred, labels_of({0, 3, 0}), acc_host());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(bits(dh.data<float>()[i]), bits(c.dpred.data<float>()[i]));
  // check_status() reports it, as the CPU's DataError.
  const Tensor good = to_gpu(labels_of({0, 1, 2}));
  try {
    gpu->check_status();
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("sample 2"), std::string::npos) << m;
    EXPECT_NE(m.find("label 7"), std::string::npos) << m;
    EXPECT_NE(m.find("[0, 4)"), std::string::npos) << m;
  }
  // Reported once: the loss goes on cleanly afterwards.
  Tensor acc2 = to_gpu(acc_host());
  EXPECT_NO_THROW(gpu->compute(p, good, &d, acc2));
  EXPECT_NO_THROW(gpu->check_status());
  EXPECT_TRUE(std::isfinite(to_cpu(acc2).data<double>()[0]));
  // A negative label, and one equal to K.
  for (int32_t bad : {-1, 4}) {
    gpu->compute(p, to_gpu(labels_of({0, bad, 0})), nullptr, acc2);
    try {
      gpu->check_status();
      FAIL() << "expected DataError for label " << bad;
    } catch (const DataError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(str("sample 1 of a batch has label ", bad)), std::string::npos) << m;
    }
  }
}

TEST(GpuLayersLoss, SoftmaxCeNaNGivesNaNLossNotACrash) {
  HPMC_REQUIRE_GPU();
  Tensor pred = Tensor::empty(Shape(2, 3, 1, 1));
  const float v[6] = {kNaN, 1, 2, 0, 1, kNaN};
  std::copy(v, v + 6, pred.data<float>());
  for (int32_t label : {0, 1}) {
    const Tensor labels = labels_of({label, label});
    SoftmaxCrossEntropyCPU cpu;
    LossPtr gpu = make_loss("softmax_cross_entropy", Impl::kIm2col);
    const LossOut c = run_loss_cpu(cpu, pred, labels, acc_host());
    const LossOut g = run_loss_gpu(*gpu, pred, labels, acc_host());
    EXPECT_TRUE(std::isnan(g.acc.data<double>()[0]));
    EXPECT_EQ(c.acc.data<double>()[1], g.acc.data<double>()[1]) << label;
  }
}

TEST(GpuLayersLoss, BadArgumentsThrow) {
  HPMC_REQUIRE_GPU();
  LossPtr mse = make_loss("mse", Impl::kIm2col), ce = make_loss("softmax_cross_entropy", Impl::kIm2col);
  Tensor acc = to_gpu(acc_host());
  const Tensor host_pred = Tensor::zeros(Shape(2, 3, 1, 1));
  const Tensor pred = to_gpu(host_pred);
  // A host tensor is refused, not dereferenced on the device.
  EXPECT_THROW(mse->compute(host_pred, pred, nullptr, acc), RuntimeError);
  Tensor host_acc = acc_host();
  EXPECT_THROW(mse->compute(pred, pred, nullptr, host_acc), RuntimeError);
  EXPECT_THROW(mse->compute(pred, to_gpu(Tensor::zeros(Shape(2, 3, 1, 2))), nullptr, acc),
               RuntimeError);
  EXPECT_THROW(ce->compute(pred, to_gpu(labels_of({0, 1, 2})), nullptr, acc), RuntimeError);
  EXPECT_THROW(ce->compute(to_gpu(Tensor::zeros(Shape(2, 3, 2, 2))),
                           to_gpu(labels_of({0, 1})), nullptr, acc),
               RuntimeError);
  EXPECT_THROW(ce->compute(pred, pred, nullptr, acc), RuntimeError);  // float labels
}

TEST(GpuLayersLoss, TwoRunsAreBitIdentical) {
  HPMC_REQUIRE_GPU();
  Rng rng(909);
  {
    const Shape s(64, 3, 13, 11);
    const Tensor pred = testing::random_tensor(s, rng), target = testing::random_tensor(s, rng);
    LossPtr a = make_loss("mse", Impl::kIm2col), b = make_loss("mse", Impl::kIm2col);
    const LossOut x = run_loss_gpu(*a, pred, target, acc_host(), 3);
    const LossOut y = run_loss_gpu(*b, pred, target, acc_host(), 3);
    EXPECT_EQ(bits(x.acc.data<double>()[0]), bits(y.acc.data<double>()[0]));
    expect_bit_equal(x.dpred, y.dpred, "mse dpred run 2");
  }
  {
    const Shape s(64, 10, 1, 1);
    const Tensor pred = testing::random_tensor(s, rng, -4, 4);
    const Tensor labels = random_labels(64, 10, rng);
    LossPtr a = make_loss("softmax_cross_entropy", Impl::kIm2col);
    const LossOut x = run_loss_gpu(*a, pred, labels, acc_host(), 3);
    const LossOut y = run_loss_gpu(*a, pred, labels, acc_host(), 3);
    EXPECT_EQ(bits(x.acc.data<double>()[0]), bits(y.acc.data<double>()[0]));
    EXPECT_EQ(bits(x.acc.data<double>()[1]), bits(y.acc.data<double>()[1]));
    expect_bit_equal(x.dpred, y.dpred, "ce dpred run 2");
  }
}

// ---- SGD ------------------------------------------------------------------------------------

// The SGD formula with every operation rounded separately (volatile
// temporaries keep the compiler from fusing a multiply-add), as the kernel.
void sgd_reference(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& v,
                   float lr, float mu, float wd) {
  for (size_t i = 0; i < p.size(); ++i) {
    volatile float decay = wd * p[i];
    volatile float gg = g[i] + decay;
    volatile float step;
    if (mu != 0.0f) {
      volatile float mv = mu * v[i];
      volatile float vi = mv + gg;
      v[i] = vi;
      step = lr * vi;
    } else {
      step = lr * gg;
    }
    p[i] = p[i] - step;
  }
}

std::vector<float> random_vec(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(-1.f, 1.f);
  return v;
}

Tensor gpu_vec(const std::vector<float>& v, size_t lead = 0) {
  Tensor h = Tensor::zeros(Shape(1, int(v.size() + lead), 1, 1));
  std::copy(v.begin(), v.end(), h.data<float>() + lead);
  return to_gpu(h);
}

std::vector<float> host_vec(const Tensor& d, size_t lead, size_t n) {
  const Tensor h = to_cpu(d);
  return std::vector<float>(h.data<float>() + lead, h.data<float>() + lead + n);
}

struct SgdCase {
  float lr, mu, wd;
};
const SgdCase kSgdCases[] = {{0.1f, 0.f, 0.f}, {0.05f, 0.9f, 0.f}, {0.05f, 0.9f, 1e-2f},
                             {0.1f, 0.f, 5e-3f}};

TEST(GpuLayersTrain, SgdKernelMatchesARoundedReferenceBitForBit) {
  HPMC_REQUIRE_GPU();
  Rng rng(1010);
  // Lengths not a multiple of 4 nor of the block; a misaligned start (lead 1)
  // takes the scalar path, lead 0 the float4 path plus a scalar tail.
  for (size_t n : {size_t(1001), size_t(3), size_t(4099), size_t(64)})
    for (size_t lead : {size_t(0), size_t(1)})
      for (const SgdCase& cs : kSgdCases) {
        std::vector<float> p = random_vec(n, rng), v = random_vec(n, rng);
        const std::vector<float> v0 = v;
        Tensor dp = gpu_vec(p, lead), dv = gpu_vec(v, lead);
        for (int step = 0; step < 3; ++step) {
          const std::vector<float> g = random_vec(n, rng);
          Tensor dg = gpu_vec(g, lead);
          gpu::sgd_step(dp.data<float>() + lead, dg.data<float>() + lead, dv.data<float>() + lead,
                        n, cs.lr, cs.mu, cs.wd);
          sgd_reference(p, g, v, cs.lr, cs.mu, cs.wd);
        }
        const std::vector<float> gp = host_vec(dp, lead, n), gv = host_vec(dv, lead, n);
        const std::string what = str("sgd n ", n, " lead ", lead, " lr ", cs.lr, " mu ", cs.mu,
                                     " wd ", cs.wd);
        size_t bad_p = 0, bad_v = 0;
        for (size_t i = 0; i < n; ++i) {
          bad_p += bits(p[i]) != bits(gp[i]);
          bad_v += bits(v[i]) != bits(gv[i]);
        }
        EXPECT_EQ(bad_p, 0u) << what << ": parameters differ";
        EXPECT_EQ(bad_v, 0u) << what << ": momentum differs";
        if (cs.mu == 0.f) {  // the momentum buffer is not touched without momentum
          size_t changed = 0;
          for (size_t i = 0; i < n; ++i) changed += bits(v0[i]) != bits(gv[i]);
          EXPECT_EQ(changed, 0u) << what;
        }
      }
}

// ---- gather_batch ----------------------------------------------------------------------------

TEST(GpuLayersTrain, GatherBatchMatchesTheCpuGather) {
  HPMC_REQUIRE_GPU();
  Rng rng(1212);
  Dataset d;
  d.source = "test";
  d.num_classes = 10;
  d.images = Tensor::empty(Shape(37, 3, 5, 7), DType::kU8);
  d.labels = Tensor::empty(Shape(37, 1, 1, 1), DType::kI32);
  uint8_t* px = d.images.data<uint8_t>();
  for (size_t i = 0; i < d.images.numel(); ++i) px[i] = uint8_t(rng.below(256));
  px[0] = 0;
  px[1] = 255;
  for (int i = 0; i < 37; ++i) d.labels.data<int32_t>()[i] = int32_t(rng.below(10));
  const size_t per = d.images.shape().per_sample();

  // A partial batch (13 of 16), out of order, with repeats and both ends.
  const std::vector<int32_t> idx = {36, 0, 5, 5, 17, 2, 35, 1, 9, 30, 12, 0, 4};
  const int n = int(idx.size());
  Tensor x = Tensor::empty(Shape(16, 3, 5, 7));
  Tensor y = Tensor::empty(Shape(16, 1, 1, 1), DType::kI32);
  gather_batch(d, idx.data(), n, x, &y);

  const Tensor images = to_gpu(d.images), labels = to_gpu(d.labels);
  const Tensor didx = to_gpu(labels_of(idx));
  Tensor dx = gpu_nan(Shape(16, 3, 5, 7));
  Tensor dy = to_gpu(labels_of(std::vector<int32_t>(16, -7)));
  gpu::gather_batch(images.data<uint8_t>(), labels.data<int32_t>(), per, didx.data<int32_t>(), n,
                    dx.data<float>(), dy.data<int32_t>());
  const Tensor hx = to_cpu(dx), hy = to_cpu(dy);
  for (size_t i = 0; i < size_t(n) * per; ++i)
    ASSERT_EQ(bits(x.data<float>()[i]), bits(hx.data<float>()[i])) << "element " << i;
  for (int i = 0; i < n; ++i) EXPECT_EQ(hy.data<int32_t>()[i], y.data<int32_t>()[i]) << i;
  // The rows past the batch are untouched.
  for (size_t i = size_t(n) * per; i < hx.numel(); ++i) ASSERT_TRUE(std::isnan(hx.data<float>()[i]));
  for (int i = n; i < 16; ++i) EXPECT_EQ(hy.data<int32_t>()[i], -7);
  // Sample 36 comes first: its pixels are sample 36's; 0 and 255 map to 0 and 1.
  EXPECT_EQ(hx.data<float>()[per], 0.0f);  // batch row 1 = sample 0, pixel 0
  EXPECT_EQ(hx.data<float>()[per + 1], 1.0f);

  // Without labels only x is written.
  Tensor dx2 = gpu_nan(Shape(16, 3, 5, 7));
  gpu::gather_batch(images.data<uint8_t>(), nullptr, per, didx.data<int32_t>(), n,
                    dx2.data<float>(), nullptr);
  expect_bit_equal(hx, to_cpu(dx2), "gather without labels");
  // An empty batch is a no-op.
  EXPECT_NO_THROW(gpu::gather_batch(images.data<uint8_t>(), labels.data<int32_t>(), per,
                                    didx.data<int32_t>(), 0, dx2.data<float>(),
                                    dy.data<int32_t>()));
}

}  // namespace
}  // namespace hpmc
