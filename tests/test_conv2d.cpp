// Conv2D on the CPU: hand-computed cases, finite-difference gradients in
// double for the direct oracle, the im2col + gemm path and the thin path,
// the layer (float; the thin path or im2col + gemm, as conv2d_thin_applies
// picks) against the oracle over a sweep of shapes, the gradient
// convention, determinism, and shape/config errors.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "layers/conv_shape.h"
#include "layers/cpu/conv2d.h"
#include "layers/cpu/conv2d_ops.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::expect_gradients_close;
using testing::numerical_gradient;
using testing::random_vector;

// ---- helpers -------------------------------------------------------------------

std::vector<float> to_vector(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

Tensor from_vector(const Shape& s, const std::vector<float>& v) {
  Tensor t = Tensor::empty(s);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// A Conv2dCPU with its parameters and gradient buffers, bound and with its
// input shape set; the gradients start at zero.
struct ConvFixture {
  Conv2dCPU layer;
  std::vector<float> w, b, gw, gb;

  ConvFixture(const Conv2dConfig& cfg, int h, int w_in, std::vector<float> weight,
              std::vector<float> bias)
      : layer("conv", cfg), w(std::move(weight)), b(std::move(bias)) {
    gw.assign(w.size(), 0.f);
    gb.assign(b.size(), 0.f);
    std::vector<float*> params{w.data()}, grads{gw.data()};
    if (cfg.bias) {
      params.push_back(b.data());
      grads.push_back(gb.data());
    }
    layer.bind(params, grads);
    layer.set_input_shape(Shape(1, cfg.in_channels, h, w_in));
  }

  // Random parameters drawn like PyTorch's default init, U(±1/sqrt(fan_in)).
  static ConvFixture random(const Conv2dConfig& cfg, int h, int w_in, Rng& rng) {
    const int fan_in = cfg.in_channels * cfg.kernel * cfg.kernel;
    const float bound = 1.f / std::sqrt(float(fan_in));
    std::vector<float> weight(size_t(fan_in) * cfg.out_channels), bias;
    for (auto& v : weight) v = rng.uniform(-bound, bound);
    if (cfg.bias) {
      bias.resize(size_t(cfg.out_channels));
      for (auto& v : bias) v = rng.uniform(-bound, bound);
    }
    return ConvFixture(cfg, h, w_in, std::move(weight), std::move(bias));
  }

  ConvFixture(ConvFixture&&) = delete;  // the layer holds pointers into the vectors

  Tensor forward(const Tensor& x) {
    Tensor y = Tensor::empty(layer.output_shape(x.shape()));
    layer.forward(x, y);
    return y;
  }
};

// One convolution configuration; `name()` is what a failure reports.
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

// GoogleTest prints parameters with this instead of a byte dump.
void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name(); }

// Runs `f` and returns the message of the ShapeError it throws ("" if none).
std::string shape_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "";
}

// ---- conv_out_size / Conv2dShape ------------------------------------------------

TEST(Conv2dShape, OutputSize) {
  EXPECT_EQ(conv_out_size(32, 3, 1, 1), 32);
  EXPECT_EQ(conv_out_size(32, 3, 2, 1), 16);
  EXPECT_EQ(conv_out_size(13, 5, 2, 0), 5);  // floor(8 / 2) + 1
  EXPECT_EQ(conv_out_size(11, 5, 2, 0), 4);  // floor(6 / 2) + 1
  EXPECT_EQ(conv_out_size(3, 5, 1, 1), 1);
  // A kernel that does not fit gives 0, not the 1 that truncating division
  // of a small negative span would give.
  EXPECT_EQ(conv_out_size(4, 5, 2, 0), 0);
  EXPECT_EQ(conv_out_size(3, 5, 1, 0), 0);

  Conv2dShape s = make_conv2d_shape(2, 3, 13, 11, 8, 3, 5, 2, 1);
  EXPECT_EQ(s.P, 7);
  EXPECT_EQ(s.Q, 5);
  EXPECT_EQ(s.col_rows(), 3 * 3 * 5);
  EXPECT_EQ(s.col_cols(), 7 * 5);
  EXPECT_EQ(s.weight_count(), size_t(8 * 3 * 3 * 5));
  EXPECT_FALSE(s.is_pointwise());
  EXPECT_TRUE(make_conv2d_shape(1, 3, 4, 4, 2, 1, 1, 1, 0).is_pointwise());
  EXPECT_FALSE(make_conv2d_shape(1, 3, 4, 4, 2, 1, 1, 2, 0).is_pointwise());
}

