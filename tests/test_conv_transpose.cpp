// ConvTranspose2D on the CPU (conv_transpose2d_spec.h, cpu/conv_transpose2d_ops.h,
// cpu/conv_transpose2d.h): the shape rule and the equivalent convolution,
// config and shape errors, parameter specs, FLOPs and description;
// hand-computed forward and backward values; golden values from PyTorch
// float64 (tools/golden/make_conv_transpose.py); finite differences in double
// for the ops and for the scatter reference of conv_transpose_reference.h; the
// ops in float against that reference over odd shapes that take both CPU paths
// (thin kernels and im2col + gemm); the gradient convention and bit-identical
// repeated runs. The layer: built from its keys through the registry, hand
// values and the gradient convention through it, the ops' results bit for
// bit, and a tiny autoencoder from YAML (conv2d stride 2 down,
// conv_transpose2d stride 2 up) whose loss falls as it trains.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "conv_transpose_reference.h"
#include "core/error.h"
#include "core/rng.h"
#include "golden_conv_transpose.h"
#include "layers/conv_transpose2d_spec.h"
#include "layers/cpu/conv_transpose2d.h"
#include "layers/cpu/conv_transpose2d_ops.h"
#include "model/config.h"
#include "model/model.h"
#include "model/registry.h"
#include "model/trainer.h"
#include "synthetic_data.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::CtCase;
using testing::expect_gradients_close;
using testing::numerical_gradient;
using testing::random_vector;

Conv2dShape eq_of(const CtCase& cc) {
  return conv_transpose2d_equivalent_conv(cc.config(), cc.in_shape());
}

// Everything the ops produce for one case: y, then dx, dw, db for dy (dw and
// db accumulated onto zeros).
template <typename T>
struct OpsResult {
  std::vector<T> y, dx, dw, db;
};

template <typename T>
OpsResult<T> run_ops(const CtCase& cc, const std::vector<T>& x, const std::vector<T>& w,
                     const std::vector<T>& b, const std::vector<T>& dy) {
  const Conv2dShape eq = eq_of(cc);
  cpu::Conv2dWorkspace<T> ws;
  OpsResult<T> r;
  r.y.assign(cc.y_count(), T(-7));  // must be overwritten
  cpu::conv_transpose2d_forward(eq, x.data(), w.data(), cc.bias ? b.data() : nullptr,
                                r.y.data(), ws);
  r.dx.assign(cc.x_count(), T(99));  // must be overwritten
  r.dw.assign(cc.w_count(), T(0));
  r.db.assign(cc.bias ? size_t(cc.out) : 0, T(0));
  cpu::conv_transpose2d_backward_data(eq, dy.data(), w.data(), r.dx.data(), ws);
  cpu::conv_transpose2d_backward_params(eq, x.data(), dy.data(), r.dw.data(),
                                        cc.bias ? r.db.data() : nullptr, ws);
  return r;
}

// max |a − ref| / max(|a|, |ref|, scale), scale = max(1, rms(ref)): float
// rounding is relative to the size of the sums, so an entry much smaller than
// its neighbours is held to the absolute error its neighbours allow.
template <typename A>
double max_scaled_error(const std::vector<A>& a, const std::vector<double>& ref) {
  if (a.size() != ref.size()) return INFINITY;
  double ss = 0;
  for (double v : ref) ss += v * v;
  const double scale = std::max(1.0, std::sqrt(ss / double(std::max<size_t>(ref.size(), 1))));
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = double(a[i]), y = ref[i];
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    worst = std::max(worst, std::fabs(x - y) / std::max({std::fabs(x), std::fabs(y), scale}));
  }
  return worst;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- shapes --------------------------------------------------------------------------

TEST(ConvTranspose2dSpec, OutputSizeIsPyTorchs) {
  // (H − 1)·stride − 2·padding + kernel + output_padding
  EXPECT_EQ(conv_transpose_out_size(4, 3, 2, 1, 1), 8);
  EXPECT_EQ(conv_transpose_out_size(16, 4, 2, 1, 0), 32);
  EXPECT_EQ(conv_transpose_out_size(3, 5, 3, 2, 2), 9);
  EXPECT_EQ(conv_transpose_out_size(7, 3, 1, 1, 0), 7);
  EXPECT_EQ(conv_transpose_out_size(1, 1, 1, 0, 0), 1);
  EXPECT_EQ(conv_transpose_out_size(1, 3, 1, 2, 0), -1);
  const ConvTranspose2dConfig cfg{3, 5, 3, 2, 1, 1, true};
  EXPECT_EQ(conv_transpose2d_output_shape(cfg, Shape(7, 3, 4, 6)), Shape(7, 5, 8, 12));
}

