// The fused layers (layers/fused_spec.h, layers/gpu/fused_chain.h) that the
// GPU rewrite (model/gpu_rewrite.h) makes, each against the layers it
// replaces, run one by one on the GPU from the same parameters and inputs:
// the output y, the gradient dx of the input (and with a null dx: the
// parameter gradients still, nothing else), and every parameter gradient.
//
//   * Without a fold: BIT-equal. A fused layer runs the kernels the layers
//     run (the epilogue writes act(v) from the v the plain convolution writes;
//     the pool / upsample / folded-conv backward applies the ReLU's mask x > 0
//     to the same sums; relu(u) > 0 ⇔ u > 0), so every float is the same.
//   * With a fold (upsample2d → conv2d in one pass): within rounding. The fold
//     sums weights and reorders the chains (conv2d_kernels.h; its kernels are
//     bounded against double in test_gpu_upconv.cpp); here ‖fused − plain‖₂ /
//     ‖plain‖₂ ≤ 1e-5 for y and dx and ≤ 1e-4 for the weight gradients (sums
//     over N·H·W products with cancellation). A fold with a ReLU after it may
//     flip the mask of an element whose value rounds across 0; with such a
//     ReLU inside the layer the gradients are held to 1e-3 (a wrong tap, mask
//     or scale is off by order 1).
// Shapes are odd (not tile multiples), batch 1 and 3, channels 1/3/5 where the
// kernels allow (the fold's GEMM form needs multiples of 8; its thin form K ≤ 4).
// Outputs start as NaN, so an element a kernel forgets shows up.
//
// Other epilogue activations (leaky_relu, sigmoid, tanh) are checked through
// a fused [conv2d, act] built from its steps: y against the plain conv's
// output activated on the host (act_testing.h: bit for bit, sigmoid and tanh
// within 4 ulp), the backward against the plain conv's backward of the
// activation's gradient computed on the host from the fused y (bit for bit).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "act_testing.h"
#include "core/error.h"
#include "core/rng.h"
#include "gpu_testing.h"
#include "layers/fused_spec.h"
#include "layers/gpu/factory.h"
#include "model/gpu_rewrite.h"
#include "model/model.h"
#include "model/params.h"
#include "model/registry.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::to_cpu;
using testing::to_gpu;

