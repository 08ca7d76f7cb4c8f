// Average pooling and bilinear up-sampling ops on the CPU
// (layers/cpu/avgpool2d_ops.h, layers/cpu/upsample2d_ops.h): forward on
// hand-computed values; backward against central finite differences in
// double over odd shapes (overlapping windows, windows with gaps between
// them, 1×1 planes, scales 2, 3 and 4); and golden values from PyTorch in
// float64 (tools/golden/make_bn_pool.py: nn.AvgPool2d, nn.Upsample
// bilinear with align_corners=False), forward and backward.
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/rng.h"
#include "golden_bn_pool.h"
#include "layers/cpu/avgpool2d_ops.h"
#include "layers/cpu/upsample2d_ops.h"
#include "testing.h"

namespace hpmc {
namespace {

std::string shape_name(int planes, int h, int w) {
  return std::to_string(planes) + "x" + std::to_string(h) + "x" + std::to_string(w);
}

// For L(x) = Σ wᵢ·f(x)ᵢ, dL/dx is backward(dy = w): every output's gradient
// is checked at once against central differences.
template <typename Fwd, typename Bwd>
void check_gradient(Fwd f, Bwd df, size_t in_n, size_t out_n, Rng& rng, const std::string& what) {
  const std::vector<double> x = testing::random_vector(in_n, rng);
  const std::vector<double> w = testing::random_vector(out_n, rng);
  auto L = [&](const std::vector<double>& xv) {
    std::vector<double> y(out_n);
    f(xv.data(), y.data());
    double s = 0;
    for (size_t i = 0; i < out_n; ++i) s += w[i] * y[i];
    return s;
  };
  std::vector<double> dx(in_n, 777.0);
  df(w.data(), dx.data());
  testing::expect_gradients_close(dx, testing::numerical_gradient(L, x), 1e-7, what);
}

// ---- avgpool2d -------------------------------------------------------------------------------

TEST(AvgPool2dOps, NonOverlappingHandValues) {
  std::vector<float> x(16), y(4);
  std::iota(x.begin(), x.end(), 0.f);
  avgpool2d_forward(x.data(), y.data(), 1, 4, 4, 2, 2);
  EXPECT_EQ(y, (std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f}));
  // Backward: each input gets its window's dy / 4.
  const std::vector<float> dy = {4, 8, -4, 2};
  std::vector<float> dx(16, 99.f);
  avgpool2d_backward(dy.data(), dx.data(), 1, 4, 4, 2, 2);
  EXPECT_EQ(dx, (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, -1, -1, 0.5f, 0.5f, -1, -1, 0.5f,
                                    0.5f}));
}

TEST(AvgPool2dOps, OverlappingWindowsSumTheirShares) {
  // k = 2, s = 1 on 3×3: four windows; the centre lies in all four.
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> y(4), dx(9, 99.f);
  avgpool2d_forward(x.data(), y.data(), 1, 3, 3, 2, 1);
  EXPECT_EQ(y, (std::vector<float>{3, 4, 6, 7}));
  const std::vector<float> dy = {1, 1, 1, 1};
  avgpool2d_backward(dy.data(), dx.data(), 1, 3, 3, 2, 1);
  EXPECT_EQ(dx, (std::vector<float>{0.25f, 0.5f, 0.25f, 0.5f, 1, 0.5f, 0.25f, 0.5f, 0.25f}));
}

TEST(AvgPool2dOps, PositionsNoWindowCoversGetZeroGradient) {
  // k = 2, s = 3 on 2×5: windows over columns 0–1 and 3–4; column 2 is unseen.
  const std::vector<float> x = {1, 2, 50, 3, 4, 0, 1, 60, 7, 1};
  std::vector<float> y(2), dx(10, 99.f);
  avgpool2d_forward(x.data(), y.data(), 1, 2, 5, 2, 3);
  EXPECT_EQ(y, (std::vector<float>{1, 3.75f}));
  const std::vector<float> dy = {4, -8};
  avgpool2d_backward(dy.data(), dx.data(), 1, 2, 5, 2, 3);
  EXPECT_EQ(dx, (std::vector<float>{1, 1, 0, -2, -2, 1, 1, 0, -2, -2}));
}

TEST(AvgPool2dOps, BackwardMatchesFiniteDifferences) {
  struct Case {
    int planes, h, w, k, s;
  };
  const Case cases[] = {{1, 4, 4, 2, 2}, {3, 7, 9, 3, 2}, {5, 5, 6, 2, 1}, {2, 5, 7, 2, 3},
                        {1, 1, 1, 1, 1}, {1, 3, 5, 3, 1}, {2, 6, 6, 3, 3}, {3, 5, 5, 5, 2}};
  Rng rng(21);
  for (const Case& c : cases) {
    const int oh = pool_out_size(c.h, c.k, c.s), ow = pool_out_size(c.w, c.k, c.s);
    check_gradient(
        [&](const double* x, double* y) { avgpool2d_forward(x, y, c.planes, c.h, c.w, c.k, c.s); },
        [&](const double* dy, double* dx) {
          avgpool2d_backward(dy, dx, c.planes, c.h, c.w, c.k, c.s);
        },
        size_t(c.planes) * c.h * c.w, size_t(c.planes) * oh * ow, rng,
        "avgpool " + shape_name(c.planes, c.h, c.w) + " k" + std::to_string(c.k) + " s" +
            std::to_string(c.s));
  }
}