// ---- hand-computed ---------------------------------------------------------------

// x = 1..9 as one 3x3 image, w = [[1, 2], [3, 4]].
const std::vector<float> kX3x3 = {1, 2, 3, 4, 5, 6, 7, 8, 9};
const std::vector<float> kW2x2 = {1, 2, 3, 4};

// The expected output through the direct ops, the gemm ops and the layer.
void expect_forward(const ConvCase& cc, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& expected) {
  SCOPED_TRACE(cc.name());
  const Conv2dShape sh = cc.shape();
  ASSERT_EQ(sh.N * sh.out_sample(), expected.size());
  const float* bias = cc.bias ? b.data() : nullptr;

  std::vector<float> y(expected.size(), -1.f);
  cpu::conv2d_direct_forward(sh, x.data(), w.data(), bias, y.data());
  EXPECT_EQ(y, expected) << "direct";

  cpu::Conv2dWorkspace<float> ws;
  std::fill(y.begin(), y.end(), -1.f);
  cpu::conv2d_gemm_forward(sh, x.data(), w.data(), bias, y.data(), ws);
  EXPECT_EQ(y, expected) << "im2col+gemm";

  ConvFixture f(cc.config(), cc.h, cc.w, w, b);
  EXPECT_EQ(to_vector(f.forward(from_vector(Shape(cc.n, cc.c, cc.h, cc.w), x))), expected)
      << "layer";
}

TEST(Conv2dForward, HandComputedValid2x2WithBias) {
  // y[p][q] = Σ x[p+r][q+s] · w[r][s] + 0.5, e.g. 1·1 + 2·2 + 4·3 + 5·4 = 37.
  expect_forward({1, 1, 3, 3, 1, 2, 1, 0}, kX3x3, kW2x2, {0.5f}, {37.5f, 47.5f, 67.5f, 77.5f});
}

TEST(Conv2dForward, HandComputedStride2Pad1NoBias) {
  // Windows start at rows/cols -1 and 1, so the top-left output sees only
  // x[0][0]·w[1][1] = 4; the bottom-right sees the full window 5+12+24+36.
  ConvCase cc{1, 1, 3, 3, 1, 2, 2, 1};
  cc.bias = false;
  expect_forward(cc, kX3x3, kW2x2, {}, {4, 18, 36, 77});
}

TEST(Conv2dForward, HandComputedSame3x3BoxFilter) {
  // An all-ones 3x3 kernel with padding 1 sums each 3x3 neighbourhood.
  std::vector<float> ones(9, 1.f);
  expect_forward({1, 1, 3, 3, 1, 3, 1, 1}, kX3x3, ones, {0.f},
                 {12, 21, 16, 27, 45, 33, 24, 39, 28});
}

TEST(Conv2dForward, HandComputedPointwiseMixesChannels) {
  // 1x1: y0 = x0 + 2·x1, y1 = -x0 + 0.5·x1 + 1 (the path without im2col).
  std::vector<float> x = {1, 2, 3, 4, 10, 20, 30, 40};
  expect_forward({1, 2, 2, 2, 2, 1, 1, 0}, x, {1, 2, -1, 0.5f}, {0, 1},
                 {21, 42, 63, 84, 5, 9, 13, 17});
}

