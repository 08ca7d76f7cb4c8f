// SGEMM (core/sgemm.h): both paths, hpmc's AVX-512 kernel and OpenBLAS,
// against a double-precision reference over a sweep of shapes (1, odd,
// primes, not multiples of the tile or block sizes, k = 0, m or n = 0), all
// four transpose combinations, alpha/beta (beta = 0 over a NaN-poisoned C),
// leading dimensions wider than the rows with guard values that must stay
// untouched; then the determinism the linear layer relies on: a product cut
// by rows or columns over several calls gives the same bits as one call.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "core/rng.h"
#include "core/sgemm.h"
#include "gemm_testing.h"
#include "testing.h"

namespace hpmc {
namespace {

using SgemmFn = void (*)(bool, bool, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);

struct Case {
  bool ta, tb;
  int m, n, k;
  float alpha, beta;
  int pad;  // extra columns in every leading dimension

  std::string name() const {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s%s m=%d n=%d k=%d alpha=%g beta=%g pad=%d", ta ? "T" : "N",
                  tb ? "T" : "N", m, n, k, alpha, beta, pad);
    return buf;
  }
};

constexpr float kGuard = -12345.f;  // in C's padding columns: must survive

// Runs one case through `fn` and checks every element of C against a double
// reference within the worst-case float bound for a k-term sum,
// (k + 2)·eps·(|alpha|·Σ|a||b| + |beta·c0|), and that C's padding is untouched.
void check_case(SgemmFn fn, const Case& cs, uint64_t seed) {
  SCOPED_TRACE(cs.name());
  Rng rng(seed);
  // Stored shapes: A is m×k (k×m if transposed), B is k×n (n×k if transposed).
  const int a_rows = cs.ta ? cs.k : cs.m, a_cols = cs.ta ? cs.m : cs.k;
  const int b_rows = cs.tb ? cs.n : cs.k, b_cols = cs.tb ? cs.k : cs.n;
  const int lda = a_cols + cs.pad, ldb = b_cols + cs.pad, ldc = cs.n + cs.pad;
  // Leading dimensions of at least 1, as BLAS requires even for empty matrices.
  std::vector<float> a(size_t(a_rows) * std::max(lda, 1) + 1),
      b(size_t(b_rows) * std::max(ldb, 1) + 1), c(size_t(cs.m) * std::max(ldc, 1) + 1);
  for (auto& v : a) v = rng.uniform(-1.f, 1.f);
  for (auto& v : b) v = rng.uniform(-1.f, 1.f);
  const bool poison = cs.beta == 0.f;
  for (int i = 0; i < cs.m; ++i)
    for (int j = 0; j < ldc; ++j)
      c[size_t(i) * ldc + j] = j >= cs.n ? kGuard
                               : poison  ? std::numeric_limits<float>::quiet_NaN()
                                         : rng.uniform(-1.f, 1.f);
  const std::vector<float> c0 = c;

  fn(cs.ta, cs.tb, cs.m, cs.n, cs.k, cs.alpha, a.data(), std::max(lda, 1), b.data(),
     std::max(ldb, 1), cs.beta, c.data(), std::max(ldc, 1));

  const double eps = std::numeric_limits<float>::epsilon();
  int bad = 0;
  for (int i = 0; i < cs.m && bad < 5; ++i)
    for (int j = 0; j < ldc && bad < 5; ++j) {
      const size_t at = size_t(i) * ldc + j;
      if (j >= cs.n) {
        if (c[at] != kGuard) {
          ADD_FAILURE() << "C padding (" << i << ", " << j << ") overwritten: " << c[at];
          ++bad;
        }
        continue;
      }
      double sum = 0, mag = 0;
      if (cs.alpha != 0.f)
        for (int p = 0; p < cs.k; ++p) {
          double x = cs.ta ? a[size_t(p) * lda + i] : a[size_t(i) * lda + p];
          double y = cs.tb ? b[size_t(j) * ldb + p] : b[size_t(p) * ldb + j];
          sum += x * y;
          mag += std::fabs(x * y);
        }
      double ref = double(cs.alpha) * sum, scale = std::fabs(double(cs.alpha)) * mag;
      if (cs.beta != 0.f) {
        ref += double(cs.beta) * c0[at];
        scale += std::fabs(double(cs.beta) * c0[at]);
      }
      const double tol = (cs.k + 2) * eps * scale + 1e-30;
      if (!(std::fabs(c[at] - ref) <= tol)) {
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << c[at] << ", reference " << ref
                      << ", |error| " << std::fabs(c[at] - ref) << " > " << tol;
        ++bad;
      }
    }
}

// Shapes around the tile (8 × 16/32/48) and block (K 512, M 192, N 384)
// sizes, degenerate ones, and the products the layers make.
std::vector<Case> sweep() {
  const int shapes[][3] = {{1, 1, 1},       {1, 1, 0},      {0, 5, 3},    {5, 0, 3},
                           {2, 3, 5},       {7, 13, 29},    {8, 16, 8},   {9, 17, 9},
                           {8, 48, 512},    {9, 49, 513},   {17, 31, 1},  {13, 10, 160},
                           {5, 784, 64},    {64, 160, 784}, {31, 97, 37}, {193, 47, 19},
                           {11, 385, 1031}, {23, 33, 2},    {3, 1, 100},  {1, 100, 3}};
  std::vector<Case> cases;
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      cases.push_back({ta, tb, s[0], s[1], s[2], 1.f, 0.f, 0});
      cases.push_back({ta, tb, s[0], s[1], s[2], 1.f, 1.f, 3});
      cases.push_back({ta, tb, s[0], s[1], s[2], -1.5f, 0.f, 1});
      cases.push_back({ta, tb, s[0], s[1], s[2], 0.5f, -2.f, 17});
    }
  // alpha = 0 only scales C.
  cases.push_back({false, false, 9, 21, 5, 0.f, 0.f, 2});
  cases.push_back({true, true, 9, 21, 5, 0.f, 0.75f, 2});
  return cases;
}

