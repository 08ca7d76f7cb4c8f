// The activation ops of layers/cpu/activation_ops.h: sigmoid, tanh,
// leaky_relu and prelu. Forward and backward on hand-computed values (large
// |x|, ±0, NaN); every backward (prelu's slope gradient too) against central
// finite differences in double; the double ops against PyTorch float64
// (tests/golden_activations.h, tools/golden/make_activations.py) and the
// float ops against the same values in ulps; the gradient convention (dx
// overwritten, the slope gradient accumulated) and that prelu's slope
// gradient has the documented summation order whatever the thread count.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/rng.h"
#include "golden_activations.h"
#include "layers/cpu/activation_ops.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::ulp_distance;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr size_t kActN = sizeof(kActX) / sizeof(kActX[0]);

std::vector<float> to_float(const double* v, size_t n) { return std::vector<float>(v, v + n); }

// |a − b| ≤ rel·|b| + abs_tol, element by element.
void expect_close_to(const std::vector<double>& got, const double* want, size_t n, double rel,
                     const std::vector<double>& abs_tol, const std::string& what) {
  ASSERT_EQ(got.size(), n) << what;
  for (size_t i = 0; i < n; ++i)
    EXPECT_LE(std::fabs(got[i] - want[i]), rel * std::fabs(want[i]) + abs_tol[i])
        << what << "[" << i << "]: got " << got[i] << ", PyTorch " << want[i];
}

// Every float within max_ulp of the golden double rounded to float.
void expect_ulps(const std::vector<float>& got, const double* want, size_t n, int64_t max_ulp,
                 const std::string& what) {
  ASSERT_EQ(got.size(), n) << what;
  int64_t worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t d = ulp_distance(got[i], float(want[i]));
    worst = std::max(worst, d);
    EXPECT_LE(d, max_ulp) << what << "[" << i << "]: got " << got[i] << ", PyTorch "
                          << want[i];
  }
  std::cout << "  " << what << ": at most " << worst << " ulp from PyTorch float64\n";
}

// ---- hand-computed values ---------------------------------------------------------

TEST(Activations, SigmoidKnownValuesAndLargeMagnitudes) {
  EXPECT_EQ(sigmoid_value(0.0f), 0.5f);
  EXPECT_EQ(sigmoid_value(-0.0f), 0.5f);
  EXPECT_LE(ulp_distance(sigmoid_value(2.0f), 0.8807970779778823f), 1);
  EXPECT_LE(ulp_distance(sigmoid_value(-2.0f), 0.11920292202211755f), 1);
  // No overflow for large |x|: exactly 1 and 0 at ±1000 (a naive
  // 1/(1+e^−x) gives 1/(1+inf) = 0 too, but e^1000 raises FE_OVERFLOW),
  // and e^−100 ≈ 3.7e−44 survives as a float subnormal instead of
  // becoming 0 (1/(1 + e^100) is 0 in float).
  EXPECT_EQ(sigmoid_value(1000.0f), 1.0f);
  EXPECT_EQ(sigmoid_value(-1000.0f), 0.0f);
  EXPECT_EQ(sigmoid_value(30.0f), 1.0f);
  const float tiny = sigmoid_value(-100.0f);
  EXPECT_GT(tiny, 0.0f);
  EXPECT_LE(ulp_distance(tiny, float(std::exp(-100.0))), 1);
  EXPECT_EQ(sigmoid_value(1000.0), 1.0);
  EXPECT_NEAR(sigmoid_value(-700.0) / std::exp(-700.0), 1.0, 1e-15);
  EXPECT_TRUE(std::isnan(sigmoid_value(kNaN)));
  // Backward from y: dy·(1 − y)·y.
  EXPECT_EQ(sigmoid_grad(0.5f, 2.0f), 0.5f);
  EXPECT_EQ(sigmoid_grad(1.0f, 3.0f), 0.0f);
  EXPECT_EQ(sigmoid_grad(0.25, 1.0), 0.1875);
}