TEST(Conv2dBackward, HandComputedValid2x2) {
  // dy = 1 everywhere: db = 4 outputs; dw[r][s] = Σ of the window shifted by
  // (r, s); dx counts the kernel taps that cover each pixel.
  const std::vector<float> dy(4, 1.f);
  const std::vector<float> dw_expected = {12, 16, 24, 28};
  const std::vector<float> db_expected = {4};
  const std::vector<float> dx_expected = {1, 3, 2, 4, 10, 6, 3, 7, 4};

  ConvFixture f(Conv2dConfig{1, 1, 2, 1, 0, true}, 3, 3, kW2x2, {0.5f});
  Tensor x = from_vector(Shape(1, 1, 3, 3), kX3x3);
  Tensor y = f.forward(x);
  Tensor dx = Tensor::empty(x.shape());
  f.layer.backward(x, y, from_vector(y.shape(), dy), &dx);
  EXPECT_EQ(f.gw, dw_expected);
  EXPECT_EQ(f.gb, db_expected);
  EXPECT_EQ(to_vector(dx), dx_expected);

  const Conv2dShape sh = make_conv2d_shape(1, 1, 3, 3, 1, 2, 2, 1, 0);
  std::vector<float> dw(4, 0.f), db(1, 0.f), dxd(9, -1.f);
  cpu::conv2d_direct_backward_weight(sh, kX3x3.data(), dy.data(), dw.data());
  cpu::conv2d_direct_backward_bias(sh, dy.data(), db.data());
  cpu::conv2d_direct_backward_data(sh, dy.data(), kW2x2.data(), dxd.data());
  EXPECT_EQ(dw, dw_expected);
  EXPECT_EQ(db, db_expected);
  EXPECT_EQ(dxd, dx_expected);
}

// ---- im2col ------------------------------------------------------------------------

TEST(Conv2dIm2col, Col2imIsTheAdjointOfIm2col) {
  // <im2col(x), c> == <x, col2im(c)> for every x and c: col2im is exactly
  // the transpose the input gradient needs.
  Rng rng(11);
  for (const Conv2dShape& sh :
       {make_conv2d_shape(1, 2, 7, 5, 1, 3, 3, 2, 1), make_conv2d_shape(1, 3, 6, 9, 1, 3, 2, 1, 2),
        make_conv2d_shape(1, 1, 5, 5, 1, 5, 5, 3, 2),
        // stride 1 with Q == W: the shifted-block paths of im2col and col2im
        make_conv2d_shape(1, 2, 6, 7, 1, 3, 3, 1, 1), make_conv2d_shape(1, 2, 4, 4, 1, 5, 5, 1, 2),
        make_conv2d_shape(1, 2, 3, 5, 1, 1, 3, 1, 1)}) {
    SCOPED_TRACE(str("C", sh.C, " ", sh.H, "x", sh.W, " RxS ", sh.R, "x", sh.S, " s", sh.stride,
                     " p", sh.pad));
    const size_t ncol = size_t(sh.col_rows()) * sh.col_cols();
    auto x = random_vector(sh.in_sample(), rng);
    auto c = random_vector(ncol, rng);
    std::vector<double> col(ncol), back(sh.in_sample(), 0.0);
    cpu::im2col(sh, x.data(), col.data());
    cpu::col2im(sh, c.data(), back.data());
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < ncol; ++i) lhs += col[i] * c[i];
    for (size_t i = 0; i < x.size(); ++i) rhs += x[i] * back[i];
    EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::fabs(lhs)));
  }
}