TEST(ConvTranspose2dSpec, EquivalentConvolutionMapsTheOutputBackToTheInput) {
  // For every valid kernel, stride, padding and output_padding, and every
  // input size: the equivalent convolution takes H_out back to H exactly.
  int checked = 0;
  for (int k = 1; k <= 6; ++k)
    for (int st = 1; st <= 4; ++st)
      for (int p = 0; p < k; ++p)
        for (int op = 0; op < st; ++op)
          for (int h = 1; h <= 9; ++h) {
            const long long ho = conv_transpose_out_size(h, k, st, p, op);
            if (ho < 1) continue;
            ASSERT_EQ(conv_out_size(int(ho), k, st, p), h)
                << "k" << k << " s" << st << " p" << p << " op" << op << " h" << h;
            const ConvTranspose2dConfig cfg{2, 3, k, st, p, op, true};
            const Shape in(2, 2, h, h + 1);
            const Shape out = conv_transpose2d_output_shape(cfg, in);
            const Conv2dShape eq = conv_transpose2d_equivalent_conv(cfg, in);
            EXPECT_EQ(eq.N, 2);
            EXPECT_EQ(eq.C, 3);
            EXPECT_EQ(eq.H, out.h);
            EXPECT_EQ(eq.W, out.w);
            EXPECT_EQ(eq.K, 2);
            EXPECT_EQ(eq.R, k);
            EXPECT_EQ(eq.S, k);
            EXPECT_EQ(eq.stride, st);
            EXPECT_EQ(eq.pad, p);
            EXPECT_EQ(eq.P, h);
            EXPECT_EQ(eq.Q, h + 1);
            ++checked;
          }
  EXPECT_GT(checked, 500);
}

TEST(ConvTranspose2dSpec, ConfigErrorsNameTheLayerAndTheKey) {
  auto msg = [](ConvTranspose2dConfig c) {
    return error_of([&] { conv_transpose2d_check_config("up1", c); });
  };
  const ConvTranspose2dConfig ok{4, 3, 3, 2, 1, 1, true};
  EXPECT_EQ(msg(ok), "");
  auto with = [&](auto change) {
    ConvTranspose2dConfig c = ok;
    change(c);
    return msg(c);
  };
  EXPECT_EQ(with([](auto& c) { c.in_channels = 0; }),
            "conv_transpose2d 'up1': in_channels must be positive, got 0");
  EXPECT_EQ(with([](auto& c) { c.out_channels = -2; }),
            "conv_transpose2d 'up1': out_channels must be positive, got -2");
  EXPECT_EQ(with([](auto& c) { c.kernel = 0; }),
            "conv_transpose2d 'up1': kernel must be positive, got 0");
  EXPECT_EQ(with([](auto& c) { c.stride = 0; }),
            "conv_transpose2d 'up1': stride must be positive, got 0");
  EXPECT_EQ(with([](auto& c) { c.padding = -1; }),
            "conv_transpose2d 'up1': padding must be 0 or more, got -1");
  EXPECT_EQ(with([](auto& c) { c.output_padding = -1; }),
            "conv_transpose2d 'up1': output_padding must be 0 or more, got -1");
  EXPECT_EQ(with([](auto& c) { c.padding = 3; }),
            "conv_transpose2d 'up1': padding 3 must be smaller than kernel 3");
  EXPECT_EQ(with([](auto& c) { c.output_padding = 2; }),
            "conv_transpose2d 'up1': output_padding 2 must be smaller than stride 2 (as in "
            "PyTorch)");
  EXPECT_EQ(with([](auto& c) {
              c.stride = 1;
              c.output_padding = 1;
            }),
            "conv_transpose2d 'up1': output_padding 1 must be smaller than stride 1 (as in "
            "PyTorch)");
  // The error type is ConfigError (exit code 3).
  ConvTranspose2dConfig bad = ok;
  bad.output_padding = 5;
  EXPECT_THROW(conv_transpose2d_check_config("up1", bad), ConfigError);
}

TEST(ConvTranspose2dSpec, ShapeErrorsQuoteTheShapes) {
  const ConvTranspose2dConfig cfg{3, 5, 3, 1, 2, 0, true};
  EXPECT_THROW(conv_transpose2d_output_shape(cfg, Shape(1, 4, 8, 8)), ShapeError);
  EXPECT_EQ(error_of([&] { conv_transpose2d_output_shape(cfg, Shape(1, 4, 8, 8)); }),
            "conv_transpose2d expects 3 input channels, got input 4x8x8");
  // 1x1 with padding 2 and kernel 3 at stride 1: 0 − 4 + 3 = −1.
  EXPECT_THROW(conv_transpose2d_output_shape(cfg, Shape(1, 3, 1, 2)), ShapeError);
  EXPECT_EQ(error_of([&] { conv_transpose2d_output_shape(cfg, Shape(1, 3, 1, 2)); }),
            "conv_transpose2d kernel 3 stride 1 padding 2 output_padding 0 on input 3x1x2 gives "
            "output 5x-1x0, less than 1x1; use less padding or a larger input");
  // Just large enough: 2 − 4 + 3 = 1.
  EXPECT_EQ(conv_transpose2d_output_shape(cfg, Shape(2, 3, 3, 3)), Shape(2, 5, 1, 1));
  // An output plane past the 32-bit index range.
  const ConvTranspose2dConfig wide{1, 4, 2, 2, 0, 0, true};
  const std::string big = error_of([&] {
    conv_transpose2d_output_shape(wide, Shape(1, 1, 30000, 30000));
  });
  EXPECT_NE(big.find("gives output 4x60000x60000"), std::string::npos) << big;
  EXPECT_NE(big.find("more than 2147483647 values per image"), std::string::npos) << big;
}