template <typename T>
void check_avgpool_golden(double tol) {
  struct Case {
    const char* name;
    int planes, h, w, k, s;
    const double *y, *dx;
  };
  const Case cases[] = {{"A", 2 * 3, 7, 9, 3, 2, kAvgPoolAY, kAvgPoolADx},
                        {"B", 1, 5, 6, 2, 1, kAvgPoolBY, kAvgPoolBDx},
                        {"C", 2, 5, 7, 2, 3, kAvgPoolCY, kAvgPoolCDx},
                        {"D", 1, 4, 4, 2, 2, kAvgPoolDY, kAvgPoolDDx}};
  for (const Case& c : cases) {
    const int oh = pool_out_size(c.h, c.k, c.s), ow = pool_out_size(c.w, c.k, c.s);
    const size_t in_n = size_t(c.planes) * c.h * c.w, out_n = size_t(c.planes) * oh * ow;
    const std::vector<double> xd = golden_wave(in_n, 0.61, 0.3, 0.05);
    const std::vector<double> dyd = golden_wave(out_n, 0.29, 1.1, 0);
    const std::vector<T> x(xd.begin(), xd.end()), dy(dyd.begin(), dyd.end());
    std::vector<T> y(out_n), dx(in_n);
    avgpool2d_forward(x.data(), y.data(), c.planes, c.h, c.w, c.k, c.s);
    avgpool2d_backward(dy.data(), dx.data(), c.planes, c.h, c.w, c.k, c.s);
    EXPECT_LE(testing::max_rel_error(y.data(), c.y, out_n), tol) << "case " << c.name << " y";
    EXPECT_LE(testing::max_rel_error(dx.data(), c.dx, in_n), tol) << "case " << c.name << " dx";
  }
}

// In double the only departures are rounding and the inputs themselves: the
// host compiler may fuse a·i + b in golden_wave's sin argument (up to ~230
// here, an ulp of 3e-14), which Python rounds twice. 1e-12 leaves room for
// that; a wrong weight or window errs by more than 1e-3.
TEST(AvgPool2dOps, MatchesPyTorchFloat64) {
  check_avgpool_golden<double>(1e-12);
  check_avgpool_golden<float>(1e-6);
}

// ---- bilinear up-sampling ---------------------------------------------------------------------

TEST(BilinearOps, SourceIndexIsPyTorchsClampedAtZero) {
  // Scale 2 on 2 positions: src = (d + 0.5)/2 − 0.5 = −0.25 (clamped to 0),
  // 0.25, 0.75, 1.25 (the last position: i1 = i0).
  const auto t = bilinear_taps<double>(2, 2);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].i0, 0);
  EXPECT_EQ(t[0].l1, 0.0);
  EXPECT_EQ(t[1].i0, 0);
  EXPECT_EQ(t[1].i1, 1);
  EXPECT_EQ(t[1].l1, 0.25);
  EXPECT_EQ(t[2].l1, 0.75);
  EXPECT_EQ(t[3].i0, 1);
  EXPECT_EQ(t[3].i1, 1);
  EXPECT_EQ(t[3].l1, 0.25);
  // Scale 3: src = (d + 0.5)/3 − 0.5 = −1/3, 0, 1/3, 2/3, 1, 4/3 on 2 positions.
  const auto u = bilinear_taps<double>(2, 3);
  EXPECT_EQ(u[1].i0, 0);
  EXPECT_EQ(u[1].l1, 0.0);
  EXPECT_NEAR(u[2].l1, 1.0 / 3, 1e-15);
  EXPECT_EQ(u[4].i0, 1);
  EXPECT_EQ(u[4].l1, 0.0);
}

TEST(BilinearOps, ForwardHandValues) {
  // x[r][c] = 2r + c on 2×2 is linear, so inside the clamped range the output
  // is 2·src(i) + src(j) with src = 0, 0.25, 0.75, 1 (clamped at both ends).
  const std::vector<float> x = {0, 1, 2, 3};
  std::vector<float> y(16);
  upsample2d_bilinear_forward(x.data(), y.data(), 1, 2, 2, 2);
  const float s[] = {0, 0.25f, 0.75f, 1};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(y[size_t(i) * 4 + j], 2 * s[i] + s[j]) << i << "," << j;
  // One row: both output rows read it.
  const std::vector<float> row = {0, 1};
  std::vector<float> y2(8);
  upsample2d_bilinear_forward(row.data(), y2.data(), 1, 1, 2, 2);
  EXPECT_EQ(y2, (std::vector<float>{0, 0.25f, 0.75f, 1, 0, 0.25f, 0.75f, 1}));
}