Tensor gpu_nan(const Shape& s) {
  Tensor t = Tensor::empty(s);
  for (size_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::nanf("");
  return to_gpu(t);
}

// One layer of a test list: its YAML type and keys.
struct Spec {
  std::string name, type, keys;
};

// The plain GPU layers (im2col), the rewritten list, and a parameter store
// for each, holding the same values.
struct Pair {
  std::vector<LayerPtr> plain, fused;
  RewritePlan plan;
  ParamStore pp, pf;
};

// first_trained = -1: as if a layer with parameters came before the list, so
// that a leading ReLU's input gradient is needed (and its backward may be a mask).
// prec: the layers' training.precision (a linear layer links only in tf32 and bf16).
std::unique_ptr<Pair> build(const std::vector<Spec>& specs, const Shape& in, bool fold = true,
                            int first_trained = -1, Precision prec = Precision::kFp32) {
  auto p = std::make_unique<Pair>();
  // Two sets of the layers: the rewritten list keeps some of its own (a group
  // of one), which its parameter store binds, so they may not be the plain
  // list's.
  const auto layers = [&] {
    std::vector<LayerPtr> out;
    Shape cur = in.with_batch(1);
    for (const Spec& s : specs) {
      out.push_back(make_layer(s.type, s.keys, Impl::kIm2col, cur, s.name));
      out.back()->set_precision(prec);
      cur = out.back()->output_shape(cur);
    }
    return out;
  };
  p->plain = layers();
  const std::vector<LayerPtr> mine = layers();
  std::vector<RewriteNode> nodes;
  for (const LayerPtr& l : mine) nodes.push_back(rewrite_node(*l));
  RewriteOptions o;
  o.fold = fold;
  o.features = -1;
  o.first_trained = first_trained;
  p->plan = plan_gpu_rewrite(nodes, o);
  p->fused = apply_gpu_rewrite(p->plan, mine);
  p->pp.build(p->plain, Device::kGPU);
  p->pf.build(p->fused, Device::kGPU);
  p->pp.init(17);
  EXPECT_EQ(p->pp.entries().size(), p->pf.entries().size());
  for (size_t i = 0; i < p->pp.entries().size() && i < p->pf.entries().size(); ++i) {
    EXPECT_EQ(p->pp.entries()[i].name, p->pf.entries()[i].name);
    EXPECT_EQ(p->pp.entries()[i].offset, p->pf.entries()[i].offset);
  }
  p->pf.params().copy_from(p->pp.params());
  return p;
}

std::string run_list(const std::vector<LayerPtr>& layers) {
  std::string s;
  for (const LayerPtr& l : layers) s += (s.empty() ? "" : " ") + l->name();
  return s;
}

struct Result {
  Tensor y, dx, grads;  // host copies (dx undefined when not asked for)
};

// Forward through `layers`, then backward from dy (grads zeroed first); dx of
// the input when want_dx, else the first layer gets a null dx.
Result run(const std::vector<LayerPtr>& layers, ParamStore& ps, const Tensor& x, const Tensor& dy,
           bool want_dx) {
  std::vector<Tensor> acts;
  acts.reserve(layers.size());  // `in` points into it: no reallocation
  const Tensor* in = &x;
  for (const LayerPtr& l : layers) {
    acts.push_back(gpu_nan(l->output_shape(in->shape())));
    l->forward(*in, acts.back());
    in = &acts.back();
  }
  ps.zero_grads();
  Tensor g = dy, dx;
  for (size_t i = layers.size(); i-- > 0;) {
    const Tensor& xin = i == 0 ? x : acts[i - 1];
    Tensor d;
    if (i > 0 || want_dx) d = gpu_nan(xin.shape());
    layers[i]->backward(xin, acts[i], g, d.defined() ? &d : nullptr);
    g = d;
  }
  Result r;
  r.y = to_cpu(acts.back());
  if (want_dx) r.dx = to_cpu(g);
  r.grads = to_cpu(ps.grads());
  return r;
}

// Equal bit for bit, every element finite.
::testing::AssertionResult same_bits(const Tensor& want, const Tensor& got) {
  if (want.shape() != got.shape())
    return ::testing::AssertionFailure() << "shape " << got.shape().str() << " vs "
                                         << want.shape().str();
  const float *a = want.data<float>(), *b = got.data<float>();
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.numel(); ++i)
    if ((std::memcmp(a + i, b + i, 4) != 0 || !std::isfinite(b[i])) && bad++ == 0) first = i;
  if (bad)
    return ::testing::AssertionFailure() << bad << " of " << want.numel()
                                         << " elements differ; first at " << first
                                         << ": plain " << a[first] << ", fused " << b[first];
  return ::testing::AssertionSuccess();
}

// ‖got − want‖₂ / ‖want‖₂ ≤ tol over `n` floats from offset `at`, all finite.
::testing::AssertionResult close(const Tensor& want, const Tensor& got, double tol,
                                 size_t at = 0, size_t n = 0) {
  if (n == 0) n = want.numel();
  const float *a = want.data<float>() + at, *b = got.data<float>() + at;
  double d = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(b[i]))
      return ::testing::AssertionFailure() << "element " << at + i << " is " << b[i];
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    r += double(a[i]) * a[i];
  }
  const double rel = std::sqrt(d) / std::max(std::sqrt(r), 1e-30);
  if (rel > tol)
    return ::testing::AssertionFailure() << "relative L2 difference " << rel << " > " << tol;
  return ::testing::AssertionSuccess();
}