TEST(Conv2dIm2col, MatchesItsDefinition) {
  // col[(c, r, s), (p, q)] = x[c, p·stride - pad + r, q·stride - pad + s], or 0
  // in the padding; over shapes that take the shifted-block path (stride 1,
  // Q == W, including rows wholly in the padding) and shapes that do not.
  Rng rng(12);
  for (const Conv2dShape& sh :
       {make_conv2d_shape(1, 2, 6, 7, 1, 3, 3, 1, 1), make_conv2d_shape(1, 2, 4, 4, 1, 5, 5, 1, 2),
        make_conv2d_shape(1, 2, 3, 5, 1, 1, 3, 1, 1), make_conv2d_shape(1, 2, 2, 2, 1, 5, 5, 1, 2),
        make_conv2d_shape(1, 2, 7, 5, 1, 3, 3, 2, 1),
        make_conv2d_shape(1, 3, 6, 9, 1, 3, 2, 1, 2)}) {
    SCOPED_TRACE(str("C", sh.C, " ", sh.H, "x", sh.W, " RxS ", sh.R, "x", sh.S, " s", sh.stride,
                     " p", sh.pad));
    auto x = random_vector(sh.in_sample(), rng);
    std::vector<double> col(size_t(sh.col_rows()) * sh.col_cols(), NAN);
    cpu::im2col(sh, x.data(), col.data());
    for (int c = 0; c < sh.C; ++c)
      for (int r = 0; r < sh.R; ++r)
        for (int s = 0; s < sh.S; ++s)
          for (int p = 0; p < sh.P; ++p)
            for (int q = 0; q < sh.Q; ++q) {
              const int ih = p * sh.stride - sh.pad + r, iw = q * sh.stride - sh.pad + s;
              const bool inside = ih >= 0 && ih < sh.H && iw >= 0 && iw < sh.W;
              const double want = inside ? x[(size_t(c) * sh.H + ih) * sh.W + iw] : 0.0;
              const size_t at = (size_t((c * sh.R + r) * sh.S + s) * sh.P + p) * sh.Q + q;
              ASSERT_EQ(col[at], want)
                  << "c" << c << " r" << r << " s" << s << " p" << p << " q" << q;
            }
  }
}

// ---- finite differences in double -------------------------------------------------

enum class ConvPath { kDirect, kGemm, kThin };

// L = Σ r ⊙ conv(x, w, b) for a random r, so dL/dy = r. The analytic input,
// weight and bias gradients must match central differences of L.
void check_gradients(const Conv2dShape& sh, ConvPath path,
                     cpu::SimdLevel level = cpu::best_simd_level()) {
  Rng rng(1234);
  const size_t ny = sh.N * sh.out_sample();
  auto x = random_vector(sh.N * sh.in_sample(), rng);
  auto w = random_vector(sh.weight_count(), rng);
  auto b = random_vector(size_t(sh.K), rng);
  auto r = random_vector(ny, rng);
  cpu::Conv2dWorkspace<double> ws;

  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww,
                  const std::vector<double>& bb) {
    std::vector<double> y(ny);
    if (path == ConvPath::kGemm)
      cpu::conv2d_gemm_forward(sh, xx.data(), ww.data(), bb.data(), y.data(), ws);
    else if (path == ConvPath::kThin)
      cpu::conv2d_thin_forward(sh, xx.data(), ww.data(), bb.data(), y.data(), ws.thin, level);
    else
      cpu::conv2d_direct_forward(sh, xx.data(), ww.data(), bb.data(), y.data());
    double l = 0;
    for (size_t i = 0; i < ny; ++i) l += r[i] * y[i];
    return l;
  };

  std::vector<double> dx(x.size(), 99.0);  // must be overwritten, not added to
  std::vector<double> dw(w.size(), 0.0), db(b.size(), 0.0);
  if (path == ConvPath::kGemm) {
    cpu::conv2d_gemm_backward_data(sh, r.data(), w.data(), dx.data(), ws);
    cpu::conv2d_gemm_backward_params(sh, x.data(), r.data(), dw.data(), db.data(), ws);
  } else if (path == ConvPath::kThin) {
    cpu::conv2d_thin_backward_data(sh, r.data(), w.data(), dx.data(), ws.thin, level);
    cpu::conv2d_thin_backward_params(sh, x.data(), r.data(), dw.data(), db.data(), ws.thin,
                                     level);
  } else {
    cpu::conv2d_direct_backward_data(sh, r.data(), w.data(), dx.data());
    cpu::conv2d_direct_backward_weight(sh, x.data(), r.data(), dw.data());
    cpu::conv2d_direct_backward_bias(sh, r.data(), db.data());
  }

  const double tol = 1e-6;
  expect_gradients_close(dx, numerical_gradient([&](const auto& v) { return loss(v, w, b); }, x),
                         tol, "dx");
  expect_gradients_close(dw, numerical_gradient([&](const auto& v) { return loss(x, v, b); }, w),
                         tol, "dw");
  expect_gradients_close(db, numerical_gradient([&](const auto& v) { return loss(x, w, v); }, b),
                         tol, "db");
}