TEST(ConvTranspose2dSpec, ParamSpecsFlopsAndDescription) {
  const ConvTranspose2dConfig cfg{3, 5, 4, 2, 1, 0, true};
  const auto specs = conv_transpose2d_param_specs(cfg);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "weight");
  EXPECT_EQ(specs[0].dims, (std::vector<int>{3, 5, 4, 4}));  // [in, out, k, k]
  // PyTorch: fan_in = weight.size(1)·k·k = out·k·k for ConvTranspose2d.
  EXPECT_EQ(specs[0].fan_in, 5 * 16);
  EXPECT_EQ(specs[0].init, Init::kKaimingUniform);
  EXPECT_EQ(specs[1].name, "bias");
  EXPECT_EQ(specs[1].dims, (std::vector<int>{5}));
  EXPECT_EQ(specs[1].fan_in, 5 * 16);
  ConvTranspose2dConfig nb = cfg;
  nb.bias = false;
  EXPECT_EQ(conv_transpose2d_param_specs(nb).size(), 1u);

  const Shape in(8, 3, 7, 6);
  const double fwd = 2.0 * 8 * 3 * 7 * 6 * 5 * 4 * 4;
  EXPECT_EQ(conv_transpose2d_forward_flops(cfg, in), fwd);
  EXPECT_EQ(conv_transpose2d_backward_flops(cfg, in, true), 2 * fwd);
  EXPECT_EQ(conv_transpose2d_backward_flops(cfg, in, false), fwd);

  EXPECT_EQ(conv_transpose2d_describe(cfg), "4x4 s2 p1");
  EXPECT_EQ(conv_transpose2d_describe(ConvTranspose2dConfig{3, 5, 3, 2, 1, 1, false}),
            "3x3 s2 p1 op1 no-bias");
}

// ---- hand-computed -------------------------------------------------------------------

// x = [[1, 2], [3, 4]] as one 2x2 image.
const std::vector<double> kX2x2 = {1, 2, 3, 4};

// The expected output through the reference and the ops in double and float.
void expect_forward(const CtCase& cc, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& b, const std::vector<double>& expected) {
  SCOPED_TRACE(cc.name());
  ASSERT_EQ(cc.y_count(), expected.size());
  EXPECT_EQ(testing::ct_reference_forward(cc, x, w, b), expected) << "reference";
  const std::vector<double> dy(cc.y_count(), 0.0);
  EXPECT_EQ(run_ops(cc, x, w, b, dy).y, expected) << "ops in double";
  auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const auto yf = run_ops(cc, f(x), f(w), f(b), f(dy)).y;
  EXPECT_EQ(std::vector<double>(yf.begin(), yf.end()), expected) << "ops in float";
}

TEST(ConvTranspose2dHand, Stride2Kernel2TilesScaledKernels) {
  // Stride = kernel: each input pixel x[i][j] writes x[i][j]·w into its own
  // 2x2 block (2i, 2j) of the 4x4 output; + 0.5.
  expect_forward({1, 1, 2, 2, 1, 2, 2, 0, 0}, kX2x2, {1, 2, 3, 4}, {0.5},
                 {1.5, 2.5, 2.5, 4.5,  //
                  3.5, 4.5, 6.5, 8.5,  //
                  3.5, 6.5, 4.5, 8.5,  //
                  9.5, 12.5, 12.5, 16.5});
}

TEST(ConvTranspose2dHand, Stride1OverlapsSum) {
  // Stride 1: y[a][b] = Σ x[i][j]·w[a−i][b−j] (a full convolution), e.g. the
  // centre 1·4 + 2·3 + 3·2 + 4·1 = 20; the outputs sum to Σx·Σw = 100.
  CtCase cc{1, 1, 2, 2, 1, 2, 1, 0, 0};
  cc.bias = false;
  expect_forward(cc, kX2x2, {1, 2, 3, 4}, {}, {1, 4, 4, 6, 20, 16, 9, 24, 16});
}

TEST(ConvTranspose2dHand, Stride2Padding1OutputPadding1) {
  // k 3, w[r][s] = 3r + s + 1; output row 2i − 1 + r: row 0 gets (i, r) =
  // (0, 1); row 1 (0, 2) and (1, 0); row 2 (1, 1); row 3 (1, 2) — the row
  // output_padding adds (without it the output would be 3x3). Likewise the
  // columns; e.g. y[1][1] = x00·w22 + x01·w20 + x10·w02 + x11·w00 = 9 + 14 + 9 + 4.
  CtCase cc{1, 1, 2, 2, 1, 3, 2, 1, 1};
  cc.bias = false;
  expect_forward(cc, kX2x2, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {},
                 {5, 14, 10, 12,   //
                  14, 36, 24, 30,  //
                  15, 34, 20, 24,  //
                  24, 55, 32, 36});
}