// Runs both lists on fresh random inputs at batch n, with and without dx, and
// compares them: bit for bit, or (fold) within tol_y for y and dx and tol_g
// for each parameter gradient.
void compare(Pair& p, int n, uint64_t seed, bool exact, double tol_y = 0, double tol_g = 0) {
  const Shape in = p.plain.front()->input_shape().with_batch(n);
  Rng rng(seed);
  const Tensor x = to_gpu(testing::random_tensor(in, rng));
  Shape out = in;
  for (const LayerPtr& l : p.plain) out = l->output_shape(out);
  const Tensor dy = to_gpu(testing::random_tensor(out, rng));
  for (bool want_dx : {true, false}) {
    SCOPED_TRACE(str("batch ", n, want_dx ? ", dx" : ", null dx"));
    const Result a = run(p.plain, p.pp, x, dy, want_dx);
    const Result b = run(p.fused, p.pf, x, dy, want_dx);
    if (exact) {
      EXPECT_TRUE(same_bits(a.y, b.y)) << "y";
      if (want_dx) {
        EXPECT_TRUE(same_bits(a.dx, b.dx)) << "dx";
      }
      EXPECT_TRUE(same_bits(a.grads, b.grads)) << "parameter gradients";
    } else {
      EXPECT_TRUE(close(a.y, b.y, tol_y)) << "y";
      if (want_dx) {
        EXPECT_TRUE(close(a.dx, b.dx, tol_y)) << "dx";
      }
      for (const ParamEntry& e : p.pp.entries())
        EXPECT_TRUE(close(a.grads, b.grads, tol_g, e.offset, e.count)) << e.name;
    }
  }
}

std::string conv_keys(int k, int kernel = 3, int pad = 1) {
  return str("{out_channels: ", k, ", kernel: ", kernel, ", padding: ", pad, "}");
}

// [conv2d, relu, maxpool2d]: the conv with the ReLU epilogue, the pool; the
// pool's backward with the ReLU mask, then the conv's (data gradient too when
// dx is asked for). The pool's 2×2 float4 path (even H, W % 4 == 0), its
// scalar paths (odd sizes), and overlapping windows (the gather).
TEST(GpuFusedLayers, ConvReluPoolIsBitExact) {
  HPMC_REQUIRE_GPU();
  struct Case {
    int c, k, h, w;
    const char* pool;
  };
  const Case cases[] = {{3, 5, 12, 16, "{kernel: 2}"},  // 2×2: conv and pool in one kernel
                        {2, 70, 9, 11, "{kernel: 2}"},  // the same, odd sizes
                        {1, 3, 9, 11, "{kernel: 2}"},   // odd: the cells path
                        {5, 8, 10, 13, "{kernel: 3, stride: 2}"},  // overlapping: the gather
                        {3, 1, 7, 8, "{kernel: 2, stride: 3}"}};   // gaps between windows
  uint64_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(str(c.c, "->", c.k, " on ", c.h, "x", c.w, " pool ", c.pool));
    auto p = build({{"conv1", "conv2d", conv_keys(c.k)}, {"relu1", "relu", ""},
                    {"pool1", "maxpool2d", c.pool}},
                   Shape(1, c.c, c.h, c.w));
    ASSERT_EQ(run_list(p->fused), "conv1+relu1+pool1");
    EXPECT_EQ(p->fused[0]->describe().find("conv2d 3x3 s1 p1 + relu > maxpool2d"), 0u)
        << p->fused[0]->describe();
    for (int n : {1, 3}) compare(*p, n, seed++, true);
  }
}