TEST(Activations, TanhKnownValues) {
  std::vector<float> x = {0.0f, -0.0f, 1000.0f, -1000.0f, 0.5f, kNaN}, y(6), dx(6, 99.f);
  tanh_forward(x.data(), y.data(), x.size());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_TRUE(std::signbit(y[1])) << "tanh(−0) is −0";
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], -1.0f);
  EXPECT_LE(ulp_distance(y[4], 0.46211715726000974f), 1);
  EXPECT_TRUE(std::isnan(y[5]));
  const std::vector<float> dy = {2, 2, 2, 2, 2, 2};
  tanh_backward(y.data(), dy.data(), dx.data(), 6);
  EXPECT_EQ(dx[0], 2.0f);  // 2·(1 − 0)
  EXPECT_EQ(dx[2], 0.0f);  // saturated
  EXPECT_EQ(dx[3], 0.0f);
  EXPECT_LE(ulp_distance(dx[4], float(2 * (1 - 0.46211715726000974 * 0.46211715726000974))), 2);
  EXPECT_TRUE(std::isnan(dx[5]));
  // (1 − y)(1 + y) near |y| = 1: exact for y = 1 − 2^−12 (1 − y = 2^−12 and
  // 1 + y = 2 − 2^−12 are exact, their product too).
  const float y1 = 1.0f - std::ldexp(1.0f, -12);
  EXPECT_EQ(tanh_grad(y1, 1.0f), std::ldexp(1.0f, -12) * (2.0f - std::ldexp(1.0f, -12)));
}

TEST(Activations, LeakyReluKnownValuesKinkAndNaN) {
  const std::vector<float> x = {-2.0f, 3.0f, 0.0f, -0.0f, kNaN, -1e30f};
  std::vector<float> y(6), dx(6, 99.f);
  leaky_relu_forward(x.data(), y.data(), 6, 0.01f);
  EXPECT_EQ(y[0], -2.0f * 0.01f);
  EXPECT_EQ(y[1], 3.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_TRUE(y[3] == 0.0f && std::signbit(y[3])) << "−0 · slope is −0, as PyTorch";
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], -1e30f * 0.01f);
  const std::vector<float> dy = {1, 2, 3, 4, 5, 6};
  leaky_relu_backward(x.data(), dy.data(), dx.data(), 6, 0.01f);
  // The derivative at 0 is the slope (PyTorch: x > 0 ? dy : dy·slope), and a
  // NaN x takes the slope branch too.
  EXPECT_EQ(dx, (std::vector<float>{0.01f, 2.0f, 3 * 0.01f, 4 * 0.01f, 5 * 0.01f, 6 * 0.01f}));
  // A slope above 1 and a negative one are plain numbers to the formula.
  leaky_relu_forward(x.data(), y.data(), 2, -0.5f);
  EXPECT_EQ(y[0], 1.0f);
}

TEST(Activations, PreluKnownValuesPerChannel) {
  // (N, C, H, W) = (2, 2, 1, 2), slopes (0.25, −1).
  const std::vector<float> x = {-4, 2, -3, 0, 8, -8, 1, -1};
  const std::vector<float> a = {0.25f, -1.0f};
  std::vector<float> y(8), dx(8, 99.f);
  prelu_forward(x.data(), a.data(), y.data(), 2, 2, 2);
  EXPECT_EQ(y, (std::vector<float>{-1, 2, 3, -0.0f, 8, -2, 1, 1}));
  EXPECT_TRUE(std::signbit(y[3])) << "0 · −1 is −0";
  const std::vector<float> dy = {1, 1, 2, 2, 1, 4, 1, 3};
  std::vector<float> da = {10, 20};  // accumulates
  prelu_backward(x.data(), a.data(), dy.data(), dx.data(), da.data(), 2, 2, 2);
  EXPECT_EQ(dx, (std::vector<float>{0.25f, 1, -2, -2, 1, 1, 1, -3}));
  // Channel 0: x ≤ 0 at (−4)·1 and (−8)·4 → −36; channel 1: (−3)·2 + 0·2 +
  // (−1)·3 → −9.
  EXPECT_EQ(da, (std::vector<float>{10 - 36, 20 - 9}));
  // A null dx skips dx; the slope gradient accumulates again.
  prelu_backward(x.data(), a.data(), dy.data(), static_cast<float*>(nullptr), da.data(), 2, 2, 2);
  EXPECT_EQ(da, (std::vector<float>{10 - 72, 20 - 18}));
  // NaN: forward NaN, dx = a·dy, the slope gradient NaN.
  const std::vector<float> xn = {kNaN};
  const std::vector<float> an = {0.5f}, dyn = {2.0f};
  std::vector<float> yn(1), dxn(1), dan = {0.0f};
  prelu_forward(xn.data(), an.data(), yn.data(), 1, 1, 1);
  prelu_backward(xn.data(), an.data(), dyn.data(), dxn.data(), dan.data(), 1, 1, 1);
  EXPECT_TRUE(std::isnan(yn[0]));
  EXPECT_EQ(dxn[0], 1.0f);
  EXPECT_TRUE(std::isnan(dan[0]));
}

