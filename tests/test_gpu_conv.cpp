// GPU Conv2D and Linear (layers/gpu/conv2d.h, linear.h; kernel families of
// conv2d_kernels.h): every family — naive, tiled and implicit (--impl
// im2col) — against the CPU reference computed in double, forward and all
// gradients, over a named sweep of shapes; the families against each other;
// the gradient convention (parameter gradients accumulate, dx is
// overwritten); bit-identical repeated runs; every output element written
// (outputs are poisoned with NaN before each call); and, in a CUDA build,
// the family GEMMs directly over every transpose and the accumulate flag.
//
// Every test starts with HPMC_REQUIRE_GPU(): without CUDA or a visible
// device they skip and say why. Every suite name starts with "GpuConv"
// (Linear too: it runs the same families' GEMMs), so
// --gtest_filter='GpuConv*' selects exactly this file.
//
// Error bound. Each output is an fp32 sum of n products in some order
// (n = C·R·S for y, ≈ K·R·S/stride² for dx, N·P·Q for dw and db, `in`,
// `batch` or `out` for Linear); the reference is the same sum in double
// (error ~1e-16, negligible). We check
//     ‖gpu − ref‖∞ ≤ kTol · max(‖ref‖∞, kTiny),   kTol = 1e-5.
// The worst-case bound |fl(Σ) − Σ| ≤ γ_n·Σ|terms| with γ_n ≈ n·2^-24 is,
// for the largest reduction here (dw of the batch-64 16x16 case, n = 16384;
// next the CIFAR 3→256 layer's dw, n = 4·32·32 = 4096, and its 256-channel
// forward, n = 2304), about 1e-3 of Σ|terms| — useless as a test bound,
// since dropping one tap changes a result by only ~1e-3 of ‖ref‖∞. The data
// are zero-mean U(−1, 1), so the rounding errors add like a random walk:
// for sequential summation the error has standard deviation
// ≈ 2^-24·n·rms(term)/√6 while ‖ref‖∞ ≈ 4·√n·rms(term), so the worst
// element's relative error is ≈ 0.4·√n·2^-24 ≈ 3e-6 at n = 16384 (the naive
// kernels sum strictly sequentially; the tiled kernels' blocked sums do
// better). 1e-5 leaves a margin of 3 at the largest n and ~10 at the conv
// layers of the real models, and a dropped or doubled term (≥ ~1e-3
// relative) still fails by two orders of magnitude.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "gpu_testing.h"
#include "layers/conv_shape.h"
#include "layers/cpu/conv2d_ops.h"
#include "layers/cpu/linear_ops.h"
#include "layers/gpu/conv2d.h"
#include "layers/gpu/factory.h"
#include "layers/gpu/linear.h"
#include "model/impl.h"
#include "testing.h"

#ifdef HPMC_WITH_CUDA
#include "layers/gpu/conv2d_kernels.h"
#endif

