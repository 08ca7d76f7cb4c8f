// The parameter-free CPU layers: ReLU, MaxPool2D, UpSample2D (nearest) and
// Flatten. Forward on hand-computed cases; backward against central finite
// differences of the templated ops in double; the gradient convention (dx
// overwritten) and edge cases (batch 1, odd sizes, 1/3/5 channels, NaN).
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "layers/cpu/flatten.h"
#include "layers/cpu/maxpool2d.h"
#include "layers/cpu/maxpool2d_ops.h"
#include "layers/cpu/relu.h"
#include "layers/cpu/relu_ops.h"
#include "layers/cpu/upsample2d.h"
#include "layers/cpu/upsample2d_ops.h"
#include "testing.h"

namespace hpmc {
namespace {

Tensor make_tensor(const Shape& s, const std::vector<float>& v) {
  Tensor t = Tensor::empty(s);
  EXPECT_EQ(v.size(), t.numel()) << "test bug: wrong number of values for " << s.str();
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

std::vector<float> values(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

Tensor forward(Layer& layer, const Tensor& x) {
  layer.set_input_shape(x.shape());
  Tensor y = Tensor::zeros(layer.output_shape(x.shape()));
  layer.forward(x, y);
  return y;
}

// dx from the layer's backward, with dx pre-filled with garbage so that a
// layer which accumulates instead of overwriting is caught.
Tensor backward(Layer& layer, const Tensor& x, const Tensor& y, const Tensor& dy) {
  Tensor dx = Tensor::empty(x.shape());
  std::fill(dx.data<float>(), dx.data<float>() + dx.numel(), 123.f);
  layer.backward(x, y, dy, &dx);
  return dx;
}

using Fn = std::function<void(const double* x, double* y)>;
using Grad = std::function<void(const double* x, const double* dy, double* dx)>;

// For the scalar L(x) = Σ_i w_i · f(x)_i, dL/dx is exactly backward(x, dy = w),
// so a random w exercises every output's gradient at once.
void check_gradient(const Fn& f, const Grad& df, const std::vector<double>& x, size_t out_n,
                    Rng& rng, const std::string& what) {
  const std::vector<double> w = testing::random_vector(out_n, rng);
  auto L = [&](const std::vector<double>& xv) {
    std::vector<double> y(out_n);
    f(xv.data(), y.data());
    double s = 0;
    for (size_t i = 0; i < out_n; ++i) s += w[i] * y[i];
    return s;
  };
  std::vector<double> analytic(x.size(), 777.0);
  df(x.data(), w.data(), analytic.data());
  testing::expect_gradients_close(analytic, testing::numerical_gradient(L, x), 1e-6, what);
}

// Distinct values, at least 0.01 apart (far beyond the finite-difference
// step), so no pooling window has a tie within eps.
std::vector<double> distinct_values(size_t n, Rng& rng) {
  std::vector<int32_t> perm = random_permutation(int32_t(n), rng);
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 0.01 * (perm[i] - double(n) / 2);
  return x;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- ReLU ------------------------------------------------------------------

TEST(ReLU, ForwardKnownValues) {
  ReLUCPU relu("r");
  EXPECT_EQ(std::string(relu.type()), "relu");
  EXPECT_EQ(relu.device(), Device::kCPU);
  Tensor x = make_tensor(Shape(1, 1, 2, 3), {-2.f, -0.5f, 0.f, 0.5f, 3.f, -1e-30f});
  EXPECT_EQ(values(forward(relu, x)), (std::vector<float>{0, 0, 0, 0.5f, 3.f, 0}));
}

TEST(ReLU, NaNPropagates) {
  ReLUCPU relu("r");
  Tensor x = make_tensor(Shape(1, 2, 1, 1), {kNaN, -1.f});
  Tensor y = forward(relu, x);
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
  EXPECT_EQ(y.data<float>()[1], 0.f);
}

TEST(ReLU, BackwardMasksAndZeroIsAKink) {
  ReLUCPU relu("r");
  Tensor x = make_tensor(Shape(1, 1, 1, 5), {-2.f, 0.f, 1e-6f, 4.f, -1e-6f});
  Tensor y = forward(relu, x);
  Tensor dy = make_tensor(Shape(1, 1, 1, 5), {1.f, 2.f, 3.f, 4.f, 5.f});
  // The derivative at exactly 0 is 0, as in PyTorch.
  EXPECT_EQ(values(backward(relu, x, y, dy)), (std::vector<float>{0, 0, 3.f, 4.f, 0}));
}

TEST(ReLU, BackwardMatchesFiniteDifferences) {
  Rng rng(11);
  for (size_t n : {1u, 7u, 3u * 5 * 5, 5u * 4 * 3}) {
    std::vector<double> x = testing::random_vector(n, rng);
    // Keep away from the kink at 0, where the two one-sided slopes differ.
    for (double& v : x)
      if (std::fabs(v) < 1e-3) v = v < 0 ? -0.5 : 0.5;
    check_gradient([n](const double* a, double* b) { relu_forward(a, b, n); },
                   [n](const double* a, const double* g, double* d) { relu_backward(a, g, d, n); },
                   x, n, rng, "relu n=" + std::to_string(n));
  }
}

TEST(ReLU, LargeTensorTakesTheParallelPath) {
  Rng rng(12);
  const Shape s(3, 5, 97, 101);  // > kReluParallelMin elements
  ASSERT_GE(s.count(), kReluParallelMin);
  ReLUCPU relu("r");
  Tensor x = testing::random_tensor(s, rng);
  Tensor y = forward(relu, x);
  Tensor dy = testing::random_tensor(s, rng);
  Tensor dx = backward(relu, x, y, dy);
  for (size_t i = 0; i < s.count(); ++i) {
    float xi = x.data<float>()[i];
    ASSERT_EQ(y.data<float>()[i], xi > 0 ? xi : 0.f) << i;
    ASSERT_EQ(dx.data<float>()[i], xi > 0 ? dy.data<float>()[i] : 0.f) << i;
  }
}

// ---- MaxPool2D -------------------------------------------------------------

TEST(MaxPool2d, Forward4x4NonOverlapping) {
  MaxPool2dCPU pool("p", MaxPool2dConfig{});
  EXPECT_EQ(std::string(pool.type()), "maxpool2d");
  EXPECT_EQ(pool.stride(), 2);  // stride 0 means = kernel
  EXPECT_EQ(pool.describe(), "2x2 s2");
  Tensor x = make_tensor(Shape(1, 1, 4, 4), {1, 2, 5, 3,   //
                                             4, 0, 1, 2,   //
                                             7, 8, 9, 1,   //
                                             6, 3, 2, 10});
  Tensor y = forward(pool, x);
  EXPECT_EQ(y.shape(), Shape(1, 1, 2, 2));
  EXPECT_EQ(values(y), (std::vector<float>{4, 5, 8, 10}));
}

TEST(MaxPool2d, OddInputFloorsAndIgnoresTheLastRowAndColumn) {
  std::vector<float> v(25);
  std::iota(v.begin(), v.end(), 0.f);
  v[4] = 99;    // row 0, column 4: outside every window
  v[24] = 100;  // row 4, column 4: outside every window
  MaxPool2dCPU pool("p", MaxPool2dConfig{2, 2});
  Tensor y = forward(pool, make_tensor(Shape(1, 1, 5, 5), v));
  EXPECT_EQ(y.shape(), Shape(1, 1, 2, 2));
  EXPECT_EQ(values(y), (std::vector<float>{6, 8, 16, 18}));
}

TEST(MaxPool2d, OverlappingStride1) {
  MaxPool2dCPU pool("p", MaxPool2dConfig{2, 1});
  Tensor x = make_tensor(Shape(1, 1, 3, 3), {1, 5, 2,  //
                                             3, 4, 9,  //
                                             0, 7, 6});
  Tensor y = forward(pool, x);
  EXPECT_EQ(y.shape(), Shape(1, 1, 2, 2));
  EXPECT_EQ(values(y), (std::vector<float>{5, 9, 7, 9}));
}

TEST(MaxPool2d, StrideLargerThanKernelSkips) {
  // k=2, s=3 on 5 wide: windows at columns 0-1 and 3-4; column 2 is never seen.
  MaxPool2dCPU pool("p", MaxPool2dConfig{2, 3});
  Tensor x = make_tensor(Shape(1, 1, 2, 5), {1, 2, 50, 3, 4,  //
                                             0, 1, 60, 7, 1});
  Tensor y = forward(pool, x);
  EXPECT_EQ(y.shape(), Shape(1, 1, 1, 2));
  EXPECT_EQ(values(y), (std::vector<float>{2, 7}));
}

TEST(MaxPool2d, ChannelsAndBatchArePooledIndependently) {
  // Batch 2 × 3 channels of 2×2: each plane's maximum is its own.
  std::vector<float> v(2 * 3 * 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 7) % 24);
  MaxPool2dCPU pool("p", MaxPool2dConfig{2, 0});
  Tensor y = forward(pool, make_tensor(Shape(2, 3, 2, 2), v));
  ASSERT_EQ(y.shape(), Shape(2, 3, 1, 1));
  for (int p = 0; p < 6; ++p)
    EXPECT_EQ(y.data<float>()[p], *std::max_element(v.begin() + 4 * p, v.begin() + 4 * p + 4));
}

TEST(MaxPool2d, WindowThatDoesNotFitIsAShapeError) {
  MaxPool2dCPU pool("p", MaxPool2dConfig{3, 1});
  try {
    pool.output_shape(Shape(1, 4, 2, 5));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("3x3"), std::string::npos) << m;
    EXPECT_NE(m.find("2x5"), std::string::npos) << m;
  }
  EXPECT_THROW(pool.set_input_shape(Shape(1, 1, 5, 2)), ShapeError);
  EXPECT_EQ(pool.output_shape(Shape(2, 4, 3, 3)), Shape(2, 4, 1, 1));
}

TEST(MaxPool2d, BadConfigIsAConfigError) {
  EXPECT_THROW(MaxPool2dCPU("p", MaxPool2dConfig{0, 0}), ConfigError);
  EXPECT_THROW(MaxPool2dCPU("p", MaxPool2dConfig{-1, 1}), ConfigError);
  EXPECT_THROW(MaxPool2dCPU("p", MaxPool2dConfig{2, -1}), ConfigError);
  EXPECT_NO_THROW(MaxPool2dCPU("p", MaxPool2dConfig{1, 1}));
}

TEST(MaxPool2d, NaNInAWindowPropagates) {
  MaxPool2dCPU pool("p", MaxPool2dConfig{2, 2});
  Tensor x = make_tensor(Shape(1, 1, 2, 4), {1, kNaN, 3, 4,  //
                                             5, 0, 7, 8});
  Tensor y = forward(pool, x);
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
  EXPECT_EQ(y.data<float>()[1], 8.f);
  // Backward does not crash and sends the NaN window's gradient to the NaN.
  Tensor dy = make_tensor(Shape(1, 1, 1, 2), {1, 2});
  EXPECT_EQ(values(backward(pool, x, y, dy)), (std::vector<float>{0, 1, 0, 0, 0, 0, 0, 2}));
}

TEST(MaxPool2d, BackwardRoutesToTheMaximum) {
  MaxPool2dCPU pool("p", MaxPool2dConfig{});
  Tensor x = make_tensor(Shape(1, 1, 4, 4), {1, 2, 5, 3,   //
                                             4, 0, 1, 2,   //
                                             7, 8, 9, 1,   //
                                             6, 3, 2, 10});
  Tensor y = forward(pool, x);
  Tensor dy = make_tensor(Shape(1, 1, 2, 2), {0.1f, 0.2f, 0.3f, 0.4f});
  EXPECT_EQ(values(backward(pool, x, y, dy)), (std::vector<float>{0, 0, 0.2f, 0,  //
                                                                  0.1f, 0, 0, 0,  //
                                                                  0, 0.3f, 0, 0,  //
                                                                  0, 0, 0, 0.4f}));
}

TEST(MaxPool2d, OverlappingWindowsAccumulate) {
  // The centre is the maximum of all four 2×2 stride-1 windows, so it collects
  // the sum of their gradients.
  MaxPool2dCPU pool("p", MaxPool2dConfig{2, 1});
  Tensor x = make_tensor(Shape(1, 1, 3, 3), {1, 2, 3,  //
                                             4, 9, 5,  //
                                             6, 7, 8});
  Tensor y = forward(pool, x);
  EXPECT_EQ(values(y), (std::vector<float>{9, 9, 9, 9}));
  Tensor dy = make_tensor(Shape(1, 1, 2, 2), {1, 2, 3, 4});
  EXPECT_EQ(values(backward(pool, x, y, dy)), (std::vector<float>{0, 0, 0, 0, 10, 0, 0, 0, 0}));
}

TEST(MaxPool2d, TiesGoToTheFirstMaximumInRowMajorOrder) {
  MaxPool2dCPU pool("p", MaxPool2dConfig{2, 2});
  Tensor x = make_tensor(Shape(1, 1, 2, 6), {1, 1, 3, 5, 0, 2,  //
                                             1, 1, 5, 5, 2, 1});
  Tensor y = forward(pool, x);
  EXPECT_EQ(values(y), (std::vector<float>{1, 5, 2}));
  Tensor dy = make_tensor(Shape(1, 1, 1, 3), {1, 2, 3});
  // Window 0: all equal → top-left. Window 1: 5 at (0,3), (1,2), (1,3) → (0,3).
  // Window 2: 2 at (0,5) and (1,4) → (0,5), the earlier one in row-major order.
  EXPECT_EQ(values(backward(pool, x, y, dy)), (std::vector<float>{1, 0, 0, 2, 0, 3,  //
                                                                  0, 0, 0, 0, 0, 0}));
}

TEST(MaxPool2d, BackwardMatchesFiniteDifferences) {
  struct Case {
    int n, c, h, w, k, s;
  };
  const Case cases[] = {{2, 3, 4, 4, 2, 2},  {1, 1, 5, 5, 2, 2}, {1, 5, 5, 7, 3, 1},
                        {2, 1, 6, 5, 2, 1},  {1, 3, 7, 7, 3, 2}, {1, 1, 5, 8, 2, 3},
                        {3, 1, 1, 1, 1, 1}};
  Rng rng(21);
  for (const Case& cs : cases) {
    const int64_t planes = int64_t(cs.n) * cs.c;
    const int oh = maxpool2d_out_size(cs.h, cs.k, cs.s), ow = maxpool2d_out_size(cs.w, cs.k, cs.s);
    const size_t in_n = size_t(planes) * cs.h * cs.w, out_n = size_t(planes) * oh * ow;
    check_gradient(
        [&](const double* a, double* b) {
          maxpool2d_forward(a, b, planes, cs.h, cs.w, cs.k, cs.s);
        },
        [&](const double* a, const double* g, double* d) {
          maxpool2d_backward(a, g, d, planes, cs.h, cs.w, cs.k, cs.s);
        },
        distinct_values(in_n, rng), out_n, rng,
        str("maxpool ", Shape(cs.n, cs.c, cs.h, cs.w).str(), " k", cs.k, " s", cs.s));
  }
}

TEST(MaxPool2d, FloatLayerMatchesDoubleOps) {
  Rng rng(22);
  const Shape s(2, 3, 9, 7);
  MaxPool2dCPU pool("p", MaxPool2dConfig{3, 2});
  Tensor x = testing::random_tensor(s, rng);
  Tensor y = forward(pool, x);
  Tensor dy = testing::random_tensor(y.shape(), rng);
  Tensor dx = backward(pool, x, y, dy);
  std::vector<double> xd(x.data<float>(), x.data<float>() + x.numel());
  std::vector<double> dyd(dy.data<float>(), dy.data<float>() + dy.numel());
  std::vector<double> yd(y.numel()), dxd(x.numel());
  maxpool2d_forward(xd.data(), yd.data(), 6, 9, 7, 3, 2);
  maxpool2d_backward(xd.data(), dyd.data(), dxd.data(), 6, 9, 7, 3, 2);
  EXPECT_LE(testing::max_rel_error(y.data<float>(), yd.data(), yd.size()), 0.0);
  EXPECT_LE(testing::max_rel_error(dx.data<float>(), dxd.data(), dxd.size()), 1e-6);
}

// Values that stress the pooling rule and the sums' order: few distinct
// values (ties), both zeros, NaNs with payloads, large and small magnitudes.
std::vector<float> tricky_values(size_t n, Rng& rng) {
  const float pool[] = {0.f, -0.f, 1.f, -1.f, 0.5f, 3e38f, -3e38f, 1e-40f, -2.5f,
                        std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                        std::nanf("7")};
  std::vector<float> v(n);
  for (float& x : v) x = rng.below(3) == 0 ? pool[rng.below(12)] : rng.uniform(-4.f, 4.f);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The 2×2, stride-2 loops give the general loops' bits (forward values,
// NaN payloads, signed zeros; backward routing and +0 for −0), odd sizes too.
TEST(MaxPool2d, TwoByTwoLoopsGiveTheGeneralBits) {
  Rng rng(23);
  for (const auto& [planes, h, w] : {std::tuple{3, 4, 4}, {2, 7, 9}, {1, 2, 2}, {5, 32, 32},
                                     {2, 3, 8}, {4, 16, 15}}) {
    SCOPED_TRACE(str(planes, " planes of ", h, "x", w));
    const std::vector<float> x = tricky_values(size_t(planes) * h * w, rng);
    const size_t out_n = size_t(planes) * (h / 2) * (w / 2);
    std::vector<float> fast(out_n), general(out_n);
    maxpool2d_forward_2x2(x.data(), fast.data(), planes, h, w);
    maxpool2d_forward_general(x.data(), general.data(), planes, h, w, 2, 2);
    EXPECT_TRUE(same_bits(fast, general));
    const std::vector<float> dy = tricky_values(out_n, rng);
    std::vector<float> dfast(x.size(), 5.f), dgeneral(x.size(), 7.f);  // overwritten
    maxpool2d_backward_2x2(x.data(), dy.data(), dfast.data(), planes, h, w);
    maxpool2d_backward_general(x.data(), dy.data(), dgeneral.data(), planes, h, w, 2, 2);
    EXPECT_TRUE(same_bits(dfast, dgeneral));
  }
}

// ---- UpSample2D ------------------------------------------------------------

TEST(UpSample2d, Forward2x2AndBackwardSumsBlocks) {
  UpSample2dCPU up("u");
  EXPECT_EQ(std::string(up.type()), "upsample2d");
  EXPECT_EQ(up.scale(), 2);
  Tensor x = make_tensor(Shape(1, 1, 2, 2), {1, 2, 3, 4});
  Tensor y = forward(up, x);
  EXPECT_EQ(y.shape(), Shape(1, 1, 4, 4));
  EXPECT_EQ(values(y), (std::vector<float>{1, 1, 2, 2,  //
                                           1, 1, 2, 2,  //
                                           3, 3, 4, 4,  //
                                           3, 3, 4, 4}));
  std::vector<float> g(16);
  std::iota(g.begin(), g.end(), 0.f);
  Tensor dy = make_tensor(Shape(1, 1, 4, 4), g);
  // Block sums: 0+1+4+5, 2+3+6+7, 8+9+12+13, 10+11+14+15.
  EXPECT_EQ(values(backward(up, x, y, dy)), (std::vector<float>{10, 18, 42, 50}));
}

TEST(UpSample2d, Scale3OddSizeAndChannels) {
  UpSample2dCPU up("u", 3);
  Tensor x = make_tensor(Shape(1, 2, 1, 2), {1, 2, 7, 8});
  Tensor y = forward(up, x);
  ASSERT_EQ(y.shape(), Shape(1, 2, 3, 6));
  const std::vector<float> row0 = {1, 1, 1, 2, 2, 2}, row1 = {7, 7, 7, 8, 8, 8};
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 6; ++j)
        EXPECT_EQ(y.data<float>()[(c * 3 + i) * 6 + j], (c == 0 ? row0 : row1)[j]);
}

TEST(UpSample2d, Scale1IsIdentity) {
  Rng rng(31);
  UpSample2dCPU up("u", 1);
  Tensor x = testing::random_tensor(Shape(1, 3, 5, 3), rng);
  Tensor y = forward(up, x);
  EXPECT_EQ(values(y), values(x));
  Tensor dy = testing::random_tensor(y.shape(), rng);
  EXPECT_EQ(values(backward(up, x, y, dy)), values(dy));
}

TEST(UpSample2d, BadScaleIsAConfigError) {
  EXPECT_THROW(UpSample2dCPU("u", 0), ConfigError);
  EXPECT_THROW(UpSample2dCPU("u", -2), ConfigError);
}

TEST(UpSample2d, BackwardMatchesFiniteDifferences) {
  struct Case {
    int n, c, h, w, s;
  };
  const Case cases[] = {{2, 3, 2, 3, 2}, {1, 1, 3, 3, 3}, {1, 5, 1, 2, 2}, {3, 1, 2, 1, 1}};
  Rng rng(32);
  for (const Case& cs : cases) {
    const int64_t planes = int64_t(cs.n) * cs.c;
    const size_t in_n = size_t(planes) * cs.h * cs.w, out_n = in_n * cs.s * cs.s;
    check_gradient(
        [&](const double* a, double* b) { upsample2d_forward(a, b, planes, cs.h, cs.w, cs.s); },
        [&](const double*, const double* g, double* d) {
          upsample2d_backward(g, d, planes, cs.h, cs.w, cs.s);
        },
        testing::random_vector(in_n, rng), out_n, rng,
        str("upsample ", Shape(cs.n, cs.c, cs.h, cs.w).str(), " x", cs.s));
  }
}

// Scale 2's loops give the general loops' bits: the copies, and the block
// sums in the same order (−0 + −0 sums to +0 from the 0 the sum starts at).
TEST(UpSample2d, ScaleTwoLoopsGiveTheGeneralBits) {
  Rng rng(33);
  for (const auto& [planes, h, w] : {std::tuple{3, 4, 4}, {2, 7, 9}, {1, 1, 1}, {5, 16, 16}}) {
    SCOPED_TRACE(str(planes, " planes of ", h, "x", w));
    const std::vector<float> x = tricky_values(size_t(planes) * h * w, rng);
    std::vector<float> fast(x.size() * 4), general(x.size() * 4);
    upsample2d_forward_x2(x.data(), fast.data(), planes, h, w);
    upsample2d_forward_general(x.data(), general.data(), planes, h, w, 2);
    EXPECT_TRUE(same_bits(fast, general));
    std::vector<float> dy = tricky_values(x.size() * 4, rng);
    for (size_t i = 0; i < dy.size(); i += 7) dy[i] = -0.f;
    std::vector<float> dfast(x.size(), 5.f), dgeneral(x.size(), 7.f);
    upsample2d_backward_x2(dy.data(), dfast.data(), planes, h, w);
    upsample2d_backward_general(dy.data(), dgeneral.data(), planes, h, w, 2);
    EXPECT_TRUE(same_bits(dfast, dgeneral));
  }
}

// ---- Flatten ---------------------------------------------------------------

TEST(Flatten, ShapeAndCopies) {
  Rng rng(41);
  FlattenCPU flat("f");
  EXPECT_EQ(std::string(flat.type()), "flatten");
  EXPECT_EQ(flat.output_shape(Shape(7, 3, 5, 5)), Shape(7, 75, 1, 1));
  Tensor x = testing::random_tensor(Shape(2, 3, 2, 5), rng);
  Tensor y = forward(flat, x);
  EXPECT_EQ(y.shape(), Shape(2, 30, 1, 1));
  EXPECT_EQ(values(y), values(x));  // NCHW order, as PyTorch's nn.Flatten()
  Tensor dy = testing::random_tensor(y.shape(), rng);
  Tensor dx = backward(flat, x, y, dy);
  EXPECT_EQ(dx.shape(), x.shape());
  EXPECT_EQ(values(dx), values(dy));
}

TEST(Flatten, AlreadyFlatIsUnchanged) {
  FlattenCPU flat("f");
  EXPECT_EQ(flat.output_shape(Shape(1, 10, 1, 1)), Shape(1, 10, 1, 1));
}

// ---- all four --------------------------------------------------------------

// dx is overwritten: backward twice (into a garbage-filled dx each time, and
// once more into the same dx) gives identical results; a null dx is allowed.
TEST(SimpleLayers, BackwardOverwritesDxAndAcceptsNull) {
  Rng rng(51);
  std::vector<std::pair<std::unique_ptr<Layer>, Shape>> layers;
  layers.emplace_back(std::make_unique<ReLUCPU>("relu"), Shape(1, 5, 3, 3));
  layers.emplace_back(std::make_unique<MaxPool2dCPU>("pool", MaxPool2dConfig{2, 1}),
                      Shape(2, 3, 5, 5));
  layers.emplace_back(std::make_unique<UpSample2dCPU>("up", 2), Shape(1, 1, 3, 5));
  layers.emplace_back(std::make_unique<FlattenCPU>("flat"), Shape(3, 3, 1, 5));
  for (auto& [layer, shape] : layers) {
    Tensor x = testing::random_tensor(shape, rng);
    Tensor y = forward(*layer, x);
    Tensor dy = testing::random_tensor(y.shape(), rng);
    Tensor dx1 = backward(*layer, x, y, dy);
    Tensor dx2 = backward(*layer, x, y, dy);
    EXPECT_EQ(values(dx1), values(dx2)) << layer->type();
    layer->backward(x, y, dy, &dx2);
    EXPECT_EQ(values(dx1), values(dx2)) << layer->type();
    EXPECT_NO_THROW(layer->backward(x, y, dy, nullptr)) << layer->type();
    EXPECT_EQ(layer->param_count(), 0u) << layer->type();
    EXPECT_EQ(std::string(layer->impl()), "cpu");
  }
}

// A layer built for batch 4 runs on a last, partial batch of 1.
TEST(SimpleLayers, SmallerBatchThanBuiltFor) {
  Rng rng(52);
  MaxPool2dCPU pool("p", MaxPool2dConfig{2, 2});
  pool.set_input_shape(Shape(4, 3, 4, 4));
  Tensor x = testing::random_tensor(Shape(1, 3, 4, 4), rng);
  Tensor y = Tensor::zeros(Shape(1, 3, 2, 2));
  EXPECT_NO_THROW(pool.forward(x, y));
  Tensor wrong = Tensor::zeros(Shape(1, 3, 3, 3));
  EXPECT_THROW(pool.forward(x, wrong), Error);
}

}  // namespace
}  // namespace hpmc