TEST(ConvTranspose2dHand, OneByOneMixesChannels) {
  // 1x1 kernel, 2 in → 2 out: y_o = Σ_c w[c][o]·x_c + b_o, with w laid out
  // [in, out]: w[0][0] = 1, w[0][1] = −1, w[1][0] = 2, w[1][1] = 0.5.
  const std::vector<double> x = {1, 2, 3, 4, 10, 20, 30, 40};
  expect_forward({1, 2, 2, 2, 2, 1, 1, 0, 0}, x, {1, -1, 2, 0.5}, {0, 1},
                 {21, 42, 63, 84, 5, 9, 13, 17});
  // The same with stride 2: each pixel lands on (2i, 2j), the rest is bias
  // only (output_padding 1 makes the output 4x4, not 3x3).
  expect_forward({1, 2, 2, 2, 2, 1, 2, 0, 1}, x, {1, -1, 2, 0.5}, {0, 1},
                 {21, 0, 42, 0, 0, 0, 0, 0, 63, 0, 84, 0, 0, 0, 0, 0,  //
                  5, 1, 9, 1, 1, 1, 1, 1, 13, 1, 17, 1, 1, 1, 1, 1});
}

TEST(ConvTranspose2dHand, BackwardStride2Kernel2) {
  // dy = 0..15 over the 4x4 output. The blocks do not overlap, so
  // dx[i][j] = Σ_rs w[r][s]·dy[2i+r][2j+s] (e.g. 1·0 + 2·1 + 3·4 + 4·5 = 34),
  // dw[r][s] = Σ_ij x[i][j]·dy[2i+r][2j+s] (1·0 + 2·2 + 3·8 + 4·10 = 68), db = Σ dy = 120.
  const CtCase cc{1, 1, 2, 2, 1, 2, 2, 0, 0};
  const std::vector<double> w = {1, 2, 3, 4}, b = {0.5};
  std::vector<double> dy(16);
  for (int i = 0; i < 16; ++i) dy[i] = i;
  const std::vector<double> dx = {34, 54, 114, 134}, dw = {68, 78, 108, 118}, db = {120};

  const auto ref = testing::ct_reference_backward(cc, kX2x2, w, dy);
  EXPECT_EQ(ref.dx, dx);
  EXPECT_EQ(ref.dw, dw);
  EXPECT_EQ(ref.db, db);
  const auto ops = run_ops(cc, kX2x2, w, b, dy);
  EXPECT_EQ(ops.dx, dx);
  EXPECT_EQ(ops.dw, dw);
  EXPECT_EQ(ops.db, db);
}

// ---- golden values from PyTorch float64 ----------------------------------------------

template <size_t NY, size_t NX, size_t NW, size_t NB>
void expect_golden(const CtCase& cc, const double (&y)[NY], const double (&dx)[NX],
                   const double (&dw)[NW], const double (&db)[NB]) {
  SCOPED_TRACE(cc.name());
  ASSERT_EQ(cc.y_count(), NY);
  ASSERT_EQ(cc.x_count(), NX);
  ASSERT_EQ(cc.w_count(), NW);
  ASSERT_EQ(size_t(cc.out), NB);
  // The formulas of tools/golden/make_conv_transpose.py.
  auto formula = [](size_t n, auto f) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = f(double(i));
    return v;
  };
  const auto x = formula(NX, [](double i) { return std::sin(1.3 * i + 0.2); });
  const auto w = formula(NW, [](double i) { return 0.3 * std::sin(0.7 * i + 1.0); });
  const auto b = formula(NB, [](double i) { return 0.1 * std::cos(i); });
  const auto dyv = formula(NY, [](double i) { return std::cos(0.9 * i + 0.5); });
  const std::vector<double> gy(y, y + NY), gdx(dx, dx + NX), gdw(dw, dw + NW), gdb(db, db + NB);

  // In double, the ops and the reference agree with PyTorch to rounding.
  const auto d = run_ops(cc, x, w, b, dyv);
  EXPECT_LE(testing::max_rel_error(d.y.data(), gy.data(), NY), 1e-12) << "y";
  EXPECT_LE(testing::max_rel_error(d.dx.data(), gdx.data(), NX), 1e-12) << "dx";
  EXPECT_LE(testing::max_rel_error(d.dw.data(), gdw.data(), NW), 1e-12) << "dw";
  EXPECT_LE(testing::max_rel_error(d.db.data(), gdb.data(), NB), 1e-12) << "db";
  const auto ry = testing::ct_reference_forward(cc, x, w, b);
  const auto rg = testing::ct_reference_backward(cc, x, w, dyv);
  EXPECT_LE(testing::max_rel_error(ry.data(), gy.data(), NY), 1e-12) << "reference y";
  EXPECT_LE(testing::max_rel_error(rg.dx.data(), gdx.data(), NX), 1e-12) << "reference dx";
  EXPECT_LE(testing::max_rel_error(rg.dw.data(), gdw.data(), NW), 1e-12) << "reference dw";
  EXPECT_LE(testing::max_rel_error(rg.db.data(), gdb.data(), NB), 1e-12) << "reference db";

  // In float (the layer's precision), to float rounding.
  auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const auto s = run_ops(cc, f(x), f(w), f(b), f(dyv));
  EXPECT_LE(max_scaled_error(s.y, gy), 1e-5) << "float y";
  EXPECT_LE(max_scaled_error(s.dx, gdx), 1e-5) << "float dx";
  EXPECT_LE(max_scaled_error(s.dw, gdw), 1e-5) << "float dw";
  EXPECT_LE(max_scaled_error(s.db, gdb), 1e-5) << "float db";
}

TEST(ConvTranspose2dGolden, Stride2Padding1OutputPadding1MatchesPyTorch) {
  expect_golden({2, 3, 4, 5, 2, 3, 2, 1, 1}, kS2P1Op1Y, kS2P1Op1Dx, kS2P1Op1Dw, kS2P1Op1Db);
}