// Small shapes covering padding, stride, a non-square kernel, padding wider
// than the stride, and the pointwise (no im2col) case.
const std::vector<Conv2dShape> kGradientShapes = {
    make_conv2d_shape(2, 2, 5, 4, 3, 3, 3, 1, 1), make_conv2d_shape(2, 3, 7, 6, 2, 3, 3, 2, 1),
    make_conv2d_shape(2, 2, 6, 5, 2, 3, 2, 2, 1), make_conv2d_shape(1, 1, 5, 5, 2, 3, 3, 3, 2),
    make_conv2d_shape(3, 2, 4, 5, 3, 1, 1, 1, 0),
};

std::string shape_name(const Conv2dShape& s) {
  return str("N", s.N, " C", s.C, " ", s.H, "x", s.W, " K", s.K, " ", s.R, "x", s.S, " s", s.stride,
             " p", s.pad);
}

TEST(Conv2dGradients, DirectMatchesFiniteDifferences) {
  for (const auto& sh : kGradientShapes) {
    SCOPED_TRACE(shape_name(sh));
    check_gradients(sh, ConvPath::kDirect);
  }
}

TEST(Conv2dGradients, Im2colGemmMatchesFiniteDifferences) {
  for (const auto& sh : kGradientShapes) {
    SCOPED_TRACE(shape_name(sh));
    check_gradients(sh, ConvPath::kGemm);
  }
}

// The thin kernels (chosen for every shape above but the 1x1 one, which
// they compute as well) at each SIMD level this CPU runs, plus K = 1 with
// stride 2 and a 5x5 kernel, and an unpadded K = 4.
TEST(Conv2dGradients, ThinMatchesFiniteDifferences) {
  std::vector<Conv2dShape> shapes = kGradientShapes;
  shapes.push_back(make_conv2d_shape(2, 3, 7, 9, 1, 5, 5, 2, 2));
  shapes.push_back(make_conv2d_shape(3, 2, 6, 5, 4, 3, 3, 1, 0));
  for (cpu::SimdLevel level :
       {cpu::SimdLevel::kPortable, cpu::SimdLevel::kAvx2, cpu::SimdLevel::kAvx512}) {
    if (!cpu::simd_level_supported(level)) continue;
    for (const auto& sh : shapes) {
      SCOPED_TRACE(str(shape_name(sh), " ", cpu::simd_level_name(level)));
      check_gradients(sh, ConvPath::kThin, level);
    }
  }
}

// ---- the layer (float, im2col + gemm) against the direct oracle -------------------

// max |a - b| / max(|a|, |b|, scale) with scale = max(1, rms(b)): float
// rounding is relative to the size of the sums, so an entry much smaller
// than its neighbours (a weight gradient near 0 among values ~10, say) is
// held to the absolute error its neighbours allow, not to a relative one.
double max_scaled_error(const float* a, const float* b, size_t n) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += double(b[i]) * b[i];
  const double scale = std::max(1.0, std::sqrt(ss / double(std::max<size_t>(n, 1))));
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    double x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    worst = std::max(worst, std::fabs(x - y) / std::max({std::fabs(x), std::fabs(y), scale}));
  }
  return worst;
}