void run_sweep(SgemmFn fn) {
  uint64_t seed = 1;
  for (const Case& cs : sweep()) check_case(fn, cs, seed++);
  // Large-ish: several blocks in every dimension and ragged edges.
  for (int t = 0; t < 4; ++t)
    check_case(fn, {bool(t & 1), bool(t & 2), 300, 517, 1031, 1.f, 1.f, 5}, seed++);
}

#define SKIP_WITHOUT_AVX512()                                                          \
  do {                                                                                 \
    if (!sgemm_avx512_supported())                                                     \
      GTEST_SKIP() << "this CPU lacks AVX-512 (F, VL, BW, DQ): hpmc's kernel not run"; \
  } while (0)

TEST(Sgemm, Avx512MatchesDoubleReference) {
  SKIP_WITHOUT_AVX512();
  run_sweep(sgemm_avx512);
}

TEST(Sgemm, OpenBlasMatchesDoubleReference) { run_sweep(sgemm_openblas); }

TEST(Sgemm, DispatchedPathMatchesDoubleReference) {
  std::printf("  sgemm path: %s\n", sgemm_path_name(sgemm_path()));
  run_sweep(sgemm);
}

// C = op(A)·op(B) computed whole, in pieces of rows and of columns, as
// linear_ops.h splits it over threads, and again after another shape (no
// state leaks between calls through the per-thread pack buffers): the avx512
// path must give the same bits, since each element's sum order depends on k
// only.
TEST(Sgemm, Avx512SplitsAndRepeatsAreBitIdentical) {
  SKIP_WITHOUT_AVX512();
  testing::expect_pieces_and_repeats_bit_identical(sgemm_avx512, 64, 200, 1100, 7);
}

// The products the MNIST MLP makes (784-320-160-10; forward x·W^T, input
// gradient dy·W, weight gradient dy^T·x accumulated onto dW; whole and split
// over threads as linear_ops.h splits them), at the batches users run and
// at odd ones, measured against a double reference: the error of each
// element relative to Σ|a·b| (+ |beta·c|). A correctly rounded float sum of
// random terms keeps that near eps/5 in RMS and a few eps at worst, whatever
// K; the sweep above allows (K + 2)·eps per element, a bound loose enough to
// hide a GEMM 100× less accurate than float32, which these bounds catch.
struct ErrorStats {
  double rms = 0, max = 0;
};