TEST(ConvTranspose2dGolden, Kernel5Stride3OutputPadding2MatchesPyTorch) {
  expect_golden({1, 2, 3, 4, 3, 5, 3, 2, 2}, kK5S3P2Op2Y, kK5S3P2Op2Dx, kK5S3P2Op2Dw,
                kK5S3P2Op2Db);
}

TEST(ConvTranspose2dGolden, Kernel5Stride1MatchesPyTorch) {
  expect_golden({2, 1, 5, 3, 3, 5, 1, 2, 0}, kK5S1P2Y, kK5S1P2Dx, kK5S1P2Dw, kK5S1P2Db);
}

// ---- finite differences in double -----------------------------------------------------

// L = Σ r ⊙ conv_transpose(x, w, b) for a random r, so dL/dy = r: the ops'
// gradients (and the reference's) against central differences of L through
// the ops' forward.
void check_gradients(const CtCase& cc) {
  SCOPED_TRACE(cc.name());
  Rng rng(4321 + cc.h * 7 + cc.stride);
  const auto x = random_vector(cc.x_count(), rng);
  const auto w = random_vector(cc.w_count(), rng);
  const auto b = random_vector(size_t(cc.out), rng);
  const auto r = random_vector(cc.y_count(), rng);
  const Conv2dShape eq = eq_of(cc);
  cpu::Conv2dWorkspace<double> ws;
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww,
                  const std::vector<double>& bb) {
    std::vector<double> y(cc.y_count());
    cpu::conv_transpose2d_forward(eq, xx.data(), ww.data(), bb.data(), y.data(), ws);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += r[i] * y[i];
    return l;
  };
  const auto g = run_ops(cc, x, w, b, r);
  const auto nx = numerical_gradient([&](const auto& v) { return loss(v, w, b); }, x);
  const auto nw = numerical_gradient([&](const auto& v) { return loss(x, v, b); }, w);
  const auto nb = numerical_gradient([&](const auto& v) { return loss(x, w, v); }, b);
  const double tol = 1e-6;
  expect_gradients_close(g.dx, nx, tol, "ops dx");
  expect_gradients_close(g.dw, nw, tol, "ops dw");
  expect_gradients_close(g.db, nb, tol, "ops db");
  const auto rg = testing::ct_reference_backward(cc, x, w, r);
  expect_gradients_close(rg.dx, nx, tol, "reference dx");
  expect_gradients_close(rg.dw, nw, tol, "reference dw");
  expect_gradients_close(rg.db, nb, tol, "reference db");
}

TEST(ConvTranspose2dGradients, OpsMatchFiniteDifferences) {
  // {n, in, h, w, out, kernel, stride, pad, op}: stride 1, 2, 3 with and
  // without output_padding, a 5x5 and a 4x4 kernel, a 1x1 kernel at stride 2,
  // and in = 17 (more than the thin path's 16 channels on a narrow input:
  // im2col + gemm).
  for (const CtCase& cc :
       {CtCase{2, 2, 3, 4, 3, 3, 1, 1, 0}, CtCase{2, 3, 3, 4, 2, 3, 2, 1, 1},
        CtCase{1, 2, 3, 2, 3, 5, 3, 2, 2}, CtCase{2, 1, 4, 3, 2, 4, 2, 1, 0},
        CtCase{1, 3, 3, 3, 2, 1, 2, 0, 1}, CtCase{1, 17, 2, 3, 2, 3, 2, 1, 1}})
    check_gradients(cc);
}

// ---- the ops in float against the reference ------------------------------------------

class ConvTranspose2dSweep : public ::testing::TestWithParam<CtCase> {};

// Forward and all three gradients in float within float rounding of the
// double reference (which sums exactly enough: its error is ~1e-16).
TEST_P(ConvTranspose2dSweep, FloatOpsMatchReference) {
  const CtCase& cc = GetParam();
  Rng rng(900 + uint64_t(cc.n * 7 + cc.in * 31 + cc.out * 131 + cc.h * 3 + cc.stride));
  const float bound = 1.f / std::sqrt(float(cc.out * cc.kernel * cc.kernel));
  std::vector<float> x(cc.x_count()), w(cc.w_count()), b(size_t(cc.out)), dy(cc.y_count());
  for (auto& v : x) v = rng.uniform(-1.f, 1.f);
  for (auto& v : w) v = rng.uniform(-bound, bound);
  for (auto& v : b) v = rng.uniform(-bound, bound);
  for (auto& v : dy) v = rng.uniform(-1.f, 1.f);
  const auto r = run_ops(cc, x, w, b, dy);
  const auto ry = testing::ct_reference_forward(cc, x, w, b);
  const auto rg = testing::ct_reference_backward(cc, x, w, dy);
  const double tol = 1e-5;
  EXPECT_LE(max_scaled_error(r.y, ry), tol) << "y";
  EXPECT_LE(max_scaled_error(r.dx, rg.dx), tol) << "dx";
  EXPECT_LE(max_scaled_error(r.dw, rg.dw), tol) << "dw";
  if (cc.bias) {
    EXPECT_LE(max_scaled_error(r.db, rg.db), tol) << "db";
  }
}