namespace hpmc {
namespace {

using testing::random_tensor;
using testing::to_cpu;
using testing::to_gpu;

constexpr double kTol = 1e-5;
constexpr double kTiny = 1e-30;

// The GPU families under test; kIm2col runs the `implicit` kernels.
const Impl kFamilies[] = {Impl::kNaive, Impl::kTiled, Impl::kIm2col};

// ---- helpers -------------------------------------------------------------------------

std::vector<float> host_vector(const Tensor& t) {
  Tensor h = t.device() == Device::kCPU ? t : to_cpu(t);
  const float* p = h.data<float>();
  return std::vector<float>(p, p + h.numel());
}

std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

Tensor gpu_from(const Shape& s, const std::vector<float>& v) {
  Tensor h = Tensor::empty(s);
  std::copy(v.begin(), v.end(), h.data<float>());
  return to_gpu(h);
}

// Fill a device tensor with NaN: any element a kernel fails to write stays
// NaN and fails every comparison below.
void poison(Tensor& t) {
  Tensor h = Tensor::empty(t.shape());
  std::fill(h.data<float>(), h.data<float>() + h.numel(), std::numeric_limits<float>::quiet_NaN());
  t.copy_from(h);
}

size_t count_nan(const std::vector<float>& v) {
  size_t n = 0;
  for (float x : v) n += std::isnan(x) ? 1 : 0;
  return n;
}

using testing::rel_inf_error;

// Expect `got` within kTol·‖ref‖∞ of ref and fully written.
void expect_close(const std::vector<float>& got, const std::vector<double>& ref, const char* what,
                  double tol = kTol) {
  EXPECT_EQ(count_nan(got), 0u) << what << ": elements never written (still NaN)";
  EXPECT_LE(rel_inf_error(got, ref), tol) << what;
}

std::vector<float> random_floats(size_t n, Rng& rng, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

// A GPU layer from the factory with its parameters and (zeroed) gradient
// buffers on the device, bound, input shape set.
struct GpuLayer {
  LayerPtr layer;
  Tensor w, b, gw, gb;  // b / gb undefined without bias

  GpuLayer(LayerPtr l, const Shape& sample, const std::vector<float>& wv,
           const std::vector<float>& bv)
      : layer(std::move(l)) {
    const auto specs = layer->param_specs();
    w = gpu_from(Shape(1, int(wv.size()), 1, 1), wv);
    gw = Tensor::zeros(w.shape(), DType::kF32, Device::kGPU);
    std::vector<float*> params{w.data<float>()}, grads{gw.data<float>()};
    if (specs.size() > 1) {
      b = gpu_from(Shape(1, int(bv.size()), 1, 1), bv);
      gb = Tensor::zeros(b.shape(), DType::kF32, Device::kGPU);
      params.push_back(b.data<float>());
      grads.push_back(gb.data<float>());
    }
    layer->bind(params, grads);
    layer->set_input_shape(sample);
  }

  // y = layer(x) into a NaN-poisoned output.
  Tensor forward(const Tensor& x) {
    Tensor y = Tensor::empty(layer->output_shape(x.shape()), DType::kF32, Device::kGPU);
    poison(y);
    layer->forward(x, y);
    return y;
  }
  // Backward into a NaN-poisoned dx (if want_dx); returns dx (or undefined).
  Tensor backward(const Tensor& x, const Tensor& y, const Tensor& dy, bool want_dx = true) {
    Tensor dx;
    if (want_dx) {
      dx = Tensor::empty(x.shape(), DType::kF32, Device::kGPU);
      poison(dx);
    }
    layer->backward(x, y, dy, want_dx ? &dx : nullptr);
    return dx;
  }
  void zero_grads() {
    gw.fill_zero();
    if (gb.defined()) gb.fill_zero();
  }
};

// Everything one forward + backward produces, on the host.
struct Results {
  std::vector<float> y, dx, dw, db;
};

// ---- Conv2D ----------------------------------------------------------------------------

struct ConvCase {
  int n, c, h, w, k, kernel, stride, pad;
  bool bias = true;

  Conv2dConfig config() const { return Conv2dConfig{c, k, kernel, stride, pad, bias}; }
  Conv2dShape shape() const {
    return make_conv2d_shape(n, c, h, w, k, kernel, kernel, stride, pad);
  }
  std::string name() const {
    return str("n", n, "_c", c, "_", h, "x", w, "_k", k, "_", kernel, "x", kernel, "_s", stride,
               "_p", pad, bias ? "" : "_nobias");
  }
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name(); }

ConvCase no_bias(ConvCase c) {
  c.bias = false;
  return c;
}

// Random inputs for one case: x, w, b drawn like the CPU tests (weights
// U(±1/sqrt(fan_in)), data U(−1, 1)), dy U(−1, 1).
struct ConvData {
  std::vector<float> x, w, b, dy;
  ConvData(const ConvCase& cc, uint64_t seed) {
    Rng rng(seed);
    const Conv2dShape s = cc.shape();
    const float bound = 1.f / std::sqrt(float(cc.c * cc.kernel * cc.kernel));
    x = random_floats(size_t(s.N) * s.in_sample(), rng);
    w = random_floats(s.weight_count(), rng, -bound, bound);
    if (cc.bias) b = random_floats(size_t(s.K), rng, -bound, bound);
    dy = random_floats(size_t(s.N) * s.out_sample(), rng);
  }
};

uint64_t seed_of(const ConvCase& cc) {
  return 7000 + uint64_t(cc.n) * 7 + cc.c * 31 + cc.k * 131 + cc.h * 17 + cc.w + cc.kernel * 3 +
         cc.stride * 5 + cc.pad;
}

// The reference in double: the direct seven-loop oracle where it is cheap,
// else the im2col + gemm path of conv2d_ops.h in double (itself tested
// against the oracle and finite differences in test_conv2d.cpp).
struct Reference {
  std::vector<double> y, dx, dw, db;
};

Reference conv_reference(const ConvCase& cc, const ConvData& d) {
  const Conv2dShape s = cc.shape();
  const auto x = to_double(d.x), w = to_double(d.w), b = to_double(d.b), dy = to_double(d.dy);
  const double* bp = cc.bias ? b.data() : nullptr;
  Reference r;
  r.y.assign(dy.size(), 0.0);
  r.dx.assign(x.size(), 0.0);
  r.dw.assign(w.size(), 0.0);
  r.db.assign(b.size(), 0.0);
  const double macs = double(s.N) * s.K * s.P * s.Q * s.C * s.R * s.S;
  if (macs <= 2e7) {
    cpu::conv2d_direct_forward(s, x.data(), w.data(), bp, r.y.data());
    cpu::conv2d_direct_backward_data(s, dy.data(), w.data(), r.dx.data());
    cpu::conv2d_direct_backward_weight(s, x.data(), dy.data(), r.dw.data());
    if (cc.bias) cpu::conv2d_direct_backward_bias(s, dy.data(), r.db.data());
  } else {
    cpu::Conv2dWorkspace<double> ws;
    cpu::conv2d_gemm_forward(s, x.data(), w.data(), bp, r.y.data(), ws);
    cpu::conv2d_gemm_backward_data(s, dy.data(), w.data(), r.dx.data(), ws);
    cpu::conv2d_gemm_backward_params(s, x.data(), dy.data(), r.dw.data(),
                                     cc.bias ? r.db.data() : nullptr, ws);
  }
  return r;
}

GpuLayer make_conv(const ConvCase& cc, Impl impl, const ConvData& d) {
  return GpuLayer(std::make_shared<gpu::Conv2dGPU>("conv", cc.config(), gpu::family_of(impl, "conv")), Shape(1, cc.c, cc.h, cc.w), d.w,
                  d.b);
}

// One forward and one backward (dx requested) from zeroed gradients.
Results run_conv(const ConvCase& cc, Impl impl, const ConvData& d) {
  GpuLayer g = make_conv(cc, impl, d);
  Tensor x = gpu_from(Shape(cc.n, cc.c, cc.h, cc.w), d.x);
  Tensor y = g.forward(x);
  Tensor dy = gpu_from(y.shape(), d.dy);
  Tensor dx = g.backward(x, y, dy);
  Results r{host_vector(y), host_vector(dx), host_vector(g.gw), {}};
  if (cc.bias) r.db = host_vector(g.gb);
  return r;
}

class GpuConvSweep : public ::testing::TestWithParam<ConvCase> {};

TEST_P(GpuConvSweep, EveryFamilyMatchesCpuReference) {
  HPMC_REQUIRE_GPU();
  const ConvCase& cc = GetParam();
  const ConvData d(cc, seed_of(cc));
  const Reference ref = conv_reference(cc, d);
  for (Impl impl : kFamilies) {
    SCOPED_TRACE(str("family ", impl_name(impl)));
    const Results r = run_conv(cc, impl, d);
    expect_close(r.y, ref.y, "forward y");
    expect_close(r.dx, ref.dx, "input gradient dx");
    expect_close(r.dw, ref.dw, "weight gradient dw");
    if (cc.bias) expect_close(r.db, ref.db, "bias gradient db");
  }
}

TEST_P(GpuConvSweep, FamiliesAgreeWithEachOther) {
  HPMC_REQUIRE_GPU();
  const ConvCase& cc = GetParam();
  const ConvData d(cc, seed_of(cc) + 1);
  const Results naive = run_conv(cc, Impl::kNaive, d);
  const auto y = to_double(naive.y), dx = to_double(naive.dx), dw = to_double(naive.dw),
             db = to_double(naive.db);
  for (Impl impl : {Impl::kTiled, Impl::kIm2col}) {
    SCOPED_TRACE(str("family ", impl_name(impl), " vs naive"));
    const Results r = run_conv(cc, impl, d);
    // Both sides carry fp32 rounding: twice the bound against the reference.
    expect_close(r.y, y, "forward y", 2 * kTol);
    expect_close(r.dx, dx, "input gradient dx", 2 * kTol);
    expect_close(r.dw, dw, "weight gradient dw", 2 * kTol);
    if (cc.bias) expect_close(r.db, db, "bias gradient db", 2 * kTol);
  }
}

// {n, c, h, w, k, kernel, stride, pad}: odd sizes that are multiples of no
// tile (7x5, 13x11, 33x31 — 33 spans three 16-wide tiles), strides 1, 2, 3
// and 8, paddings 0/1/2, kernels 1/3/5 (and 5x5 on a 5x5 image), batch 1
// and 64, 1/3/5 channels, and channel counts past the 8-channel blocking of
// the tiled kernels (c 11/20, k 9/10/17).
INSTANTIATE_TEST_SUITE_P(
    GpuConvShapes, GpuConvSweep,
    ::testing::Values(
        ConvCase{1, 1, 7, 5, 1, 3, 1, 0}, ConvCase{1, 3, 7, 5, 3, 3, 1, 1},
        ConvCase{2, 3, 13, 11, 5, 3, 1, 1}, ConvCase{2, 5, 13, 11, 5, 5, 2, 2},
        ConvCase{3, 1, 13, 11, 3, 5, 1, 2}, ConvCase{2, 5, 7, 5, 3, 3, 2, 0},
        ConvCase{2, 3, 33, 31, 5, 3, 1, 1}, ConvCase{1, 5, 33, 31, 3, 5, 2, 2},
        ConvCase{1, 5, 33, 31, 1, 5, 1, 0}, ConvCase{2, 3, 33, 31, 5, 1, 1, 0},
        ConvCase{1, 3, 13, 11, 5, 1, 2, 0}, ConvCase{2, 1, 5, 5, 3, 5, 1, 0},
        ConvCase{2, 11, 13, 11, 10, 3, 1, 1}, ConvCase{2, 20, 17, 19, 17, 3, 2, 2},
        ConvCase{2, 5, 33, 31, 9, 3, 2, 1}, ConvCase{2, 3, 17, 16, 4, 5, 3, 2},
        // stride 8: the forward halo tile exceeds 48 KiB, tiled falls back to naive
        ConvCase{1, 2, 70, 69, 3, 3, 8, 1},
        // large batch: dw and db reduce over 64·16·16 = 16384 positions
        ConvCase{64, 3, 16, 16, 5, 3, 1, 1}, ConvCase{64, 5, 16, 16, 3, 3, 2, 1},
        no_bias(ConvCase{2, 3, 13, 11, 5, 3, 1, 1}), no_bias(ConvCase{1, 5, 7, 5, 8, 1, 1, 0})),
    [](const ::testing::TestParamInfo<ConvCase>& p) { return p.param.name(); });

// The five convolutions of the CIFAR-10 autoencoder (3x3, pad 1), batch 4.
INSTANTIATE_TEST_SUITE_P(
    GpuConvCifarAutoencoder, GpuConvSweep,
    ::testing::Values(ConvCase{4, 3, 32, 32, 256, 3, 1, 1}, ConvCase{4, 256, 16, 16, 128, 3, 1, 1},
                      ConvCase{4, 128, 8, 8, 128, 3, 1, 1}, ConvCase{4, 128, 16, 16, 256, 3, 1, 1},
                      ConvCase{4, 256, 32, 32, 3, 3, 1, 1}),
    [](const ::testing::TestParamInfo<ConvCase>& p) { return p.param.name(); });

// ---- Conv2D: gradient convention, determinism, metadata ---------------------------------

TEST(GpuConvLayer, ParamGradsAccumulateAndDxIsOverwritten) {
  HPMC_REQUIRE_GPU();
  const ConvCase cc{4, 3, 9, 7, 5, 3, 1, 1};
  const ConvData d(cc, 5);
  for (Impl impl : kFamilies) {
    SCOPED_TRACE(str("family ", impl_name(impl)));
    GpuLayer g = make_conv(cc, impl, d);
    Tensor x = gpu_from(Shape(cc.n, cc.c, cc.h, cc.w), d.x);
    Tensor y = g.forward(x);
    Tensor dy = gpu_from(y.shape(), d.dy);
    const auto dx1 = host_vector(g.backward(x, y, dy));  // into NaN: overwritten
    const auto gw1 = host_vector(g.gw), gb1 = host_vector(g.gb);
    const auto dx2 = host_vector(g.backward(x, y, dy));
    const auto gw2 = host_vector(g.gw), gb2 = host_vector(g.gb);
    EXPECT_EQ(count_nan(dx1), 0u);
    EXPECT_EQ(dx2, dx1) << "dx must be overwritten, not accumulated";
    for (size_t i = 0; i < gw1.size(); ++i) ASSERT_EQ(gw2[i], 2 * gw1[i]) << "dw[" << i << "]";
    for (size_t i = 0; i < gb1.size(); ++i) ASSERT_EQ(gb2[i], 2 * gb1[i]) << "db[" << i << "]";

    // A null dx skips the input gradient and gives the same parameter gradients.
    g.zero_grads();
    g.backward(x, y, dy, /*want_dx=*/false);
    EXPECT_EQ(host_vector(g.gw), gw1);
    EXPECT_EQ(host_vector(g.gb), gb1);
  }
}

TEST(GpuConvLayer, RepeatedRunsAreBitIdentical) {
  HPMC_REQUIRE_GPU();
  // 9·33·31 = 9207 positions: the tiled weight gradient is reduced from
  // several per-slice partial sums.
  const ConvCase cc{9, 3, 33, 31, 10, 3, 1, 1};
  const ConvData d(cc, 8);
  for (Impl impl : kFamilies) {
    SCOPED_TRACE(str("family ", impl_name(impl)));
    const Results a = run_conv(cc, impl, d);
    // A bigger call in between makes the tiled workspace grow.
    run_conv(ConvCase{16, 8, 33, 31, 16, 3, 1, 1}, impl, ConvData({16, 8, 33, 31, 16, 3, 1, 1}, 9));
    const Results b = run_conv(cc, impl, d);
    auto same = [](const std::vector<float>& u, const std::vector<float>& v) {
      return u.size() == v.size() &&
             (u.empty() || std::memcmp(u.data(), v.data(), u.size() * sizeof(float)) == 0);
    };
    EXPECT_TRUE(same(a.y, b.y)) << "y";
    EXPECT_TRUE(same(a.dx, b.dx)) << "dx";
    EXPECT_TRUE(same(a.dw, b.dw)) << "dw";
    EXPECT_TRUE(same(a.db, b.db)) << "db";
  }
}

TEST(GpuConvLayer, MetadataMatchesCpuLayer) {
  HPMC_REQUIRE_GPU();
  const Conv2dConfig cfg{3, 256, 3, 1, 1, true};
  const char* names[] = {"naive", "tiled", "im2col"};
  for (int i = 0; i < 3; ++i) {
    LayerPtr l = std::make_shared<gpu::Conv2dGPU>("enc1", cfg, gpu::family_of(kFamilies[i], "enc1"));
    EXPECT_STREQ(l->type(), "conv2d");
    EXPECT_STREQ(l->impl(), names[i]);
    EXPECT_EQ(l->device(), Device::kGPU);
    EXPECT_EQ(l->describe(), "3x3 s1 p1");
    EXPECT_EQ(l->param_count(), size_t(256 * 27 + 256));
    EXPECT_EQ(l->output_shape(Shape(64, 3, 32, 32)), Shape(64, 256, 32, 32));
    EXPECT_THROW(l->output_shape(Shape(1, 1, 28, 28)), ShapeError);
  }
  EXPECT_THROW(std::make_shared<gpu::Conv2dGPU>("bad", Conv2dConfig{3, 8, 3, 1, 3, true}, gpu::family_of(Impl::kTiled, "bad")),
               ConfigError);
}

// ---- Linear ----------------------------------------------------------------------------

struct LinearCase {
  int n, in, out;
  bool bias = true;
  LinearConfig config() const { return LinearConfig{in, out, bias}; }
  std::string name() const { return str("n", n, "_", in, "to", out, bias ? "" : "_nobias"); }
};

void PrintTo(const LinearCase& c, std::ostream* os) { *os << c.name(); }

struct LinearData {
  std::vector<float> x, w, b, dy;
  LinearData(const LinearCase& lc, uint64_t seed) {
    Rng rng(seed);
    const float bound = 1.f / std::sqrt(float(lc.in));
    x = random_floats(size_t(lc.n) * lc.in, rng);
    w = random_floats(size_t(lc.out) * lc.in, rng, -bound, bound);
    if (lc.bias) b = random_floats(size_t(lc.out), rng, -bound, bound);
    dy = random_floats(size_t(lc.n) * lc.out, rng);
  }
};

// The reference: linear_ops.h in double.
Reference linear_reference(const LinearCase& lc, const LinearData& d) {
  const auto x = to_double(d.x), w = to_double(d.w), b = to_double(d.b), dy = to_double(d.dy);
  Reference r;
  r.y.assign(dy.size(), 0.0);
  r.dx.assign(x.size(), 0.0);
  r.dw.assign(w.size(), 0.0);
  r.db.assign(b.size(), 0.0);
  cpu::linear_forward(lc.n, lc.in, lc.out, x.data(), w.data(), lc.bias ? b.data() : nullptr,
                      r.y.data());
  cpu::linear_backward_params(lc.n, lc.in, lc.out, x.data(), dy.data(), r.dw.data(),
                              lc.bias ? r.db.data() : nullptr);
  cpu::linear_backward_data(lc.n, lc.in, lc.out, dy.data(), w.data(), r.dx.data());
  return r;
}

GpuLayer make_fc(const LinearCase& lc, Impl impl, const LinearData& d) {
  return GpuLayer(std::make_shared<gpu::LinearGPU>("fc", lc.config(), gpu::family_of(impl, "fc")), Shape(1, lc.in, 1, 1), d.w, d.b);
}

Results run_linear(const LinearCase& lc, Impl impl, const LinearData& d) {
  GpuLayer g = make_fc(lc, impl, d);
  Tensor x = gpu_from(Shape(lc.n, lc.in, 1, 1), d.x);
  Tensor y = g.forward(x);
  Tensor dy = gpu_from(y.shape(), d.dy);
  Tensor dx = g.backward(x, y, dy);
  Results r{host_vector(y), host_vector(dx), host_vector(g.gw), {}};
  if (lc.bias) r.db = host_vector(g.gb);
  return r;
}

class GpuConvLinearSweep : public ::testing::TestWithParam<LinearCase> {};

TEST_P(GpuConvLinearSweep, EveryFamilyMatchesCpuReference) {
  HPMC_REQUIRE_GPU();
  const LinearCase& lc = GetParam();
  const LinearData d(lc, 300 + uint64_t(lc.n) * 7 + lc.in * 13 + lc.out);
  const Reference ref = linear_reference(lc, d);
  std::vector<Results> all;
  for (Impl impl : kFamilies) {
    SCOPED_TRACE(str("family ", impl_name(impl)));
    all.push_back(run_linear(lc, impl, d));
    const Results& r = all.back();
    expect_close(r.y, ref.y, "forward y");
    expect_close(r.dx, ref.dx, "input gradient dx");
    expect_close(r.dw, ref.dw, "weight gradient dw");
    if (lc.bias) expect_close(r.db, ref.db, "bias gradient db");
  }
  // The families against the naive one.
  for (size_t i = 1; i < all.size(); ++i) {
    SCOPED_TRACE(str("family ", impl_name(kFamilies[i]), " vs naive"));
    expect_close(all[i].y, to_double(all[0].y), "forward y", 2 * kTol);
    expect_close(all[i].dx, to_double(all[0].dx), "input gradient dx", 2 * kTol);
    expect_close(all[i].dw, to_double(all[0].dw), "weight gradient dw", 2 * kTol);
    if (lc.bias) expect_close(all[i].db, to_double(all[0].db), "bias gradient db", 2 * kTol);
  }
}

// The MLP's three layers at batch 64, then odd ones: batch 1, 7→5, sizes
// that are multiples of no tile, no bias, large batches into few features.
INSTANTIATE_TEST_SUITE_P(
    GpuConvLinearShapes, GpuConvLinearSweep,
    ::testing::Values(LinearCase{64, 784, 320}, LinearCase{64, 320, 160}, LinearCase{64, 160, 10},
                      LinearCase{1, 7, 5}, LinearCase{1, 784, 320}, LinearCase{5, 7, 5},
                      LinearCase{33, 17, 40}, LinearCase{3, 7, 5, false},
                      LinearCase{70, 35, 1, false},
                      // long reductions over the batch (split-K weight gradients, the
                      // bias gradient's row groups): batches that are multiples of nothing
                      LinearCase{4099, 33, 10}, LinearCase{1031, 70, 3}),
    [](const ::testing::TestParamInfo<LinearCase>& p) { return p.param.name(); });

TEST(GpuConvLinearLayer, ParamGradsAccumulateAndDxIsOverwritten) {
  HPMC_REQUIRE_GPU();
  const LinearCase lc{9, 37, 21};
  const LinearData d(lc, 41);
  for (Impl impl : kFamilies) {
    SCOPED_TRACE(str("family ", impl_name(impl)));
    GpuLayer g = make_fc(lc, impl, d);
    Tensor x = gpu_from(Shape(lc.n, lc.in, 1, 1), d.x);
    Tensor y = g.forward(x);
    Tensor dy = gpu_from(y.shape(), d.dy);
    const auto dx1 = host_vector(g.backward(x, y, dy));
    const auto gw1 = host_vector(g.gw), gb1 = host_vector(g.gb);
    const auto dx2 = host_vector(g.backward(x, y, dy));
    const auto gw2 = host_vector(g.gw), gb2 = host_vector(g.gb);
    EXPECT_EQ(count_nan(dx1), 0u);
    EXPECT_EQ(dx2, dx1) << "dx must be overwritten, not accumulated";
    for (size_t i = 0; i < gw1.size(); ++i) ASSERT_EQ(gw2[i], 2 * gw1[i]) << "dw[" << i << "]";
    for (size_t i = 0; i < gb1.size(); ++i) ASSERT_EQ(gb2[i], 2 * gb1[i]) << "db[" << i << "]";
    g.zero_grads();
    g.backward(x, y, dy, /*want_dx=*/false);
    EXPECT_EQ(host_vector(g.gw), gw1);
    EXPECT_EQ(host_vector(g.gb), gb1);
  }
}

TEST(GpuConvLinearLayer, RepeatedRunsAreBitIdentical) {
  HPMC_REQUIRE_GPU();
  const LinearCase lc{64, 320, 160};
  const LinearData d(lc, 42);
  for (Impl impl : kFamilies) {
    SCOPED_TRACE(str("family ", impl_name(impl)));
    const Results a = run_linear(lc, impl, d);
    const Results b = run_linear(lc, impl, d);
    EXPECT_EQ(std::memcmp(a.y.data(), b.y.data(), a.y.size() * sizeof(float)), 0) << "y";
    EXPECT_EQ(std::memcmp(a.dx.data(), b.dx.data(), a.dx.size() * sizeof(float)), 0) << "dx";
    EXPECT_EQ(std::memcmp(a.dw.data(), b.dw.data(), a.dw.size() * sizeof(float)), 0) << "dw";
    EXPECT_EQ(std::memcmp(a.db.data(), b.db.data(), a.db.size() * sizeof(float)), 0) << "db";
  }
}

TEST(GpuConvLinearLayer, MetadataMatchesCpuLayer) {
  HPMC_REQUIRE_GPU();
  const char* names[] = {"naive", "tiled", "im2col"};
  for (int i = 0; i < 3; ++i) {
    LayerPtr l = std::make_shared<gpu::LinearGPU>("fc1", LinearConfig{784, 128, true}, gpu::family_of(kFamilies[i], "fc1"));
    EXPECT_STREQ(l->type(), "linear");
    EXPECT_STREQ(l->impl(), names[i]);
    EXPECT_EQ(l->device(), Device::kGPU);
    EXPECT_EQ(l->describe(), "784->128");
    EXPECT_EQ(l->param_count(), size_t(784 * 128 + 128));
    EXPECT_EQ(l->output_shape(Shape(64, 784, 1, 1)), Shape(64, 128, 1, 1));
    EXPECT_THROW(l->output_shape(Shape(1, 1, 28, 28)), ShapeError);
  }
  EXPECT_THROW(std::make_shared<gpu::LinearGPU>("bad", LinearConfig{0, 3, true}, gpu::family_of(Impl::kNaive, "bad")), ConfigError);
}

// ---- the family GEMMs directly (CUDA builds only: the kernels exist there) ---------------

#ifdef HPMC_WITH_CUDA

using GemmFn = void (*)(bool, bool, int, int, int, const float*, int, const float*, int, float*,
                        int, bool);

TEST(GpuConvGemm, EveryTransposeAndAccumulateMatchesDoubleReference) {
  HPMC_REQUIRE_GPU();
  const std::pair<const char*, GemmFn> fams[] = {
      {"naive", gpu::naive::gemm}, {"tiled", gpu::tiled::gemm}, {"implicit", gpu::implicit::gemm}};
  struct Size {
    int m, n, k;
  };
  // Odd sizes, a k past several 16-wide steps, k < one tile, a single row / column;
  // then long reductions into few outputs, which the implicit engine splits over k
  // (implicit_plan.h, choose_gemm_splits: k 1000 → 14 slices, 517 → 8, 2051 → 16).
  const Size sizes[] = {{37, 23, 45}, {1, 19, 70}, {40, 1, 5},      {17, 33, 16},
                        {5, 7, 1},    {37, 23, 1000}, {3, 129, 517}, {130, 5, 2051}};
  Rng rng(77);
  for (const auto& fam : fams)
    for (const Size& sz : sizes)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
          for (int acc = 0; acc < 2; ++acc) {
            const int m = sz.m, n = sz.n, k = sz.k;
            SCOPED_TRACE(str(fam.first, " m", m, " n", n, " k", k, ta ? " At" : "", tb ? " Bt" : "",
                             acc ? " accumulate" : ""));
            // Row-major storage with leading dimensions wider than needed.
            const int a_rows = ta ? k : m, a_cols = ta ? m : k;
            const int b_rows = tb ? n : k, b_cols = tb ? k : n;
            const int lda = a_cols + 3, ldb = b_cols + 2, ldc = n + 5;
            auto a = random_floats(size_t(a_rows) * lda, rng);
            auto b = random_floats(size_t(b_rows) * ldb, rng);
            auto c0 = random_floats(size_t(m) * ldc, rng);
            std::vector<float> c_init = c0;
            if (!acc)  // overwrite: the m×n block must all be written
              for (int i = 0; i < m; ++i)
                for (int j = 0; j < n; ++j)
                  c_init[size_t(i) * ldc + j] = std::numeric_limits<float>::quiet_NaN();
            std::vector<double> ref(size_t(m) * n);
            for (int i = 0; i < m; ++i)
              for (int j = 0; j < n; ++j) {
                double s = acc ? double(c0[size_t(i) * ldc + j]) : 0.0;
                for (int l = 0; l < k; ++l) {
                  double av = ta ? a[size_t(l) * lda + i] : a[size_t(i) * lda + l];
                  double bv = tb ? b[size_t(j) * ldb + l] : b[size_t(l) * ldb + j];
                  s += av * bv;
                }
                ref[size_t(i) * n + j] = s;
              }
            Tensor da = gpu_from(Shape(1, int(a.size()), 1, 1), a);
            Tensor db = gpu_from(Shape(1, int(b.size()), 1, 1), b);
            Tensor dc = gpu_from(Shape(1, int(c_init.size()), 1, 1), c_init);
            fam.second(ta, tb, m, n, k, da.data<float>(), lda, db.data<float>(), ldb,
                       dc.data<float>(), ldc, acc);
            gpu::check_after("gemm");
            const auto c = host_vector(dc);
            std::vector<float> block(size_t(m) * n);
            for (int i = 0; i < m; ++i)
              for (int j = 0; j < n; ++j) block[size_t(i) * n + j] = c[size_t(i) * ldc + j];
            expect_close(block, ref, "C");
            // The padding columns j ≥ n of C are never touched.
            for (int i = 0; i < m; ++i)
              for (int j = n; j < ldc; ++j)
                ASSERT_EQ(c[size_t(i) * ldc + j], c0[size_t(i) * ldc + j]) << i << "," << j;
          }
}

#endif  // HPMC_WITH_CUDA

}  // namespace
}  // namespace hpmc