TEST(Activations, EmptyInputsWriteNothing) {
  float a = 0.5f, da = 3.0f, v = 7.0f;
  sigmoid_forward(&v, &v, 0);
  prelu_forward(&v, &a, &v, 0, 1, 4);
  prelu_backward(&v, &a, &v, &v, &da, 0, 1, 4);
  prelu_backward(&v, &a, &v, &v, &da, 2, 1, 0);
  EXPECT_EQ(v, 7.0f);
  EXPECT_EQ(da, 3.0f);
}

// ---- finite differences in double ------------------------------------------------

// For L(x) = Σ_i w_i · f(x)_i, dL/dx = backward(dy = w). The analytic dx
// starts as garbage: a backward that accumulates is caught.
template <typename Fwd, typename Bwd>
void check_elementwise(const char* what, Fwd fwd, Bwd bwd, const std::vector<double>& x, Rng& rng,
                       const std::vector<bool>& skip = {}) {
  const size_t n = x.size();
  const std::vector<double> w = testing::random_vector(n, rng);
  auto L = [&](const std::vector<double>& xv) {
    std::vector<double> y(n);
    fwd(xv.data(), y.data(), n);
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += w[i] * y[i];
    return s;
  };
  std::vector<double> y(n), dx(n, 777.0);
  fwd(x.data(), y.data(), n);
  bwd(x.data(), y.data(), w.data(), dx.data(), n);
  testing::expect_gradients_close(dx, testing::numerical_gradient(L, x), 1e-7, what, skip);
}

// Random values in (−4, 4) plus large magnitudes, where the derivatives are
// tiny and a wrong saturation branch shows.
std::vector<double> fd_inputs(Rng& rng) {
  std::vector<double> x = testing::random_vector(61, rng, -4, 4);
  for (double v : {-30.0, -12.5, 9.0, 25.0, 0.0}) x.push_back(v);
  return x;
}

TEST(Activations, SigmoidAndTanhGradientsMatchFiniteDifferences) {
  Rng rng(1601);
  const std::vector<double> x = fd_inputs(rng);
  check_elementwise(
      "sigmoid", [](const double* a, double* b, size_t n) { sigmoid_forward(a, b, n); },
      [](const double*, const double* y, const double* dy, double* dx, size_t n) {
        sigmoid_backward(y, dy, dx, n);
      },
      x, rng);
  check_elementwise(
      "tanh", [](const double* a, double* b, size_t n) { tanh_forward(a, b, n); },
      [](const double*, const double* y, const double* dy, double* dx, size_t n) {
        tanh_backward(y, dy, dx, n);
      },
      x, rng);
}

TEST(Activations, LeakyReluGradientMatchesFiniteDifferencesAwayFromTheKink) {
  Rng rng(1602);
  const std::vector<double> x = fd_inputs(rng);
  std::vector<bool> kink(x.size());
  for (size_t i = 0; i < x.size(); ++i) kink[i] = std::fabs(x[i]) < 1e-4;
  for (double slope : {0.01, 0.2, -0.3, 1.5}) {
    check_elementwise(
        ("leaky_relu slope " + std::to_string(slope)).c_str(),
        [slope](const double* a, double* b, size_t n) { leaky_relu_forward(a, b, n, slope); },
        [slope](const double* xv, const double*, const double* dy, double* dx, size_t n) {
          leaky_relu_backward(xv, dy, dx, n, slope);
        },
        x, rng, kink);
  }
}