using testing::no_bias;

// {n, in, h, w, out, kernel, stride, pad, op}: batch 1 and 2–5, 1/3/5
// channels in and out, strides 1, 2 and 3 with every output_padding, kernels
// 1 to 5, odd and rectangular inputs.
const CtCase kSweep[] = {
    {1, 1, 5, 7, 1, 3, 2, 1, 1},  {1, 3, 5, 7, 5, 3, 2, 1, 1},  {2, 5, 7, 5, 3, 3, 2, 1, 0},
    {3, 3, 4, 5, 1, 5, 2, 2, 1},  {1, 5, 3, 4, 3, 5, 3, 2, 2},  {2, 1, 6, 5, 5, 4, 2, 1, 0},
    {2, 3, 5, 5, 3, 2, 2, 0, 0},  {1, 3, 9, 11, 5, 3, 1, 1, 0}, {2, 5, 5, 7, 3, 3, 3, 0, 2},
    {5, 3, 9, 9, 5, 3, 2, 1, 1},  {1, 1, 1, 1, 3, 3, 2, 0, 1},  {2, 3, 4, 3, 3, 3, 3, 1, 1},
    // 1x1: stride 1 is a plain product, stride 2 leaves gaps
    {2, 5, 5, 7, 3, 1, 1, 0, 0},  {2, 3, 5, 7, 5, 1, 2, 0, 1},
    // in > 16 on inputs narrower than 8: the equivalent convolution takes im2col + gemm
    {2, 17, 5, 6, 3, 3, 2, 1, 1}, {2, 20, 3, 3, 24, 3, 2, 1, 1},
    // wide enough for several register tiles of the thin kernels
    {2, 24, 9, 17, 12, 4, 2, 1, 0},
    no_bias(CtCase{2, 3, 5, 7, 5, 3, 2, 1, 1}), no_bias(CtCase{1, 5, 3, 4, 3, 5, 3, 2, 2})};

INSTANTIATE_TEST_SUITE_P(ConvTranspose2dShapes, ConvTranspose2dSweep, ::testing::ValuesIn(kSweep),
                         [](const ::testing::TestParamInfo<CtCase>& p) {
                           return p.param.name();
                         });

TEST(ConvTranspose2dSweepCoverage, BothCpuPathsAreSwept) {
  // The sweep must reach both paths of conv2d_ops.h through the equivalent
  // convolution, or a bug in either would go unseen.
  int thin = 0, gemm = 0;
  for (const CtCase& cc : kSweep) (cpu::conv2d_thin_applies(eq_of(cc)) ? thin : gemm) += 1;
  EXPECT_GE(thin, 5);
  EXPECT_GE(gemm, 3);
}

// ---- gradient convention and determinism ----------------------------------------------

TEST(ConvTranspose2dOps, ParamGradsAccumulateDxIsOverwrittenRunsRepeatBitForBit) {
  // Batch 9 spreads the images over every thread of the gemm and thin paths.
  for (const CtCase& cc : {CtCase{9, 3, 7, 9, 5, 3, 2, 1, 1}, CtCase{9, 20, 5, 6, 3, 3, 2, 1, 0}}) {
    SCOPED_TRACE(cc.name());
    Rng rng(77);
    std::vector<float> x(cc.x_count()), w(cc.w_count()), b(size_t(cc.out)), dy(cc.y_count());
    for (auto* v : {&x, &w, &b, &dy})
      for (auto& e : *v) e = rng.uniform(-1.f, 1.f);
    const auto first = run_ops(cc, x, w, b, dy);
    const auto again = run_ops(cc, x, w, b, dy);
    EXPECT_EQ(first.y, again.y);
    EXPECT_EQ(first.dx, again.dx);
    EXPECT_EQ(first.dw, again.dw);
    EXPECT_EQ(first.db, again.db);

    // A second backward adds the same gradients again and rewrites dx.
    const Conv2dShape eq = eq_of(cc);
    cpu::Conv2dWorkspace<float> ws;
    std::vector<float> dw = first.dw, db = first.db, dx(cc.x_count(), 5.f);
    cpu::conv_transpose2d_backward_params(eq, x.data(), dy.data(), dw.data(), db.data(), ws);
    cpu::conv_transpose2d_backward_data(eq, dy.data(), w.data(), dx.data(), ws);
    for (size_t i = 0; i < dw.size(); ++i) ASSERT_EQ(dw[i], 2 * first.dw[i]) << "dw[" << i << "]";
    for (size_t i = 0; i < db.size(); ++i) ASSERT_EQ(db[i], 2 * first.db[i]) << "db[" << i << "]";
    EXPECT_EQ(dx, first.dx);

    // A null db leaves the weight gradient as it was.
    std::vector<float> dw_only(cc.w_count(), 0.f);
    cpu::conv_transpose2d_backward_params(eq, x.data(), dy.data(), dw_only.data(),
                                          static_cast<float*>(nullptr), ws);
    EXPECT_EQ(dw_only, first.dw);
  }
}

// ---- the layer ------------------------------------------------------------------------

// A layer with its parameters and gradient buffers, bound; gradients start at 0.
struct LayerFixture {
  LayerPtr layer;
  std::vector<float> w, b, gw, gb;