// A first layer's conv that pools in its own kernel (3×3 of 1–4 channels,
// ReLU, 2×2 pool: implicit::conv2d_forward_pool; backward from its codes:
// the weight gradient straight from them when no dx is asked and the code
// rows are whole words, else the pool's input gradient formed), then a second conv and pool on the GEMM
// path: bit for bit the plain layers, dx included, in fp32 and in bf16 (the
// few-input-channel kernels are the plain conv layer's too: FP32 FMAs in
// fp32, bf16 tensor cores in bf16).
TEST(GpuFusedLayers, ConvPoolInOneKernelIsBitExact) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 140;
  for (Precision prec : {Precision::kFp32, Precision::kBf16}) {
    // W = 16: the weight gradient reads the codes (null dx); W = 12: the
    // pool's input gradient is formed first (its code rows are 6 bytes)
    for (const Shape& in : {Shape(1, 3, 10, 16), Shape(1, 3, 16, 12)}) {
      SCOPED_TRACE(str(precision_name(prec), " ", in.str()));
      auto p = build({{"conv1", "conv2d", conv_keys(24)}, {"relu1", "relu", ""},
                      {"pool1", "maxpool2d", "{kernel: 2}"}, {"conv2", "conv2d", conv_keys(16)},
                      {"relu2", "relu", ""}, {"pool2", "maxpool2d", "{kernel: 2}"}},
                     in, true, -1, prec);
      ASSERT_EQ(run_list(p->fused), "conv1+relu1+pool1 conv2+relu2+pool2");
      for (int n : {1, 3}) compare(*p, n, seed++, true);
    }
  }
}

// Linear layers in tf32 and bf16 (their products on the tensor-core engine,
// whose epilogue takes the bias and the activation after the layer, and the
// ReLU mask of its input in the input gradient): an MLP is one fused layer,
// bit for bit the plain layers — odd feature counts, batch 1 and 3, and a
// batch whose products run on packed bf16 operands (a 520->512 layer at
// batch 513) with split-K weight gradients. A ReLU at the start (its forward
// kernel, its backward the mask of fc1), an activation whose backward is not
// a mask (leaky_relu: its backward kernel from the output), one the linear
// epilogue does not take (sigmoid), and a linear layer at the end with
// nothing after it. In fp32 a linear layer links to nothing.
TEST(GpuFusedLayers, LinearChainsAreBitExact) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 700;
  const auto lin = [](const char* name, int out) {
    return Spec{name, "linear", str("{out_features: ", out, "}")};
  };
  for (Precision prec : {Precision::kTf32, Precision::kBf16}) {
    SCOPED_TRACE(precision_name(prec));
    auto mlp = build({lin("fc1", 45), {"relu1", "relu", ""}, lin("fc2", 129), {"relu2", "relu", ""},
                      lin("fc3", 5)},
                     Shape(1, 37, 1, 1), true, -1, prec);
    ASSERT_EQ(run_list(mlp->fused), "fc1+relu1+fc2+relu2+fc3");
    EXPECT_EQ(mlp->fused[0]->describe(),
              "linear 37->45 + relu > linear 45->129 + relu > linear 129->5");
    for (int n : {1, 3, 70}) compare(*mlp, n, seed++, true);

    auto wide = build({lin("fc1", 520), {"relu1", "relu", ""}, lin("fc2", 512),
                       {"relu2", "relu", ""}, lin("fc3", 7)},
                      Shape(1, 300, 1, 1), true, -1, prec);
    ASSERT_EQ(run_list(wide->fused), "fc1+relu1+fc2+relu2+fc3");
    compare(*wide, 513, seed++, true);

    auto lead = build({{"relu0", "relu", ""}, lin("fc1", 33),
                       {"lrelu1", "leaky_relu", "{negative_slope: 0.1}"}, lin("fc2", 9),
                       {"sig2", "sigmoid", ""}},
                      Shape(1, 19, 1, 1), true, -1, prec);
    ASSERT_EQ(run_list(lead->fused), "relu0+fc1+lrelu1 fc2 sig2");
    // lrelu1's backward is not a mask; sigmoid is not in a linear epilogue
    EXPECT_EQ(lead->plan.declined.size(), 2u);
    for (int n : {1, 3}) compare(*lead, n, seed++, true);
  }
  auto fp32 = build({lin("fc1", 45), {"relu1", "relu", ""}, lin("fc2", 5)}, Shape(1, 37, 1, 1));
  EXPECT_EQ(run_list(fp32->fused), "fc1 relu1 fc2");
  EXPECT_TRUE(fp32->plan.declined.empty());
}