TEST(BilinearOps, ScaleOneIsTheIdentity) {
  Rng rng(22);
  std::vector<float> x(3 * 5 * 7), y(x.size()), dx(x.size());
  for (float& v : x) v = rng.uniform(-1.f, 1.f);
  upsample2d_bilinear_forward(x.data(), y.data(), 3, 5, 7, 1);
  EXPECT_EQ(y, x);
  upsample2d_bilinear_backward(x.data(), dx.data(), 3, 5, 7, 1);
  EXPECT_EQ(dx, x);
}

TEST(BilinearOps, BackwardHandValues) {
  // 1×2 → 2×4 (scale 2): each output row reads the one input row with weight 1;
  // the columns' weights on input 0 are 1, 0.75, 0.25, 0 and on input 1 0, 0.25,
  // 0.75, 1. With dy = 1 everywhere: dx = 2·(2, 2).
  const std::vector<float> dy(8, 1.f);
  std::vector<float> dx(2, 99.f);
  upsample2d_bilinear_backward(dy.data(), dx.data(), 1, 1, 2, 2);
  EXPECT_EQ(dx, (std::vector<float>{4, 4}));
  // dy = 1 only at output column 1: input 0 gets 0.75 twice, input 1 0.25 twice.
  const std::vector<float> dy1 = {0, 1, 0, 0, 0, 1, 0, 0};
  upsample2d_bilinear_backward(dy1.data(), dx.data(), 1, 1, 2, 2);
  EXPECT_EQ(dx, (std::vector<float>{1.5f, 0.5f}));
}

TEST(BilinearOps, BackwardMatchesFiniteDifferences) {
  struct Case {
    int planes, h, w, s;
  };
  const Case cases[] = {{1, 3, 5, 2}, {3, 4, 3, 3}, {1, 1, 1, 2}, {5, 1, 4, 4},
                        {2, 5, 1, 3}, {1, 7, 6, 2}, {3, 2, 2, 4}};
  Rng rng(23);
  for (const Case& c : cases)
    check_gradient(
        [&](const double* x, double* y) {
          upsample2d_bilinear_forward(x, y, c.planes, c.h, c.w, c.s);
        },
        [&](const double* dy, double* dx) {
          upsample2d_bilinear_backward(dy, dx, c.planes, c.h, c.w, c.s);
        },
        size_t(c.planes) * c.h * c.w, size_t(c.planes) * c.h * c.s * c.w * c.s, rng,
        "bilinear " + shape_name(c.planes, c.h, c.w) + " x" + std::to_string(c.s));
}

template <typename T>
void check_bilinear_golden(double tol) {
  struct Case {
    const char* name;
    int planes, h, w, s;
    const double *y, *dx;
  };
  const Case cases[] = {{"A", 3, 3, 5, 2, kBilinearAY, kBilinearADx},
                        {"B", 2, 4, 3, 3, kBilinearBY, kBilinearBDx},
                        {"C", 1, 1, 2, 4, kBilinearCY, kBilinearCDx},
                        {"D", 2, 2, 2, 2, kBilinearDY, kBilinearDDx}};
  for (const Case& c : cases) {
    const size_t in_n = size_t(c.planes) * c.h * c.w;
    const size_t out_n = in_n * size_t(c.s) * c.s;
    const std::vector<double> xd = golden_wave(in_n, 0.53, 0.7, 0.05);
    const std::vector<double> dyd = golden_wave(out_n, 0.31, 0.4, 0);
    const std::vector<T> x(xd.begin(), xd.end()), dy(dyd.begin(), dyd.end());
    std::vector<T> y(out_n), dx(in_n);
    upsample2d_bilinear_forward(x.data(), y.data(), c.planes, c.h, c.w, c.s);
    upsample2d_bilinear_backward(dy.data(), dx.data(), c.planes, c.h, c.w, c.s);
    EXPECT_LE(testing::max_rel_error(y.data(), c.y, out_n), tol) << "case " << c.name << " y";
    EXPECT_LE(testing::max_rel_error(dx.data(), c.dx, in_n), tol) << "case " << c.name << " dx";
  }
}

// Tolerances as for AvgPool2dOps.MatchesPyTorchFloat64.
TEST(BilinearOps, MatchesPyTorchFloat64) {
  check_bilinear_golden<double>(1e-12);
  check_bilinear_golden<float>(2e-6);
}

}  // namespace
}  // namespace hpmc