  LayerFixture(LayerPtr l, std::vector<float> weight, std::vector<float> bias)
      : layer(std::move(l)), w(std::move(weight)), b(std::move(bias)) {
    gw.assign(w.size(), 0.f);
    gb.assign(b.size(), 0.f);
    std::vector<float*> params{w.data()}, grads{gw.data()};
    if (!b.empty()) {
      params.push_back(b.data());
      grads.push_back(gb.data());
    }
    layer->bind(params, grads);
  }
  LayerFixture(LayerFixture&&) = delete;  // the layer holds pointers into the vectors

  Tensor forward(const Tensor& x) {
    Tensor y = Tensor::empty(layer->output_shape(x.shape()));
    layer->forward(x, y);
    return y;
  }
};

Tensor tensor_of(const Shape& s, const std::vector<float>& v) {
  Tensor t = Tensor::empty(s);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(ConvTranspose2dLayer, BuiltFromItsKeysThroughTheRegistry) {
  LayerPtr l = make_layer("conv_transpose2d",
                          "{out_channels: 4, kernel: 3, stride: 2, padding: 1, output_padding: 1}",
                          Impl::kCpu, Shape(1, 3, 5, 7), "up1");
  EXPECT_STREQ(l->type(), "conv_transpose2d");
  EXPECT_EQ(l->kind(), LayerKind::kConvTranspose2d);
  EXPECT_STREQ(l->impl(), "cpu");
  EXPECT_EQ(l->device(), Device::kCPU);
  EXPECT_EQ(l->name(), "up1");
  EXPECT_EQ(l->describe(), "3x3 s2 p1 op1");
  EXPECT_EQ(l->output_shape(Shape(6, 3, 5, 7)), Shape(6, 4, 10, 14));
  EXPECT_EQ(l->param_count(), size_t(3 * 4 * 9 + 4));
  const auto specs = l->param_specs();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].dims, (std::vector<int>{3, 4, 3, 3}));
  EXPECT_EQ(specs[0].fan_in, 4 * 9);
  EXPECT_EQ(l->forward_flops(Shape(6, 3, 5, 7)), 2.0 * 6 * 3 * 5 * 7 * 4 * 9);
  EXPECT_GT(l->workspace_bytes(Shape(6, 3, 5, 7)), 0u);

  // Defaults: kernel 3, stride 1, padding 0, output_padding 0, bias.
  LayerPtr d = make_layer("conv_transpose2d", "{out_channels: 2}", Impl::kCpu, Shape(1, 3, 5, 7));
  EXPECT_EQ(d->describe(), "3x3 s1 p0");
  EXPECT_EQ(d->output_shape(Shape(1, 3, 5, 7)), Shape(1, 2, 7, 9));
  EXPECT_EQ(d->param_specs().size(), 2u);
  LayerPtr nb = make_layer("conv_transpose2d",
                           "{out_channels: 2, kernel: 4, stride: 2, bias: false}", Impl::kCpu,
                           Shape(1, 3, 5, 7));
  EXPECT_EQ(nb->describe(), "4x4 s2 p0 no-bias");
  EXPECT_EQ(nb->param_count(), size_t(3 * 2 * 16));
}

TEST(ConvTranspose2dLayer, BadKeysAreConfigErrors) {
  const Shape in(1, 3, 5, 7);
  auto err = [&](const std::string& keys) {
    return error_of([&] { make_layer("conv_transpose2d", keys, Impl::kCpu, in, "up1"); });
  };
  EXPECT_EQ(err("{out_channels: 2, stride: 2, output_padding: 2}"),
            "conv_transpose2d 'up1': output_padding 2 must be smaller than stride 2 (as in "
            "PyTorch)");
  EXPECT_EQ(err("{out_channels: 2, kernel: 2, padding: 2}"),
            "conv_transpose2d 'up1': padding 2 must be smaller than kernel 2");
  EXPECT_NE(err("{kernel: 3}").find("out_channels"), std::string::npos) << err("{kernel: 3}");
  EXPECT_NE(err("{out_channels: 2, output_paddding: 1}").find("output_padding"), std::string::npos)
      << err("{out_channels: 2, output_paddding: 1}");
  EXPECT_THROW(make_layer("conv_transpose2d", "{out_channels: 2, output_padding: -1}", Impl::kCpu,
                          in),
               ConfigError);
}