// Linear steps built by hand where the rewrite would not make them: an
// activation the epilogue does not take (sigmoid, tanh: a pass of its own
// after the products), and fp32, whose products have no epilogue (the bias
// broadcast, the activation and the mask as passes of their own). Bit for
// bit the plain layers again.
TEST(GpuFusedLayers, LinearStepsWithoutTheEpilogue) {
  HPMC_REQUIRE_GPU();
  const auto step = [](const char* name, int in, int out, const Activation& a, bool mask,
                       std::vector<std::string> layers) {
    ChainStep s;
    s.kind = ChainStep::Kind::kLinear;
    s.linear = LinearConfig{in, out, true};
    s.owner = name;
    s.layers = std::move(layers);
    s.act = a;
    s.mask_input = mask;
    return s;
  };
  struct Case {
    Precision prec;
    Activation a;
    const char* act_type;
  };
  const Case cases[] = {{Precision::kBf16, Activation::sigmoid(), "sigmoid"},
                        {Precision::kTf32, Activation::tanh(), "tanh"},
                        {Precision::kFp32, Activation::leaky_relu(0.2f), "leaky_relu"}};
  uint64_t seed = 750;
  for (const Case& c : cases) {
    SCOPED_TRACE(str(precision_name(c.prec), " ", c.act_type));
    const Shape in(1, 21, 1, 1);
    // [relu0, fc1, act1, fc2]: relu0's backward as fc1's mask, act1 after fc1.
    std::vector<ChainStep> steps = {
        ChainStep{}, step("fc1", 21, 17, c.a, true, {"fc1", "act1"}),
        step("fc2", 17, 6, Activation::none(), false, {"fc2"})};
    steps[0].kind = ChainStep::Kind::kAct;
    steps[0].act = Activation::relu();
    steps[0].layers = {"relu0"};
    auto p = std::make_unique<Pair>();
    Shape cur = in;
    const std::string act_keys = c.a.kind == ActKind::kLeakyRelu ? "{negative_slope: 0.2}" : "";
    for (const Spec& sp : {Spec{"relu0", "relu", ""}, Spec{"fc1", "linear", "{out_features: 17}"},
                           Spec{"act1", c.act_type, act_keys},
                           Spec{"fc2", "linear", "{out_features: 6}"}}) {
      p->plain.push_back(make_layer(sp.type, sp.keys, Impl::kIm2col, cur, sp.name));
      p->plain.back()->set_precision(c.prec);
      cur = p->plain.back()->output_shape(cur);
    }
    LayerPtr fused = gpu::make_fused_layer(steps);
    fused->set_input_shape(in);
    fused->set_precision(c.prec);
    p->fused = {fused};
    p->pp.build(p->plain, Device::kGPU);
    p->pf.build(p->fused, Device::kGPU);
    p->pp.init(5);
    p->pf.params().copy_from(p->pp.params());
    for (int n : {1, 3, 40}) compare(*p, n, seed++, true);
  }
}

// [conv2d, relu] with nothing after it to take the ReLU's backward: the
// epilogue forward, and the ReLU's backward kernel (from y) before the conv's.
TEST(GpuFusedLayers, ConvReluAloneIsBitExact) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 200;
  for (const Shape& in : {Shape(1, 3, 7, 9), Shape(1, 5, 16, 16), Shape(1, 1, 5, 3)}) {
    SCOPED_TRACE(in.str());
    auto p = build({{"conv1", "conv2d", conv_keys(5)}, {"relu1", "relu", ""}}, in);
    ASSERT_EQ(run_list(p->fused), "conv1+relu1");
    for (int n : {1, 3}) compare(*p, n, seed++, true);
  }
  // Then a plain conv: it takes no mask, so the ReLU's backward stays in the fused layer.
  auto p = build({{"conv1", "conv2d", conv_keys(4)}, {"relu1", "relu", ""},
                  {"conv2", "conv2d", conv_keys(3)}},
                 Shape(1, 3, 9, 7));
  ASSERT_EQ(run_list(p->fused), "conv1+relu1 conv2");
  compare(*p, 3, seed++, true);
}

