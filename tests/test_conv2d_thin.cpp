// The thin-layer convolution (conv2d_thin.h) against the direct oracle: a
// sweep of shapes for K = 1..4 (and some up to 17) at every SIMD level this
// CPU supports, in float and double; the gradient convention (dw/db +=, dx
// overwritten — poisoned with NaN first); bit-identical repeats; and the
// switch between the thin and the im2col + gemm paths in conv2d_ops.h.
// Finite differences through the thin path are in test_conv2d.cpp.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/precision.h"
#include "core/rng.h"
#include "layers/conv_shape.h"
#include "layers/cpu/conv2d_ops.h"
#include "layers/cpu/conv2d_thin.h"
#include "layers/cpu/conv2d_thin_bf16.h"
#include "testing.h"

namespace hpmc {
namespace {

using cpu::SimdLevel;

std::vector<SimdLevel> supported_levels() {
  std::vector<SimdLevel> v;
  for (SimdLevel l : {SimdLevel::kPortable, SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (cpu::simd_level_supported(l)) v.push_back(l);
  return v;
}

struct ThinCase {
  int n, c, h, w, k, kernel, stride, pad;
  bool bias;

  Conv2dShape shape() const {
    return make_conv2d_shape(n, c, h, w, k, kernel, kernel, stride, pad);
  }
  std::string name() const {
    return str("n", n, "_c", c, "_", h, "x", w, "_k", k, "_", kernel, "x", kernel, "_s", stride,
               "_p", pad, bias ? "" : "_nobias");
  }
};

void PrintTo(const ThinCase& c, std::ostream* os) { *os << c.name(); }

template <typename T>
std::vector<T> random_values(size_t n, Rng& rng) {
  std::vector<T> v(n);
  for (auto& x : v) x = T(rng.uniform(-1.f, 1.f));
  return v;
}

// max |a - b| / max(|a|, |b|, scale), scale = max(1, rms(b)): rounding is
// relative to the size of the sums (see test_conv2d.cpp).
template <typename T>
double max_scaled_error(const std::vector<T>& a, const std::vector<T>& b) {
  double ss = 0;
  for (T v : b) ss += double(v) * double(v);
  const double scale = std::max(1.0, std::sqrt(ss / double(std::max<size_t>(b.size(), 1))));
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
    worst = std::max(worst, std::fabs(x - y) / std::max({std::fabs(x), std::fabs(y), scale}));
  }
  return worst;
}

// Forward, input gradient and parameter gradients of the thin path at every
// supported SIMD level against the oracle, on fresh random inputs. y and dx
// start as NaN (they must be overwritten); dw and db start at random values
// (they must be added to).
template <typename T>
void expect_thin_matches_direct(const ThinCase& tc, double tol) {
  SCOPED_TRACE(str(tc.name(), " ", sizeof(T) == 4 ? "float" : "double"));
  const Conv2dShape sh = tc.shape();
  ASSERT_GT(sh.P, 0);
  ASSERT_GT(sh.Q, 0);
  Rng rng(uint64_t(sh.N * 1000003 + sh.C * 7919 + sh.H * 131 + sh.W * 17 + sh.K * 5 + sh.R +
                   sh.stride * 3 + sh.pad));
  const size_t nx = sh.N * sh.in_sample(), ny = sh.N * sh.out_sample();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  auto x = random_values<T>(nx, rng);
  auto w = random_values<T>(sh.weight_count(), rng);
  auto b = random_values<T>(size_t(sh.K), rng);
  auto dy = random_values<T>(ny, rng);
  auto dw0 = random_values<T>(w.size(), rng);
  auto db0 = random_values<T>(b.size(), rng);
  const T* bias = tc.bias ? b.data() : nullptr;

  std::vector<T> y_ref(ny), dx_ref(nx), dw_ref = dw0, db_ref = db0;
  cpu::conv2d_direct_forward(sh, x.data(), w.data(), bias, y_ref.data());
  cpu::conv2d_direct_backward_data(sh, dy.data(), w.data(), dx_ref.data());
  cpu::conv2d_direct_backward_weight(sh, x.data(), dy.data(), dw_ref.data());
  if (tc.bias) cpu::conv2d_direct_backward_bias(sh, dy.data(), db_ref.data());

  for (SimdLevel level : supported_levels()) {
    SCOPED_TRACE(cpu::simd_level_name(level));
    cpu::Conv2dThinWorkspace<T> ws;
    std::vector<T> y(ny, nan);
    cpu::conv2d_thin_forward(sh, x.data(), w.data(), bias, y.data(), ws, level);
    EXPECT_LE(max_scaled_error(y, y_ref), tol) << "forward";

    std::vector<T> dx(nx, nan);
    cpu::conv2d_thin_backward_data(sh, dy.data(), w.data(), dx.data(), ws, level);
    EXPECT_LE(max_scaled_error(dx, dx_ref), tol) << "dx";

    std::vector<T> dw = dw0, db = db0;
    cpu::conv2d_thin_backward_params(sh, x.data(), dy.data(), dw.data(),
                                     tc.bias ? db.data() : nullptr, ws, level);
    EXPECT_LE(max_scaled_error(dw, dw_ref), tol) << "dw";
    EXPECT_LE(max_scaled_error(db, db_ref), tol) << "db";
  }
}

// A spread of shapes: every K = 1..4, C in {1, 3, 5, 256}, odd sizes 1, 3, 7
// and 33 (mixed between H and W), stride 1 and 2, padding 0..2, 1x1, 3x3
// and 5x5 kernels, batches 1, 2, 3 and 5, with and without bias. Drawn from a
// fixed seed, each value of each axis appearing many times; shapes whose
// kernel does not fit the padded input are skipped, and big ones are kept
// few so the double oracle stays quick.
std::vector<ThinCase> thin_cases() {
  const int ks[] = {1, 2, 3, 4}, cs[] = {1, 3, 5, 256}, sizes[] = {1, 3, 7, 33};
  const int kernels[] = {1, 3, 5}, strides[] = {1, 2}, pads[] = {0, 1, 2}, batches[] = {1, 2, 3, 5};
  std::vector<ThinCase> out;
  Rng rng(2024);
  auto pick = [&](const auto& a) { return a[rng.below(std::size(a))]; };
  int big = 0;
  while (out.size() < 160) {
    ThinCase tc{pick(batches), pick(cs), pick(sizes), pick(sizes), pick(ks), pick(kernels),
                pick(strides), pick(pads), rng.below(4) != 0};
    const Conv2dShape sh = tc.shape();
    if (sh.P <= 0 || sh.Q <= 0) continue;
    const double work = double(sh.N) * sh.in_sample() * sh.K * sh.R * sh.S;
    if (work > 2e6 && ++big > 12) continue;
    out.push_back(tc);
  }
  // The shapes this path exists for: the autoencoders' last layers.
  out.push_back({2, 256, 32, 32, 3, 3, 1, 1, true});
  out.push_back({3, 32, 28, 28, 1, 3, 1, 1, true});
  // K above 4: several register tiles of up to 4 channels, as even as
  // possible, with ghost channels in the last where K does not divide.
  out.push_back({3, 5, 13, 11, 5, 3, 1, 1, true});
  out.push_back({3, 32, 14, 14, 16, 3, 1, 1, true});
  out.push_back({2, 16, 7, 7, 17, 3, 1, 1, true});
  out.push_back({2, 7, 9, 17, 6, 3, 2, 1, true});
  out.push_back({1, 3, 7, 33, 7, 5, 1, 2, false});
  out.push_back({3, 256, 16, 16, 9, 3, 1, 1, true});
  // Tiles of several vectors and rows with ragged ends, in both phases.
  out.push_back({3, 5, 33, 33, 4, 3, 2, 1, true});
  out.push_back({1, 3, 33, 7, 2, 5, 1, 2, false});
  out.push_back({5, 1, 7, 33, 1, 1, 2, 0, true});
  return out;
}

class Conv2dThinSweep : public ::testing::TestWithParam<ThinCase> {};

TEST_P(Conv2dThinSweep, FloatMatchesDirectAtEverySimdLevel) {
  expect_thin_matches_direct<float>(GetParam(), 1e-5);
}

TEST_P(Conv2dThinSweep, DoubleMatchesDirectAtEverySimdLevel) {
  expect_thin_matches_direct<double>(GetParam(), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(ThinShapes, Conv2dThinSweep, ::testing::ValuesIn(thin_cases()),
                         [](const ::testing::TestParamInfo<ThinCase>& p) {
                           return str(p.index, "_", p.param.name());
                         });

// ---- bf16 on AVX512_BF16 (conv2d_thin_bf16.cpp) -----------------------------------

// The bf16 passes against a double reference on bf16-rounded operands: each
// element within (n + 4)·u·Σ|terms| of it (u = 2^-24, n terms): FP32 sums of
// exact products and nothing else. At SimdLevel::kAvx512 on a CPU with
// AVX512_BF16 they run on vdpbf16ps (conv2d_thin_bf16_dot), at every other
// supported level on FP32 FMAs over rounded copies; both meet the bound. y
// and dx start as NaN (overwritten), dw and db at random values (added to).
struct Bf16Ref {
  std::vector<double> v, mag;
  std::vector<int> n;
  explicit Bf16Ref(size_t size) : v(size, 0.0), mag(size, 0.0), n(size, 0) {}
  void add(size_t i, double term) { v[i] += term, mag[i] += std::fabs(term), ++n[i]; }
};

int bf16_violations(const std::vector<float>& got, const Bf16Ref& r, const char* what) {
  constexpr double kU = 1.0 / 16777216;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = (r.n[i] + 4) * kU * r.mag[i] + 1e-30;
    if (!(std::fabs(got[i] - r.v[i]) <= tol) && ++bad <= 3)
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", reference " << r.v[i] << " ("
                    << r.n[i] << " terms), tolerance " << tol;
  }
  return bad;
}

void expect_bf16_thin_within_bound(const ThinCase& tc) {
  SCOPED_TRACE(tc.name());
  const Conv2dShape sh = tc.shape();
  ASSERT_GT(sh.P, 0);
  ASSERT_GT(sh.Q, 0);
  Rng rng(uint64_t(sh.N * 7919 + sh.C * 131 + sh.H * 17 + sh.W * 5 + sh.K * 3 + sh.R + sh.pad));
  const size_t nx = sh.N * sh.in_sample(), ny = sh.N * sh.out_sample();
  auto x = random_values<float>(nx, rng);
  auto w = random_values<float>(sh.weight_count(), rng);
  auto b = random_values<float>(size_t(sh.K), rng);
  auto dy = random_values<float>(ny, rng);
  const auto dw0 = random_values<float>(w.size(), rng);
  const auto db0 = random_values<float>(b.size(), rng);
  const float* bias = tc.bias ? b.data() : nullptr;

  Bf16Ref y_ref(ny), dx_ref(nx), dw_ref(w.size()), db_ref(b.size());
  for (size_t i = 0; i < w.size(); ++i) dw_ref.add(i, dw0[i]);
  for (size_t i = 0; i < b.size(); ++i) db_ref.add(i, db0[i]);
  for (int n = 0; n < sh.N; ++n)
    for (int k = 0; k < sh.K; ++k)
      for (int p = 0; p < sh.P; ++p)
        for (int q = 0; q < sh.Q; ++q) {
          const size_t yi = ((size_t(n) * sh.K + k) * sh.P + p) * sh.Q + q;
          if (bias) y_ref.add(yi, b[k]);
          if (tc.bias) db_ref.add(size_t(k), dy[yi]);
          const double d = round_bf16(dy[yi]);
          for (int c = 0; c < sh.C; ++c)
            for (int r = 0; r < sh.R; ++r)
              for (int s = 0; s < sh.S; ++s) {
                const int h = p * sh.stride - sh.pad + r, v = q * sh.stride - sh.pad + s;
                if (h < 0 || h >= sh.H || v < 0 || v >= sh.W) continue;
                const size_t xi = ((size_t(n) * sh.C + c) * sh.H + h) * sh.W + v;
                const size_t wi = ((size_t(k) * sh.C + c) * sh.R + r) * sh.S + s;
                const double xv = round_bf16(x[xi]), wv = round_bf16(w[wi]);
                y_ref.add(yi, xv * wv);
                dx_ref.add(xi, wv * d);
                dw_ref.add(wi, xv * d);
              }
        }

  for (SimdLevel level : supported_levels()) {
    SCOPED_TRACE(str(cpu::simd_level_name(level),
                     cpu::conv2d_thin_bf16_dot(sh, level) ? " (vdpbf16ps)" : " (FP32 FMAs)"));
    cpu::Conv2dThinWorkspace<float> ws;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> y(ny, nan), dx(nx, nan), dw = dw0, db = db0;
    cpu::conv2d_thin_forward(sh, x.data(), w.data(), bias, y.data(), ws, level, Precision::kBf16);
    cpu::conv2d_thin_backward_data(sh, dy.data(), w.data(), dx.data(), ws, level,
                                   Precision::kBf16);
    cpu::conv2d_thin_backward_params(sh, x.data(), dy.data(), dw.data(),
                                     tc.bias ? db.data() : nullptr, ws, level, Precision::kBf16);
    EXPECT_EQ(bf16_violations(y, y_ref, "y"), 0);
    EXPECT_EQ(bf16_violations(dx, dx_ref, "dx"), 0);
    EXPECT_EQ(bf16_violations(dw, dw_ref, "dw"), 0);
    if (tc.bias) EXPECT_EQ(bf16_violations(db, db_ref, "db"), 0);
    else EXPECT_EQ(db, db0);
  }
}

// Stride 1 (the vdpbf16ps kernels' shapes): odd channel counts (a pair
// half empty), K = 1..4 (one tile), 5, 7 and 16 (several, ghost channels),
// rows of 1 to 70 pixels (a ragged vector, one or two vectors a tile, 32-pixel
// weight-gradient vectors with a ragged end), one-row images, padding 0..2
// wider than the image, 3x3 and 5x5 kernels, batches 1 to 5, the CIFAR
// autoencoder's last layer (256 → 3 at 32x32: several channel chunks).
std::vector<ThinCase> bf16_cases() {
  return {{2, 256, 32, 32, 3, 3, 1, 1, true}, {1, 17, 10, 12, 3, 3, 1, 1, true},
          {3, 5, 9, 45, 4, 5, 1, 2, true},    {1, 1, 1, 1, 1, 3, 1, 1, true},
          {2, 3, 7, 33, 16, 3, 1, 1, true},   {1, 4, 6, 70, 2, 3, 1, 0, false},
          {5, 2, 3, 17, 5, 3, 1, 1, true},    {1, 7, 1, 31, 7, 3, 1, 1, true},
          {2, 33, 13, 64, 1, 5, 1, 2, false}, {1, 3, 2, 3, 2, 5, 1, 2, true},
          {3, 64, 16, 16, 3, 3, 1, 1, true},  {1, 9, 5, 100, 3, 3, 1, 1, true}};
}

class Conv2dThinBf16 : public ::testing::TestWithParam<ThinCase> {};

TEST_P(Conv2dThinBf16, WithinTheRoundedOperandBound) { expect_bf16_thin_within_bound(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Bf16Shapes, Conv2dThinBf16, ::testing::ValuesIn(bf16_cases()),
                         [](const ::testing::TestParamInfo<ThinCase>& p) {
                           return str(p.index, "_", p.param.name());
                         });

// Where the vdpbf16ps kernels run: stride 1 at kAvx512 on a CPU with
// AVX512_BF16, never at another level or stride; and there the bf16 passes
// give the bits of the kernels called directly (the dispatch takes them).
// Their repeats are RepeatedCallsAreBitIdentical's, their accumulation
// ParamGradsAccumulateAndDxIsOverwritten's.
TEST(Conv2dThinBf16Dot, RunsWhereItApplies) {
  const Conv2dShape sh = make_conv2d_shape(3, 37, 11, 19, 3, 3, 3, 1, 1);
  EXPECT_FALSE(cpu::conv2d_thin_bf16_dot(sh, SimdLevel::kAvx2));
  EXPECT_FALSE(cpu::conv2d_thin_bf16_dot(sh, SimdLevel::kPortable));
  EXPECT_FALSE(cpu::conv2d_thin_bf16_dot(make_conv2d_shape(2, 5, 9, 9, 3, 3, 3, 2, 1),
                                         SimdLevel::kAvx512));
  if (!cpu::conv2d_thin_bf16_dot(sh, SimdLevel::kAvx512))
    GTEST_SKIP() << "this CPU lacks AVX512_BF16 (or HPMC_BF16_GEMM=fallback): the bf16 thin "
                    "passes run on FP32 FMAs (checked by Conv2dThinBf16.*)";
  Rng rng(5);
  auto x = random_values<float>(sh.N * sh.in_sample(), rng);
  auto w = random_values<float>(sh.weight_count(), rng);
  auto b = random_values<float>(size_t(sh.K), rng);
  auto dy = random_values<float>(sh.N * sh.out_sample(), rng);
  auto run = [&](bool direct) {
    cpu::Conv2dThinWorkspace<float> ws;
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size(), 0.f), db(b.size(), 0.f);
    if (direct) {
      cpu::thin_bf16::forward(sh, x.data(), w.data(), b.data(), y.data(), ws);
      cpu::thin_bf16::backward_data(sh, dy.data(), w.data(), dx.data(), ws);
      cpu::thin_bf16::backward_params(sh, x.data(), dy.data(), dw.data(), db.data(), ws);
    } else {
      const auto level = SimdLevel::kAvx512;
      const auto bf = Precision::kBf16;
      cpu::conv2d_thin_forward(sh, x.data(), w.data(), b.data(), y.data(), ws, level, bf);
      cpu::conv2d_thin_backward_data(sh, dy.data(), w.data(), dx.data(), ws, level, bf);
      cpu::conv2d_thin_backward_params(sh, x.data(), dy.data(), dw.data(), db.data(), ws, level,
                                       bf);
    }
    for (const auto* v : {&dx, &dw, &db}) y.insert(y.end(), v->begin(), v->end());
    return y;
  };
  const std::vector<float> dispatched = run(false), direct = run(true);
  ASSERT_EQ(dispatched.size(), direct.size());
  EXPECT_EQ(std::memcmp(dispatched.data(), direct.data(), direct.size() * sizeof(float)), 0);
}

// ---- the switch in conv2d_ops.h -----------------------------------------------------

// conv2d_forward / _backward_data / _backward_params run the thin path where
// conv2d_thin_applies and im2col + gemm otherwise: their results are
// bit-identical to the path they chose.
void expect_dispatch_runs(const Conv2dShape& sh, bool thin) {
  SCOPED_TRACE(str("K=", sh.K, thin ? " (thin)" : " (gemm)"));
  Rng rng(17);
  auto x = random_values<float>(sh.N * sh.in_sample(), rng);
  auto w = random_values<float>(sh.weight_count(), rng);
  auto b = random_values<float>(size_t(sh.K), rng);
  auto dy = random_values<float>(sh.N * sh.out_sample(), rng);
  struct Out {
    std::vector<float> y, dx, dw, db;
  };
  auto run = [&](int path) {
    Out o{std::vector<float>(dy.size()), std::vector<float>(x.size()),
          std::vector<float>(w.size(), 0.f), std::vector<float>(b.size(), 0.f)};
    cpu::Conv2dWorkspace<float> ws;
    if (path == 0) {
      cpu::conv2d_forward(sh, x.data(), w.data(), b.data(), o.y.data(), ws);
      cpu::conv2d_backward_data(sh, dy.data(), w.data(), o.dx.data(), ws);
      cpu::conv2d_backward_params(sh, x.data(), dy.data(), o.dw.data(), o.db.data(), ws);
    } else if (path == 1) {
      cpu::conv2d_thin_forward(sh, x.data(), w.data(), b.data(), o.y.data(), ws.thin);
      cpu::conv2d_thin_backward_data(sh, dy.data(), w.data(), o.dx.data(), ws.thin);
      cpu::conv2d_thin_backward_params(sh, x.data(), dy.data(), o.dw.data(), o.db.data(), ws.thin);
    } else {
      cpu::conv2d_gemm_forward(sh, x.data(), w.data(), b.data(), o.y.data(), ws);
      cpu::conv2d_gemm_backward_data(sh, dy.data(), w.data(), o.dx.data(), ws);
      cpu::conv2d_gemm_backward_params(sh, x.data(), dy.data(), o.dw.data(), o.db.data(), ws);
    }
    return o;
  };
  const Out chosen = run(0), expected = run(thin ? 1 : 2);
  EXPECT_EQ(chosen.y, expected.y);
  EXPECT_EQ(chosen.dx, expected.dx);
  EXPECT_EQ(chosen.dw, expected.dw);
  EXPECT_EQ(chosen.db, expected.db);
}

TEST(Conv2dThin, SwitchAtKThinMaxKForNarrowOutputs) {
  // 5 wide (< kThinMinQ): thin up to kThinMaxK output channels.
  for (int k : {1, 2, 3, 4, 5, cpu::kThinMaxK - 1, cpu::kThinMaxK, cpu::kThinMaxK + 1, 32}) {
    const Conv2dShape sh = make_conv2d_shape(3, 7, 9, 5, k, 3, 3, 1, 1);
    ASSERT_LT(sh.Q, cpu::kThinMinQ);
    EXPECT_EQ(cpu::conv2d_thin_applies(sh), k <= cpu::kThinMaxK) << "K=" << k;
    expect_dispatch_runs(sh, k <= cpu::kThinMaxK);
  }
}

TEST(Conv2dThin, SwitchAtKThinMinQForManyOutputChannels) {
  for (int w = cpu::kThinMinQ - 2; w <= cpu::kThinMinQ + 1; ++w) {
    const Conv2dShape sh = make_conv2d_shape(3, 5, 6, w, 2 * cpu::kThinMaxK, 3, 3, 1, 1);
    EXPECT_EQ(cpu::conv2d_thin_applies(sh), sh.Q >= cpu::kThinMinQ) << "Q=" << sh.Q;
    expect_dispatch_runs(sh, sh.Q >= cpu::kThinMinQ);
  }
}

TEST(Conv2dThin, OneByOneKernelsKeepTheGemmPath) {
  for (int stride : {1, 2}) {
    const Conv2dShape sh = make_conv2d_shape(3, 7, 9, 11, 3, 1, 1, stride, 0);
    EXPECT_FALSE(cpu::conv2d_thin_applies(sh)) << "stride " << stride;
    expect_dispatch_runs(sh, false);
  }
}

// ---- convention and determinism -----------------------------------------------------

// Stride 2 (the FP32 kernels in both precisions) and stride 1 (in bf16 the
// vdpbf16ps kernels where the CPU has them).
TEST(Conv2dThin, ParamGradsAccumulateAndDxIsOverwritten) {
  for (int stride : {2, 1})
    for (Precision prec : {Precision::kFp32, Precision::kBf16}) {
      SCOPED_TRACE(str("stride ", stride, " ", precision_name(prec)));
      const Conv2dShape sh = make_conv2d_shape(5, 6, 9, 7, 3, 3, 3, stride, 1);
      const SimdLevel level = cpu::best_simd_level();
      Rng rng(3);
      auto x = random_values<float>(sh.N * sh.in_sample(), rng);
      auto w = random_values<float>(sh.weight_count(), rng);
      auto dy = random_values<float>(sh.N * sh.out_sample(), rng);
      cpu::Conv2dThinWorkspace<float> ws;
      std::vector<float> dw(w.size(), 0.f), db(size_t(sh.K), 0.f);
      cpu::conv2d_thin_backward_params(sh, x.data(), dy.data(), dw.data(), db.data(), ws, level,
                                       prec);
      const std::vector<float> dw1 = dw, db1 = db;
      cpu::conv2d_thin_backward_params(sh, x.data(), dy.data(), dw.data(), db.data(), ws, level,
                                       prec);
      for (size_t i = 0; i < dw.size(); ++i) ASSERT_EQ(dw[i], 2 * dw1[i]) << "dw[" << i << "]";
      for (size_t i = 0; i < db.size(); ++i) ASSERT_EQ(db[i], 2 * db1[i]) << "db[" << i << "]";

      std::vector<float> dx(x.size(), std::numeric_limits<float>::quiet_NaN());
      cpu::conv2d_thin_backward_data(sh, dy.data(), w.data(), dx.data(), ws, level, prec);
      const std::vector<float> dx1 = dx;
      for (float v : dx1) ASSERT_TRUE(std::isfinite(v));
      std::fill(dx.begin(), dx.end(), 123.f);
      cpu::conv2d_thin_backward_data(sh, dy.data(), w.data(), dx.data(), ws, level, prec);
      EXPECT_EQ(dx, dx1);
    }
}

TEST(Conv2dThin, RepeatedCallsAreBitIdentical) {
  // Batch 9 and 256 channels: the images spread over every thread and the
  // input is copied in several channel chunks. fp32 and bf16 (at avx512 the
  // vdpbf16ps kernels where the CPU has them).
  const Conv2dShape sh = make_conv2d_shape(9, 256, 17, 19, 3, 3, 3, 1, 1);
  Rng rng(4);
  auto x = random_values<float>(sh.N * sh.in_sample(), rng);
  auto w = random_values<float>(sh.weight_count(), rng);
  auto b = random_values<float>(size_t(sh.K), rng);
  auto dy = random_values<float>(sh.N * sh.out_sample(), rng);
  for (Precision prec : {Precision::kFp32, Precision::kBf16}) {
    for (SimdLevel level : supported_levels()) {
      SCOPED_TRACE(str(cpu::simd_level_name(level), " ", precision_name(prec)));
      auto run = [&](cpu::Conv2dThinWorkspace<float>& ws) {
        std::vector<float> y(dy.size()), dx(x.size()), dw(w.size(), 0.f), db(b.size(), 0.f);
        cpu::conv2d_thin_forward(sh, x.data(), w.data(), b.data(), y.data(), ws, level, prec);
        cpu::conv2d_thin_backward_data(sh, dy.data(), w.data(), dx.data(), ws, level, prec);
        cpu::conv2d_thin_backward_params(sh, x.data(), dy.data(), dw.data(), db.data(), ws, level,
                                         prec);
        y.insert(y.end(), dx.begin(), dx.end());
        y.insert(y.end(), dw.begin(), dw.end());
        y.insert(y.end(), db.begin(), db.end());
        return y;
      };
      cpu::Conv2dThinWorkspace<float> ws, fresh;
      const std::vector<float> first = run(ws), again = run(ws), other = run(fresh);
      ASSERT_EQ(first.size(), again.size());
      EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)), 0);
      EXPECT_EQ(std::memcmp(first.data(), other.data(), first.size() * sizeof(float)), 0);
    }
  }
}

TEST(Conv2dThin, SimdLevels) {
  EXPECT_TRUE(cpu::simd_level_supported(SimdLevel::kPortable));
  EXPECT_TRUE(cpu::simd_level_supported(cpu::best_simd_level()));
  EXPECT_STREQ(cpu::simd_level_name(SimdLevel::kAvx512), "avx512");
}

}  // namespace
}  // namespace hpmc