TEST(Activations, PreluGradientsMatchFiniteDifferences) {
  Rng rng(1603);
  struct Case {
    int n, c;
    size_t plane;
  };
  for (const Case& k : {Case{1, 1, 1}, Case{1, 3, 35}, Case{2, 5, 1}, Case{3, 2, 9}}) {
    const size_t count = size_t(k.n) * size_t(k.c) * k.plane;
    std::vector<double> x = testing::random_vector(count, rng, -2, 2);
    const std::vector<double> a = testing::random_vector(size_t(k.c), rng, -0.5, 1.0);
    const std::vector<double> w = testing::random_vector(count, rng);
    std::vector<bool> kink(count);
    for (size_t i = 0; i < count; ++i) kink[i] = std::fabs(x[i]) < 1e-4;
    const std::string what =
        "prelu n=" + std::to_string(k.n) + " c=" + std::to_string(k.c) + " plane=" +
        std::to_string(k.plane);
    auto L = [&](const std::vector<double>& xv, const std::vector<double>& av) {
      std::vector<double> y(count);
      prelu_forward(xv.data(), av.data(), y.data(), k.n, k.c, k.plane);
      double s = 0;
      for (size_t i = 0; i < count; ++i) s += w[i] * y[i];
      return s;
    };
    std::vector<double> dx(count, 777.0), da(size_t(k.c), 0.0);
    prelu_backward(x.data(), a.data(), w.data(), dx.data(), da.data(), k.n, k.c, k.plane);
    testing::expect_gradients_close(
        dx, testing::numerical_gradient([&](const std::vector<double>& xv) { return L(xv, a); }, x),
        1e-7, what + " dx", kink);
    testing::expect_gradients_close(
        da, testing::numerical_gradient([&](const std::vector<double>& av) { return L(x, av); }, a),
        1e-7, what + " da");
  }
}

// ---- PyTorch float64 -------------------------------------------------------------

struct Golden {
  const char* name;
  const double* y;
  const double* dx;
  int64_t fwd_ulp;  // float ops: forward within this many ulp of PyTorch
  int64_t bwd_ulp;
};

template <typename T>
void run_act(const std::string& name, const T* x, const T* dy, T* y, T* dx, size_t n) {
  if (name == "sigmoid") {
    sigmoid_forward(x, y, n);
    sigmoid_backward(y, dy, dx, n);
  } else if (name == "tanh") {
    tanh_forward(x, y, n);
    tanh_backward(y, dy, dx, n);
  } else {
    const T slope = name == "leaky_relu 0.01" ? T(0.01) : T(0.2);
    leaky_relu_forward(x, y, n, slope);
    leaky_relu_backward(x, dy, dx, n, slope);
  }
}

TEST(Activations, MatchPyTorchFloat64) {
  // Float forward: sigmoid and tanh round a libm function (≤ 1 ulp in glibc)
  // and a division or two; leaky_relu's float slope 0.01f is not PyTorch's
  // double 0.01, a relative 1e−9 apart (≤ 1 ulp).
  const Golden cases[] = {{"sigmoid", kSigmoidY, kSigmoidDx, 2, 4},
                          {"tanh", kTanhY, kTanhDx, 2, 4},
                          {"leaky_relu 0.01", kLeakyDefaultY, kLeakyDefaultDx, 1, 1},
                          {"leaky_relu 0.2", kLeaky02Y, kLeaky02Dx, 1, 1}};
  for (const Golden& g : cases) {
    // Double: to rounding. PyTorch's tanh backward 1 − y·y loses up to an
    // ulp of 1 times |dy| near |y| = 1 (ours is (1 − y)(1 + y)), hence the
    // absolute term in |dy|.
    std::vector<double> y(kActN), dx(kActN), abs_y(kActN, 1e-300), abs_dx(kActN);
    run_act<double>(g.name, kActX, kActDy, y.data(), dx.data(), kActN);
    for (size_t i = 0; i < kActN; ++i) abs_dx[i] = 1e-15 * std::fabs(kActDy[i]) + 1e-300;
    expect_close_to(y, g.y, kActN, 1e-14, abs_y, std::string(g.name) + " double y");
    expect_close_to(dx, g.dx, kActN, 1e-14, abs_dx, std::string(g.name) + " double dx");
    // Float.
    const std::vector<float> xf = to_float(kActX, kActN), dyf = to_float(kActDy, kActN);
    std::vector<float> yf(kActN), dxf(kActN);
    run_act<float>(g.name, xf.data(), dyf.data(), yf.data(), dxf.data(), kActN);
    expect_ulps(yf, g.y, kActN, g.fwd_ulp, std::string(g.name) + " float y");
    if (g.name == std::string("sigmoid") || g.name == std::string("tanh")) {
      // Backward from the float y: near saturation 1 − y (sigmoid) and
      // 1 − y² (tanh) cancel, and y's own rounding (≤ 2 ulp of 1 from the
      // libm function) moves them by up to 2·2^−23·|dy| — or to 0 where y
      // rounds to ±1. Elsewhere within bwd_ulp.
      for (size_t i = 0; i < kActN; ++i) {
        if (ulp_distance(dxf[i], float(g.dx[i])) <= g.bwd_ulp) continue;
        EXPECT_LE(std::fabs(double(dxf[i]) - g.dx[i]), 6e-7 * std::fabs(kActDy[i]))
            << g.name << " float dx[" << i << "]: " << dxf[i] << " vs PyTorch " << g.dx[i];
      }
    } else {
      expect_ulps(dxf, g.dx, kActN, g.bwd_ulp, std::string(g.name) + " float dx");
    }
  }
}