// [conv2d, relu, upsample2d] without the fold: the upsample's backward with
// the ReLU mask (its ×2 float path and the scalar ×3 one).
TEST(GpuFusedLayers, ConvReluUpsampleIsBitExact) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 300;
  for (int scale : {2, 3}) {
    SCOPED_TRACE(str("x", scale));
    auto p = build({{"conv1", "conv2d", conv_keys(3)}, {"relu1", "relu", ""},
                    {"up1", "upsample2d", str("{scale: ", scale, "}")}},
                   Shape(1, 5, 6, 7), /*fold=*/false);
    ASSERT_EQ(run_list(p->fused), "conv1+relu1+up1");
    for (int n : {1, 3}) compare(*p, n, seed++, true);
  }
}

// [relu, maxpool2d] and [relu, upsample2d] where no im2col conv comes before
// (the ReLU's forward kernel, the layer's backward with the mask).
TEST(GpuFusedLayers, ReluThenMaskingLayerIsBitExact) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 400;
  for (const Spec& next : {Spec{"pool1", "maxpool2d", "{kernel: 2}"},
                           Spec{"pool1", "maxpool2d", "{kernel: 3, stride: 1}"},
                           Spec{"up1", "upsample2d", "{scale: 2}"}}) {
    SCOPED_TRACE(next.keys);
    auto p = build({{"relu1", "relu", ""}, next}, Shape(1, 3, 9, 12), /*fold=*/false);
    ASSERT_EQ(run_list(p->fused), "relu1+" + next.name);
    for (int n : {1, 3}) compare(*p, n, seed++, true);
  }
}

// [upsample2d, conv2d] folded: the GEMM fold (C, K multiples of 8) and the
// thin fold (K ≤ 4, any C), odd low-resolution sizes.
TEST(GpuFusedLayers, UpsampleConvFoldIsWithinRounding) {
  HPMC_REQUIRE_GPU();
  struct Case {
    int c, k, h, w;
  };
  uint64_t seed = 500;
  for (const Case& c : {Case{8, 8, 5, 7}, Case{16, 24, 4, 3}, Case{5, 3, 7, 5}, Case{8, 1, 3, 9}}) {
    SCOPED_TRACE(str(c.c, "->", c.k, " on ", c.h, "x", c.w, " (x2)"));
    auto p = build({{"up1", "upsample2d", "{scale: 2}"}, {"conv1", "conv2d", conv_keys(c.k)}},
                   Shape(1, c.c, c.h, c.w));
    ASSERT_EQ(run_list(p->fused), "up1+conv1");
    for (int n : {1, 3}) compare(*p, n, seed++, false, 1e-5, 1e-4);
  }
}

// [relu, upsample2d, conv2d] folded: the ReLU's mask in the folded conv's data
// gradient (its input is the ReLU's output).
TEST(GpuFusedLayers, ReluUpsampleConvFoldIsWithinRounding) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 600;
  for (int k : {8, 3}) {
    SCOPED_TRACE(str("K = ", k));
    auto p = build({{"relu1", "relu", ""}, {"up1", "upsample2d", "{scale: 2}"},
                    {"conv1", "conv2d", conv_keys(k)}},
                   Shape(1, 8, 5, 6));
    ASSERT_EQ(run_list(p->fused), "relu1+up1+conv1");
    for (int n : {1, 3}) compare(*p, n, seed++, false, 1e-5, 1e-4);
  }
}