ErrorStats measure_error(SgemmFn fn, bool ta, bool tb, int m, int n, int k, int lda, int ldb,
                         int ldc, float beta, Rng& rng) {
  const int a_rows = ta ? k : m, b_rows = tb ? n : k;
  std::vector<float> a(size_t(a_rows) * lda), b(size_t(b_rows) * ldb), c0(size_t(m) * ldc);
  // MNIST-like activations (non-negative, a third of them zero) against
  // signed weights and gradients.
  for (auto& v : a) v = rng.uniform(-1.f, 1.f);
  for (auto& v : b) v = std::max(0.f, rng.uniform(-0.5f, 1.f));
  for (auto& v : c0) v = rng.uniform(-1.f, 1.f);
  std::vector<float> c = c0;
  fn(ta, tb, m, n, k, 1.f, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  double sq = 0;
  ErrorStats st;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double ref = beta * double(c0[size_t(i) * ldc + j]), mag = std::fabs(ref);
      for (int p = 0; p < k; ++p) {
        const double x = ta ? a[size_t(p) * lda + i] : a[size_t(i) * lda + p];
        const double y = tb ? b[size_t(j) * ldb + p] : b[size_t(p) * ldb + j];
        ref += x * y;
        mag += std::fabs(x * y);
      }
      const double e = mag > 0 ? std::fabs(c[size_t(i) * ldc + j] - ref) / mag : 0;
      sq += e * e;
      st.max = std::max(st.max, e);
    }
  st.rms = std::sqrt(sq / (double(m) * n));
  return st;
}

void check_mlp_products(SgemmFn fn) {
  const double eps = std::numeric_limits<float>::epsilon();
  Rng rng(11);
  const int widths[] = {784, 320, 160, 10};
  for (int batch : {1, 7, 64, 97, 100, 256, 600})
    for (int l = 0; l < 3; ++l) {
      const int in = widths[l], out = widths[l + 1];
      for (int parts : {1, 2}) {  // the whole product, and the first of two thread pieces
        const int o = parts == 1 ? out : std::max(1, (out + 1) / 2);
        const int i = parts == 1 ? in : std::max(1, (in + 1) / 2);
        struct P {
          const char* what;
          bool ta, tb;
          int m, n, k, lda, ldb, ldc;
          float beta;
        } products[] = {
            {"forward x*W^T + b", false, true, batch, o, in, in, in, out, 1.f},
            {"input gradient dy*W", false, false, batch, i, out, out, in, in, 0.f},
            {"weight gradient dW += dy^T*x", true, false, o, in, batch, out, in, in, 1.f},
        };
        for (const P& p : products) {
          SCOPED_TRACE(std::string(p.what) + ": batch " + std::to_string(batch) + ", layer " +
                       std::to_string(in) + "->" + std::to_string(out) + ", m " +
                       std::to_string(p.m) + " n " + std::to_string(p.n) + " k " +
                       std::to_string(p.k));
          const ErrorStats st =
              measure_error(fn, p.ta, p.tb, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.beta, rng);
          EXPECT_LE(st.rms, 0.5 * eps) << "RMS relative error " << st.rms;
          EXPECT_LE(st.max, 4 * eps) << "largest relative error " << st.max;
        }
      }
    }
}

TEST(Sgemm, Avx512ErrorIsFloatRoundingOnMlpProducts) {
  SKIP_WITHOUT_AVX512();
  check_mlp_products(sgemm_avx512);
}

TEST(Sgemm, OpenBlasErrorIsFloatRoundingOnMlpProducts) { check_mlp_products(sgemm_openblas); }

// HPMC_GEMM picks the path for the whole process, as `hpmc info` reports;
// an unknown value is a usage error.
TEST(Sgemm, EnvironmentChoosesThePath) {
  auto info = [](const std::string& env) { return testing::run_hpmc("info", env); };
  testing::CliResult r = info("HPMC_GEMM=openblas");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("float GEMM   : openblas"), std::string::npos) << r.out;

  r = info("HPMC_GEMM=auto");
  EXPECT_EQ(r.code, 0) << r.err;
  const char* expected =
      sgemm_avx512_supported() ? "float GEMM   : hpmc avx512" : "float GEMM   : openblas";
  EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;

  r = info("HPMC_GEMM=fastest");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("HPMC_GEMM=fastest: expected openblas, avx512 or auto"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace hpmc