TEST(ConvTranspose2dLayer, HandValuesThroughTheLayer) {
  // The k3 s2 p1 op1 case of ConvTranspose2dHand, with a bias of 0.5.
  const ConvTranspose2dConfig cfg{1, 1, 3, 2, 1, 1, true};
  LayerFixture f(std::make_shared<ConvTranspose2dCPU>("up", cfg), {1, 2, 3, 4, 5, 6, 7, 8, 9},
                 {0.5f});
  f.layer->set_input_shape(Shape(1, 1, 2, 2));
  const std::vector<float> expected = {5.5f,  14.5f, 10.5f, 12.5f, 14.5f, 36.5f, 24.5f, 30.5f,
                                       15.5f, 34.5f, 20.5f, 24.5f, 24.5f, 55.5f, 32.5f, 36.5f};
  EXPECT_EQ(values(f.forward(tensor_of(Shape(1, 1, 2, 2), {1, 2, 3, 4}))), expected);

  // The backward of ConvTranspose2dHand.BackwardStride2Kernel2 through the layer.
  const ConvTranspose2dConfig cfg2{1, 1, 2, 2, 0, 0, true};
  LayerFixture g(std::make_shared<ConvTranspose2dCPU>("up", cfg2), {1, 2, 3, 4}, {0.5f});
  g.layer->set_input_shape(Shape(1, 1, 2, 2));
  const Tensor x = tensor_of(Shape(1, 1, 2, 2), {1, 2, 3, 4});
  const Tensor y = g.forward(x);
  std::vector<float> ramp(16);
  for (int i = 0; i < 16; ++i) ramp[i] = float(i);
  Tensor dx = tensor_of(x.shape(), {7, 7, 7, 7});  // overwritten
  g.layer->backward(x, y, tensor_of(y.shape(), ramp), &dx);
  EXPECT_EQ(values(dx), (std::vector<float>{34, 54, 114, 134}));
  EXPECT_EQ(g.gw, (std::vector<float>{68, 78, 108, 118}));
  EXPECT_EQ(g.gb, (std::vector<float>{120}));
  // Parameter gradients accumulate; dx is overwritten; a null dx still gives them.
  g.layer->backward(x, y, tensor_of(y.shape(), ramp), nullptr);
  EXPECT_EQ(g.gw, (std::vector<float>{136, 156, 216, 236}));
  EXPECT_EQ(g.gb, (std::vector<float>{240}));
}

TEST(ConvTranspose2dLayer, MatchesTheOpsBitForBit) {
  for (const CtCase& cc : {CtCase{3, 5, 7, 5, 3, 4, 2, 1, 0}, CtCase{2, 20, 3, 5, 4, 3, 3, 1, 2},
                           no_bias(CtCase{1, 3, 5, 7, 1, 5, 2, 2, 1})}) {
    SCOPED_TRACE(cc.name());
    Rng rng(123);
    std::vector<float> x(cc.x_count()), w(cc.w_count()), b(cc.bias ? size_t(cc.out) : 0),
        dy(cc.y_count());
    for (auto* v : {&x, &w, &b, &dy})
      for (auto& e : *v) e = rng.uniform(-1.f, 1.f);
    const auto ops = run_ops(cc, x, w, b, dy);
    LayerFixture f(std::make_shared<ConvTranspose2dCPU>("up", cc.config()), w, b);
    f.layer->set_input_shape(cc.in_shape().with_batch(1));
    const Tensor xt = tensor_of(cc.in_shape(), x);
    const Tensor y = f.forward(xt);
    Tensor dx = Tensor::empty(xt.shape());
    f.layer->backward(xt, y, tensor_of(y.shape(), dy), &dx);
    EXPECT_EQ(values(y), ops.y);
    EXPECT_EQ(values(dx), ops.dx);
    EXPECT_EQ(f.gw, ops.dw);
    EXPECT_EQ(f.gb, ops.db);
  }
}

// conv2d stride 2 halves 28x28 to 14x14, conv_transpose2d stride 2 (k 3, p 1,
// op 1) brings it back to 28x28: the smallest autoencoder with a learned
// upsampling.
const char* kTinyAe = R"(name: ct_ae
data: {format: mnist}
model:
  loss: mse
  features: down
  layers:
    - {name: down, type: conv2d, out_channels: 8, kernel: 3, stride: 2, padding: 1}
    - {name: relu1, type: relu}
    - {name: up, type: conv_transpose2d, out_channels: 1, kernel: 3, stride: 2, padding: 1,
       output_padding: 1}
training: {epochs: 4, batch_size: 16, lr: 0.05, momentum: 0.9, seed: 2}
)";

TEST(ConvTranspose2dModel, TinyAutoencoderFromYamlTrainsWithAFallingLoss) {
  const Config cfg = parse_config(kTinyAe, "ct_ae.yaml");
  auto model = Model::build(cfg, Impl::kCpu, Shape(1, 1, 28, 28), 10);
  ASSERT_EQ(model->layers().size(), 3u);
  EXPECT_EQ(model->layers()[2]->kind(), LayerKind::kConvTranspose2d);
  EXPECT_EQ(model->layers()[0]->output_shape(Shape(1, 1, 28, 28)), Shape(1, 8, 14, 14));
  EXPECT_EQ(model->layers()[2]->output_shape(Shape(1, 8, 14, 14)), Shape(1, 1, 28, 28));
  model->params().init(cfg.training.seed);

  const Dataset tr = testing::synthetic_blobs(512, 3), te = testing::synthetic_blobs(128, 4);
  const EvalResult before = evaluate(*model, te, 32);
  Trainer t(*model, cfg.training);
  t.set_progress(Trainer::Progress::kQuiet);
  std::ostringstream log;
  const auto epochs = t.fit(tr, te, log);
  ASSERT_EQ(epochs.size(), 4u);
  for (size_t e = 1; e < epochs.size(); ++e)
    EXPECT_LT(epochs[e].train_loss, epochs[e - 1].train_loss) << "epoch " << e + 1;
  EXPECT_LT(epochs.back().test.loss, 0.5 * before.loss) << "before " << before.loss;
}

}  // namespace
}  // namespace hpmc