// The autoencoders' decoder as one fused layer: conv3 with relu3 in its
// epilogue; up1 folded into conv4 (GEMM fold), relu4 in its epilogue and
// relu3's mask in its data gradient; up2 folded into conv5 (thin fold, 3
// channels) with relu4's mask. Without the fold: three layers, bit-exact.
TEST(GpuFusedLayers, DecoderChain) {
  HPMC_REQUIRE_GPU();
  const std::vector<Spec> decoder = {
      {"conv3", "conv2d", conv_keys(16)}, {"relu3", "relu", ""},
      {"up1", "upsample2d", "{scale: 2}"}, {"conv4", "conv2d", conv_keys(8)},
      {"relu4", "relu", ""},               {"up2", "upsample2d", "{scale: 2}"},
      {"conv5", "conv2d", conv_keys(3)}};
  const Shape in(1, 16, 3, 5);
  {
    auto p = build(decoder, in);
    ASSERT_EQ(run_list(p->fused), "conv3+relu3+up1+conv4+relu4+up2+conv5");
    // relu4's mask may flip where conv4's output rounds across 0: 1e-3 for
    // the gradients behind it.
    for (int n : {1, 3}) compare(*p, n, 700 + uint64_t(n), false, 1e-5, 1e-3);
  }
  {
    auto p = build(decoder, in, /*fold=*/false);
    ASSERT_EQ(run_list(p->fused), "conv3+relu3+up1 conv4+relu4+up2 conv5");
    for (int n : {1, 3}) compare(*p, n, 710 + uint64_t(n), true);
  }
}

// The shipped autoencoders on im2col run three layers each: the two encoder
// stages and the decoder (the kernels they ran before the rewrite).
TEST(GpuFusedLayers, ShippedAutoencodersRunThreeFusedLayers) {
  HPMC_REQUIRE_GPU();
  for (const auto& [path, sample] :
       {std::pair<std::string, Shape>{"configs/cifar_ae.yaml", Shape(1, 3, 32, 32)},
        {"configs/fashion_ae.yaml", Shape(1, 1, 28, 28)}}) {
    SCOPED_TRACE(path);
    const Config cfg = load_config(testing::source_dir() + "/" + path);
    auto m = Model::build(cfg, Impl::kIm2col, sample, 10);
    EXPECT_EQ(run_list(m->layers()),
              "conv1+relu1+pool1 conv2+relu2+pool2 conv3+relu3+up1+conv4+relu4+up2+conv5");
    EXPECT_EQ(m->features_layer(), 1);
    EXPECT_EQ(m->features_name(), "pool2");
    EXPECT_TRUE(m->rewrite().declined.empty());
    std::vector<std::string> names;
    for (const ParamEntry& e : m->params().entries()) names.push_back(e.name);
    EXPECT_EQ(names, (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight",
                                               "conv2.bias", "conv3.weight", "conv3.bias",
                                               "conv4.weight", "conv4.bias", "conv5.weight",
                                               "conv5.bias"}));
    std::ostringstream table;
    m->print_table(table);
    EXPECT_NE(table.str().find("fused conv2d 3x3 s1 p1 + relu > maxpool2d 2x2 s2"),
              std::string::npos)
        << table.str();
    // The batch limit still counts the tensors inside the fused layers: conv1's
    // output (the widest) is held by the first one.
    try {
      m->check_batch(1 << 24, "training.batch_size");
      ADD_FAILURE() << "no error for a batch of 2^24";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("the output of layer 'conv1'"), std::string::npos)
          << e.what();
    }
  }
}

// ---- other activations in the epilogue ------------------------------------------------

ChainStep conv_act_step(int c, int k, const Activation& a, int fold) {
  ChainStep s;
  s.kind = ChainStep::Kind::kConv;
  s.conv = Conv2dConfig{c, k, 3, 1, 1, true};
  s.owner = "conv";
  if (fold > 1) s.layers.push_back("up");
  s.layers.push_back("conv");
  if (!a.is_none()) s.layers.push_back("act");
  s.act = a;
  s.fold = fold;
  return s;
}