// Forward and all three gradients of the layer against the oracle, within
// float rounding (the oracle sums in double).
void expect_layer_matches_direct(const ConvCase& cc, uint64_t seed) {
  Rng rng(seed);
  ConvFixture f = ConvFixture::random(cc.config(), cc.h, cc.w, rng);
  const Conv2dShape sh = cc.shape();
  Tensor x = testing::random_tensor(Shape(cc.n, cc.c, cc.h, cc.w), rng);
  Tensor y = f.forward(x);
  const float* bias = cc.bias ? f.b.data() : nullptr;

  std::vector<float> y_ref(y.numel());
  cpu::conv2d_direct_forward(sh, x.data<float>(), f.w.data(), bias, y_ref.data());
  const double tol = 1e-5;
  EXPECT_LE(max_scaled_error(y.data<float>(), y_ref.data(), y.numel()), tol) << "forward";

  Tensor dy = testing::random_tensor(y.shape(), rng);
  Tensor dx = Tensor::empty(x.shape());
  f.layer.backward(x, y, dy, &dx);

  std::vector<float> dx_ref(x.numel()), dw_ref(f.w.size(), 0.f), db_ref(f.b.size(), 0.f);
  cpu::conv2d_direct_backward_data(sh, dy.data<float>(), f.w.data(), dx_ref.data());
  cpu::conv2d_direct_backward_weight(sh, x.data<float>(), dy.data<float>(), dw_ref.data());
  EXPECT_LE(max_scaled_error(dx.data<float>(), dx_ref.data(), dx.numel()), tol) << "dx";
  EXPECT_LE(max_scaled_error(f.gw.data(), dw_ref.data(), dw_ref.size()), tol) << "dw";
  if (cc.bias) {
    cpu::conv2d_direct_backward_bias(sh, dy.data<float>(), db_ref.data());
    EXPECT_LE(max_scaled_error(f.gb.data(), db_ref.data(), db_ref.size()), tol) << "db";
  }
}

class Conv2dSweep : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dSweep, LayerMatchesDirect) {
  const ConvCase& cc = GetParam();
  expect_layer_matches_direct(cc, 1000 + uint64_t(cc.n * 7 + cc.c * 31 + cc.k * 131 + cc.h));
}

ConvCase no_bias(ConvCase c) {
  c.bias = false;
  return c;
}

// {n, c, h, w, k, kernel, stride, pad}: odd sizes, every stride/padding/kernel
// combination of interest, batch 1 and 5+, 1/3/5 in and 1/3/5/8 out channels.
INSTANTIATE_TEST_SUITE_P(
    Conv2dShapes, Conv2dSweep,
    ::testing::Values(ConvCase{1, 1, 7, 5, 1, 3, 1, 0}, ConvCase{1, 3, 7, 5, 3, 3, 1, 1},
                      ConvCase{5, 3, 13, 11, 8, 3, 1, 1}, ConvCase{5, 5, 13, 11, 5, 5, 2, 2},
                      ConvCase{6, 1, 13, 11, 8, 5, 1, 2}, ConvCase{5, 5, 7, 5, 3, 3, 2, 0},
                      ConvCase{7, 5, 13, 11, 8, 3, 2, 1}, ConvCase{1, 5, 13, 11, 8, 3, 2, 2},
                      ConvCase{5, 3, 13, 11, 5, 5, 1, 0}, ConvCase{5, 1, 5, 5, 3, 5, 1, 0},
                      ConvCase{5, 3, 8, 8, 3, 3, 2, 1}, ConvCase{1, 3, 7, 5, 1, 5, 2, 1},
                      // 1x1: stride 1 skips im2col, stride 2 goes through it
                      ConvCase{5, 3, 13, 11, 8, 1, 1, 0}, ConvCase{5, 5, 7, 5, 1, 1, 1, 0},
                      ConvCase{1, 3, 13, 11, 5, 1, 2, 0},
                      no_bias(ConvCase{5, 3, 13, 11, 5, 3, 1, 1}),
                      no_bias(ConvCase{6, 5, 7, 5, 8, 1, 1, 0})),
    [](const ::testing::TestParamInfo<ConvCase>& p) { return p.param.name(); });

// The five convolutions of the CIFAR-10 autoencoder, batch 2.
class Conv2dCifar : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dCifar, ForwardAndBackwardMatchDirect) { expect_layer_matches_direct(GetParam(), 78); }