TEST(Activations, PreluMatchesPyTorchFloat64) {
  constexpr size_t n = sizeof(kPreluX) / sizeof(kPreluX[0]);
  constexpr int c = 3;
  std::vector<double> y(n), dx(n), da(c, 0.0);
  prelu_forward(kPreluX, kPreluSlope, y.data(), 2, c, 4);
  prelu_backward(kPreluX, kPreluSlope, kPreluDy, dx.data(), da.data(), 2, c, 4);
  const std::vector<double> tiny(n, 1e-300);
  expect_close_to(y, kPreluY, n, 1e-15, tiny, "prelu double y");
  expect_close_to(dx, kPreluDx, n, 1e-15, tiny, "prelu double dx");
  expect_close_to(da, kPreluDslope, c, 1e-14, {1e-300, 1e-300, 1e-300}, "prelu double da");
  // Float: x·a of two floats is exact in double, so the float product is
  // PyTorch's value rounded: y and dx bit for bit; da (summed in double,
  // rounded once) within an ulp.
  const std::vector<float> xf = to_float(kPreluX, n), af = to_float(kPreluSlope, c),
                           dyf = to_float(kPreluDy, n);
  std::vector<float> yf(n), dxf(n), daf(c, 0.0f);
  prelu_forward(xf.data(), af.data(), yf.data(), 2, c, 4);
  prelu_backward(xf.data(), af.data(), dyf.data(), dxf.data(), daf.data(), 2, c, 4);
  expect_ulps(yf, kPreluY, n, 0, "prelu float y");
  expect_ulps(dxf, kPreluDx, n, 0, "prelu float dx");
  expect_ulps(daf, kPreluDslope, c, 1, "prelu float da");
}

// ---- parallel paths ----------------------------------------------------------------

TEST(Activations, LargeInputsTakeTheParallelPathWithTheSameResults) {
  // Above kActivationParallelMin the loops run under OpenMP; each element is
  // still its own formula, and prelu's slope gradient keeps its documented
  // order: each plane serially in double, then the planes in sample order.
  Rng rng(1604);
  const int n = 7, c = 5;
  const size_t plane = 33 * 31;
  const size_t count = size_t(n) * c * plane;
  ASSERT_GE(count, kActivationParallelMin);
  std::vector<float> x(count), dy(count), a(c);
  for (auto& v : x) v = rng.uniform(-3.f, 3.f);
  for (auto& v : dy) v = rng.uniform(-1.f, 1.f);
  for (auto& v : a) v = rng.uniform(-0.5f, 0.9f);

  std::vector<float> y(count), dx(count), da(c, 0.5f);
  sigmoid_forward(x.data(), y.data(), count);
  for (size_t i = 0; i < count; i += 97) ASSERT_EQ(y[i], sigmoid_value(x[i])) << i;
  tanh_backward(y.data(), dy.data(), dx.data(), count);
  for (size_t i = 0; i < count; i += 97) ASSERT_EQ(dx[i], tanh_grad(y[i], dy[i])) << i;

  prelu_forward(x.data(), a.data(), y.data(), n, c, plane);
  prelu_backward(x.data(), a.data(), dy.data(), dx.data(), da.data(), n, c, plane);
  for (int ch = 0; ch < c; ++ch) {
    double total = 0;
    for (int s = 0; s < n; ++s) {
      double part = 0;
      const size_t base = (size_t(s) * c + ch) * plane;
      for (size_t e = 0; e < plane; ++e) {
        const float xv = x[base + e];
        ASSERT_EQ(y[base + e], xv > 0 ? xv : xv * a[ch]);
        ASSERT_EQ(dx[base + e], xv > 0 ? dy[base + e] : dy[base + e] * a[ch]);
        if (!(xv > 0)) part += double(xv) * double(dy[base + e]);
      }
      total += part;
    }
    EXPECT_EQ(da[ch], 0.5f + float(total)) << "channel " << ch;
  }
}

}  // namespace
}  // namespace hpmc