// dy · act'(from y), on the host: the formulas of epilogue_act.cuh.
float grad_from_output(const Activation& a, float y, float dy) {
  switch (a.kind) {
    case ActKind::kRelu: return y > 0.0f ? dy : 0.0f;
    case ActKind::kLeakyRelu: return y > 0.0f ? dy : dy * a.slope;
    case ActKind::kSigmoid: return dy * (1.0f - y) * y;
    case ActKind::kTanh: return dy * ((1.0f - y) * (1.0f + y));
    default: return dy;
  }
}

// A fused [conv2d, act] (and [upsample2d, conv2d, act] folded) for each
// activation an epilogue takes whose backward needs only its output, against
// the same convolution without the activation (the plain conv2d layer; for
// the fold, the fused [upsample2d, conv2d]: the same kernels): y is act(its
// output), within act_testing.h's bounds; the gradients are its backward of
// dy · act'(y), computed on the host from the fused y, bit for bit.
TEST(GpuFusedLayers, OtherEpilogueActivations) {
  HPMC_REQUIRE_GPU();
  const Activation acts[] = {Activation::relu(), Activation::leaky_relu(0.01f),
                             Activation::leaky_relu(0.3f), Activation::sigmoid(),
                             Activation::tanh()};
  uint64_t seed = 800;
  for (int fold : {1, 2})
    for (const Activation& a : acts) {
      SCOPED_TRACE(str(activation_text(a), fold > 1 ? " folded" : ""));
      const int c = 8, k = fold > 1 ? 8 : 5;
      const Shape in(3, c, 5, 7);  // the input (low resolution when folded)
      LayerPtr fused = gpu::make_fused_layer({conv_act_step(c, k, a, fold)});
      fused->set_input_shape(in.with_batch(1));
      LayerPtr ref = fold > 1
                         ? gpu::make_fused_layer({conv_act_step(c, k, Activation::none(), fold)})
                         : make_layer("conv2d", conv_keys(k), Impl::kIm2col, in, "conv");
      ref->set_input_shape(in.with_batch(1));
      ParamStore pp, pf;
      pp.build({ref}, Device::kGPU);
      pf.build({fused}, Device::kGPU);
      pp.init(3);
      pf.params().copy_from(pp.params());

      Rng rng(seed++);
      const Tensor x = to_gpu(testing::random_tensor(in, rng));
      const Shape out = fused->output_shape(in);
      const Tensor dy_h = testing::random_tensor(out, rng);
      // fused
      Tensor y = gpu_nan(out), dx = gpu_nan(in);
      pf.zero_grads();
      fused->forward(x, y);
      fused->backward(x, y, to_gpu(dy_h), &dx);
      const Tensor yf = to_cpu(y);
      // the reference's output, activated on the host
      Tensor v = gpu_nan(out);
      ref->forward(x, v);
      const Tensor vh = to_cpu(v);
      const std::vector<float> vv(vh.data<float>(), vh.data<float>() + vh.numel());
      const std::vector<float> yy(yf.data<float>(), yf.data<float>() + yf.numel());
      EXPECT_TRUE(testing::act_of(vv, yy, a, {}, size_t(out.h) * out.w, size_t(out.c))) << "y";
      // backward: the reference's, of dy · act'(y) from the fused y
      Tensor pre = Tensor::empty(out);
      for (size_t i = 0; i < pre.numel(); ++i)
        pre.data<float>()[i] = grad_from_output(a, yy[i], dy_h.data<float>()[i]);
      pp.zero_grads();
      Tensor dref = gpu_nan(in);
      ref->backward(x, v, to_gpu(pre), &dref);
      EXPECT_TRUE(same_bits(to_cpu(dref), to_cpu(dx))) << "dx";
      EXPECT_TRUE(same_bits(to_cpu(pp.grads()), to_cpu(pf.grads()))) << "parameter gradients";
    }
}

}  // namespace
}  // namespace hpmc