INSTANTIATE_TEST_SUITE_P(
    Conv2dAutoencoder, Conv2dCifar,
    ::testing::Values(ConvCase{2, 3, 32, 32, 256, 3, 1, 1}, ConvCase{2, 256, 16, 16, 128, 3, 1, 1},
                      ConvCase{2, 128, 8, 8, 128, 3, 1, 1}, ConvCase{2, 128, 16, 16, 256, 3, 1, 1},
                      ConvCase{2, 256, 32, 32, 3, 3, 1, 1}),
    [](const ::testing::TestParamInfo<ConvCase>& p) { return p.param.name(); });

// ---- gradient convention and determinism -----------------------------------------

TEST(Conv2dLayer, BackwardAccumulatesParamGradsAndOverwritesDx) {
  Rng rng(5);
  const ConvCase cc{4, 3, 9, 7, 5, 3, 1, 1};
  ConvFixture f = ConvFixture::random(cc.config(), cc.h, cc.w, rng);
  Tensor x = testing::random_tensor(Shape(cc.n, cc.c, cc.h, cc.w), rng);
  Tensor y = f.forward(x);
  Tensor dy = testing::random_tensor(y.shape(), rng);
  Tensor dx = testing::random_tensor(x.shape(), rng);  // garbage to be overwritten

  f.layer.backward(x, y, dy, &dx);
  const std::vector<float> gw1 = f.gw, gb1 = f.gb, dx1 = to_vector(dx);
  f.layer.backward(x, y, dy, &dx);
  for (size_t i = 0; i < gw1.size(); ++i) ASSERT_EQ(f.gw[i], 2 * gw1[i]) << "dw[" << i << "]";
  for (size_t i = 0; i < gb1.size(); ++i) ASSERT_EQ(f.gb[i], 2 * gb1[i]) << "db[" << i << "]";
  EXPECT_EQ(to_vector(dx), dx1);
}

TEST(Conv2dLayer, NullDxStillGivesParamGrads) {
  Rng rng(6);
  const ConvCase cc{3, 2, 8, 6, 4, 3, 2, 1};
  ConvFixture a = ConvFixture::random(cc.config(), cc.h, cc.w, rng);
  ConvFixture b(cc.config(), cc.h, cc.w, a.w, a.b);
  Tensor x = testing::random_tensor(Shape(cc.n, cc.c, cc.h, cc.w), rng);
  Tensor y = a.forward(x);
  Tensor dy = testing::random_tensor(y.shape(), rng);
  Tensor dx = Tensor::empty(x.shape());
  a.layer.backward(x, y, dy, &dx);
  b.layer.backward(x, y, dy, nullptr);
  EXPECT_EQ(a.gw, b.gw);
  EXPECT_EQ(a.gb, b.gb);
}

TEST(Conv2dLayer, RepeatedRunsAreBitIdentical) {
  // Batch 9 spreads images over every thread, so the per-thread partial
  // gradients and their reduction are exercised.
  const ConvCase cc{9, 3, 13, 11, 5, 3, 1, 1};
  Rng rng(8);
  ConvFixture f = ConvFixture::random(cc.config(), cc.h, cc.w, rng);
  Tensor x = testing::random_tensor(Shape(cc.n, cc.c, cc.h, cc.w), rng);
  Tensor dy = testing::random_tensor(f.layer.output_shape(x.shape()), rng);

  auto run = [&] {
    std::fill(f.gw.begin(), f.gw.end(), 0.f);
    std::fill(f.gb.begin(), f.gb.end(), 0.f);
    Tensor y = f.forward(x);
    Tensor dx = Tensor::empty(x.shape());
    f.layer.backward(x, y, dy, &dx);
    std::vector<float> all = to_vector(y);
    for (float v : to_vector(dx)) all.push_back(v);
    all.insert(all.end(), f.gw.begin(), f.gw.end());
    all.insert(all.end(), f.gb.begin(), f.gb.end());
    return all;
  };
  const std::vector<float> first = run();
  const std::vector<float> second = run();
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
}

// ---- metadata and errors ------------------------------------------------------------

TEST(Conv2dLayer, Metadata) {
  Conv2dCPU conv("enc1", Conv2dConfig{3, 256, 3, 1, 1, true});
  EXPECT_STREQ(conv.type(), "conv2d");
  EXPECT_STREQ(conv.impl(), "cpu");
  EXPECT_EQ(conv.device(), Device::kCPU);
  EXPECT_EQ(conv.describe(), "3x3 s1 p1");
  EXPECT_EQ(conv.config().out_channels, 256);
  auto specs = conv.param_specs();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "weight");
  EXPECT_EQ(specs[0].dims, (std::vector<int>{256, 3, 3, 3}));
  EXPECT_EQ(specs[0].fan_in, 27);
  EXPECT_EQ(specs[1].name, "bias");
  EXPECT_EQ(specs[1].dims, (std::vector<int>{256}));
  EXPECT_EQ(specs[1].fan_in, 27);
  EXPECT_EQ(conv.param_count(), size_t(256 * 27 + 256));
  EXPECT_EQ(conv.output_shape(Shape(64, 3, 32, 32)), Shape(64, 256, 32, 32));

  Conv2dCPU down("down", Conv2dConfig{8, 4, 5, 2, 0, false});
  EXPECT_EQ(down.describe(), "5x5 s2 p0 no-bias");
  EXPECT_EQ(down.param_specs().size(), 1u);
  EXPECT_EQ(down.output_shape(Shape(3, 8, 13, 11)), Shape(3, 4, 5, 4));
}

TEST(Conv2dLayer, WrongChannelsIsShapeError) {
  Conv2dCPU conv("c", Conv2dConfig{3, 8, 3, 1, 1, true});
  std::string msg = shape_error_of([&] { conv.output_shape(Shape(1, 1, 28, 28)); });
  EXPECT_NE(msg.find("3 input channels"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1x28x28"), std::string::npos) << msg;
  EXPECT_THROW(conv.set_input_shape(Shape(1, 1, 28, 28)), ShapeError);
}

TEST(Conv2dLayer, KernelLargerThanPaddedInputIsShapeError) {
  Conv2dCPU conv("c", Conv2dConfig{3, 8, 5, 1, 0, true});
  std::string msg = shape_error_of([&] { conv.output_shape(Shape(1, 3, 3, 3)); });
  EXPECT_NE(msg.find("kernel 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3x3x3"), std::string::npos) << msg;
  EXPECT_THROW(conv.set_input_shape(Shape(1, 3, 3, 3)), ShapeError);

  // Padding 1 makes a 3x3 input 5x5: it fits, once; a 2x2 input does not.
  Conv2dCPU padded("p", Conv2dConfig{3, 8, 5, 1, 1, true});
  EXPECT_EQ(padded.output_shape(Shape(1, 3, 3, 3)), Shape(1, 8, 1, 1));
  msg = shape_error_of([&] { padded.output_shape(Shape(1, 3, 2, 7)); });
  EXPECT_NE(msg.find("padding 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3x2x7"), std::string::npos) << msg;
}

TEST(Conv2dLayer, InvalidConfigIsConfigError) {
  const Conv2dConfig good{3, 8, 3, 1, 1, true};
  EXPECT_NO_THROW(Conv2dCPU("ok", good));
  auto bad = [&](auto mutate, const char* field) {
    Conv2dConfig c = good;
    mutate(c);
    try {
      Conv2dCPU conv("bad", c);
      ADD_FAILURE() << "no ConfigError for bad " << field;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  bad([](Conv2dConfig& c) { c.in_channels = 0; }, "in_channels");
  bad([](Conv2dConfig& c) { c.out_channels = -2; }, "out_channels");
  bad([](Conv2dConfig& c) { c.kernel = 0; }, "kernel");
  bad([](Conv2dConfig& c) { c.stride = 0; }, "stride");
  bad([](Conv2dConfig& c) { c.padding = -1; }, "padding");
  bad([](Conv2dConfig& c) { c.padding = 3; }, "padding");
}

}  // namespace
}  // namespace hpmc
