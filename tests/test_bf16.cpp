// bf16 arithmetic (core/bf16.h, core/bf16gemm.h): the rounding rule against
// hand-worked bit patterns and against the AVX512_BF16 conversion where the
// CPU has it; then the bf16 GEMM, every path (hpmc's AMX and AVX512_BF16
// kernels, the AMX kernel with its tile instructions emulated, and the
// portable fallback), against double references over odd shapes (not
// multiples of the tile, pair or block sizes), every transpose, alpha/beta
// (beta = 0 over a NaN-poisoned C) and leading dimensions wider than the rows
// with guard values that must stay untouched. Two bounds per element:
//   * against the exact product of the UNROUNDED operands:
//     |C − ref| ≤ (2·u_bf16 + (K+4)·u_fp32)·(|alpha|·Σ|a·b|) + …, which any
//     bf16 product meets;
//   * the sharp one, against the exact product of the bf16-ROUNDED operands:
//     |C − ref̂| ≤ (K+4)·u_fp32·(|alpha|·Σ|â·b̂| + |beta·c|), FP32 summation
//     alone. A GEMM that does not round its operands misses it by a factor
//     of about 2^16 / K (BoundsCatchUnroundedOperands shows it does).
// Then the paths against each other, the determinism bf16gemm.h promises
// (splits, leading dimensions and repeats bit-identical, a packed A the
// same as A), the AMX pack's layout, special values and HPMC_BF16_GEMM.
//
// The AMX tests skip, with the reason, where the CPU or OS lacks AMX; the
// emulated ones run wherever AVX512_BF16 does. On a machine with AMX:
//   build/tests/hpmc_tests --gtest_filter='Bf16Gemm.Amx*'
// and under Intel SDE elsewhere (if it grants the tile data; the skip
// reason says when it does not):
//   sde64 -spr -- build/tests/hpmc_tests --gtest_filter='Bf16Gemm.Amx*'

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.h"
#include "core/bf16.h"
#include "core/bf16gemm.h"
#include "core/rng.h"
#include "core/sgemm.h"
#include "gemm_testing.h"
#include "testing.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace hpmc {
namespace {

constexpr double kUbf16 = 1.0 / 256;        // 2^-8
constexpr double kUfp32 = 1.0 / 16777216;   // 2^-24

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
uint32_t to_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// ---- rounding ----------------------------------------------------------------

TEST(Bf16Round, TiesToEvenAndNeighbours) {
  struct {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3f800000u, 0x3f80},  // 1 is exact
      {0x3f807fffu, 0x3f80},  // below half an ulp: down
      {0x3f808000u, 0x3f80},  // a tie, kept bit even: down
      {0x3f808001u, 0x3f81},  // above half: up
      {0x3f818000u, 0x3f82},  // a tie, kept bit odd: up to even
      {0xbf818000u, 0xbf82},  // the same, negative
      {0xbf808000u, 0xbf80},
      {0x3fff8000u, 0x4000},  // a carry out of the mantissa raises the exponent
      {0x7f7f7fffu, 0x7f7f},  // largest bf16
      {0x7f7f8000u, 0x7f80},  // a tie past it (odd): infinity
      {0x7f7fffffu, 0x7f80},  // largest float: infinity
      {0xff7fffffu, 0xff80},
      {0x00800000u, 0x0080},  // smallest normal stays
      {0x00000000u, 0x0000},
      {0x80000000u, 0x8000},
  };
  for (const auto& c : cases)
    EXPECT_EQ(bf16_bits(from_bits(c.in)), c.out) << std::hex << "input 0x" << c.in;
  EXPECT_EQ(round_bf16(1.0f + 1.0f / 256), 1.0f);          // the tie at 1 + 2^-8
  EXPECT_EQ(round_bf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);
  EXPECT_EQ(round_bf16(-3.140625f), -3.140625f);           // 7-bit mantissa: exact
}

TEST(Bf16Round, InfinityNanAndDenormals) {
  EXPECT_EQ(bf16_bits(INFINITY), 0x7f80);
  EXPECT_EQ(bf16_bits(-INFINITY), 0xff80);
  // NaN stays NaN, quiet, with its sign and the top of its payload; a
  // signalling NaN whose payload lies in the dropped bits is not turned
  // into infinity.
  EXPECT_EQ(bf16_bits(from_bits(0x7fc00001u)), 0x7fc0);
  EXPECT_EQ(bf16_bits(from_bits(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(bf16_bits(from_bits(0xff812345u)), 0xffc1);
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::signaling_NaN())));
  // Denormals become zeros of their sign, as AVX512_BF16 treats them.
  EXPECT_EQ(bf16_bits(from_bits(0x00400000u)), 0x0000);
  EXPECT_EQ(bf16_bits(from_bits(0x807fffffu)), 0x8000);
  EXPECT_EQ(bf16_bits(from_bits(0x00000001u)), 0x0000);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
}

// The array form gives the scalar's bits on every special and on a random
// sweep of all bit patterns.
TEST(Bf16Round, ArrayFormMatchesScalar) {
  std::vector<float> x = {0.f, -0.f, 1.f, INFINITY, -INFINITY, from_bits(0x7f800001u),
                          from_bits(0xffc12345u), from_bits(0x00400000u), from_bits(0x80000001u),
                          from_bits(0x7f7fffffu), from_bits(0x3f808000u), from_bits(0x3f818000u)};
  Rng rng(5);
  for (int i = 0; i < 200000; ++i) x.push_back(from_bits(uint32_t(rng.next_u64())));
  std::vector<float> y(x.size());
  round_bf16(x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(to_bits(y[i]), uint32_t(bf16_bits(x[i])) << 16)
        << std::hex << "input 0x" << to_bits(x[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void hardware_round(
    const float* x, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = __mmask16(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
    const __m256bh r = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
    _mm256_mask_storeu_epi16(out + i, m, (__m256i)r);
  }
}
#endif

// bf16.h's rule is the instruction's: the same bits for every special value
// and a million random bit patterns (all exponents, NaNs and denormals too).
TEST(Bf16Round, MatchesTheAvx512Bf16Conversion) {
  if (!bf16gemm_avx512_supported())
    GTEST_SKIP() << "this CPU lacks AVX512_BF16: the conversion instruction is not run";
#if defined(__x86_64__) && defined(__GNUC__)
  std::vector<float> x = {0.f, -0.f, INFINITY, -INFINITY, from_bits(0x7f800001u),
                          from_bits(0xff812345u), from_bits(0x00400000u), from_bits(0x807fffffu),
                          from_bits(0x7f7fffffu), from_bits(0x7f7f8000u), from_bits(0x3f808000u),
                          from_bits(0x3f818000u), from_bits(0x00800000u)};
  Rng rng(9);
  for (int i = 0; i < 1000000; ++i) x.push_back(from_bits(uint32_t(rng.next_u64())));
  std::vector<uint16_t> hw(x.size());
  hardware_round(x.data(), hw.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(bf16_bits(x[i]), hw[i]) << std::hex << "input 0x" << to_bits(x[i]);
#endif
}

// ---- the GEMM ----------------------------------------------------------------

using GemmFn = void (*)(bool, bool, int, int, int, float, const float*, int, const float*, int,
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

// A case's operands and C, drawn from U(-1, 1) (C NaN where beta is 0, guard
// values in its padding).
struct Operands {
  int lda, ldb, ldc;
  std::vector<float> a, b, c0;

  Operands(const Case& cs, uint64_t seed) {
    Rng rng(seed);
    const int a_rows = cs.ta ? cs.k : cs.m, a_cols = cs.ta ? cs.m : cs.k;
    const int b_rows = cs.tb ? cs.n : cs.k, b_cols = cs.tb ? cs.k : cs.n;
    lda = std::max(a_cols + cs.pad, 1);
    ldb = std::max(b_cols + cs.pad, 1);
    ldc = std::max(cs.n + cs.pad, 1);
    a.resize(size_t(a_rows) * lda + 1);
    b.resize(size_t(b_rows) * ldb + 1);
    c0.resize(size_t(cs.m) * ldc + 1);
    for (auto& v : a) v = rng.uniform(-1.f, 1.f);
    for (auto& v : b) v = rng.uniform(-1.f, 1.f);
    for (int i = 0; i < cs.m; ++i)
      for (int j = 0; j < ldc; ++j)
        c0[size_t(i) * ldc + j] = j >= cs.n         ? kGuard
                                  : cs.beta == 0.f ? std::numeric_limits<float>::quiet_NaN()
                                                   : rng.uniform(-1.f, 1.f);
  }
  double at_a(const Case& cs, int i, int p) const {
    return cs.ta ? a[size_t(p) * lda + i] : a[size_t(i) * lda + p];
  }
  double at_b(const Case& cs, int p, int j) const {
    return cs.tb ? b[size_t(j) * ldb + p] : b[size_t(p) * ldb + j];
  }
};

std::vector<float> run(GemmFn fn, const Case& cs, const Operands& o) {
  std::vector<float> c = o.c0;
  fn(cs.ta, cs.tb, cs.m, cs.n, cs.k, cs.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, cs.beta,
     c.data(), o.ldc);
  return c;
}

// Counts the elements of C outside the bound (reporting the first few), and
// any overwritten guard. `sharp`: the bound against the rounded operands.
int count_violations(const Case& cs, const Operands& o, const std::vector<float>& c, bool sharp,
                     bool report) {
  int bad = 0;
  for (int i = 0; i < cs.m; ++i)
    for (int j = 0; j < o.ldc; ++j) {
      const size_t at = size_t(i) * o.ldc + j;
      if (j >= cs.n) {
        if (c[at] != kGuard) {
          if (report)
            ADD_FAILURE() << "C padding (" << i << ", " << j << ") overwritten: " << c[at];
          ++bad;
        }
        continue;
      }
      double sum = 0, mag = 0;
      if (cs.alpha != 0.f)
        for (int p = 0; p < cs.k; ++p) {
          double x = o.at_a(cs, i, p), y = o.at_b(cs, p, j);
          if (sharp) x = round_bf16(float(x)), y = round_bf16(float(y));
          sum += x * y;
          mag += std::fabs(x * y);
        }
      double ref = double(cs.alpha) * sum, scale = std::fabs(double(cs.alpha)) * mag, beta_part = 0;
      if (cs.beta != 0.f) {
        ref += double(cs.beta) * o.c0[at];
        beta_part = std::fabs(double(cs.beta) * o.c0[at]);
      }
      const double sums = (cs.k + 4) * kUfp32 * (scale + beta_part);
      const double tol = (sharp ? sums : 2 * kUbf16 * scale + sums) + 1e-30;
      if (!(std::fabs(c[at] - ref) <= tol)) {
        if (report && bad < 5)
          ADD_FAILURE() << (sharp ? "sharp" : "loose") << " bound: C(" << i << ", " << j
                        << ") = " << c[at] << ", reference " << ref << ", |error| "
                        << std::fabs(c[at] - ref) << " > " << tol;
        ++bad;
      }
    }
  return bad;
}

void check_case(GemmFn fn, const Case& cs, uint64_t seed) {
  SCOPED_TRACE(cs.name());
  const Operands o(cs, seed);
  const std::vector<float> c = run(fn, cs, o);
  count_violations(cs, o, c, false, true);
  count_violations(cs, o, c, true, true);
}

// Sizes from 1, 3, 5, 17, 33, 257 (none a multiple of the 8 × 16/32/48
// tile, of a pair, or of the 192-row, 384-column and 512-pair blocks), K
// across a block boundary (2049: two K blocks of pairs), and the shapes the
// CIFAR autoencoder's layers make (conv1's K = 27, conv5's M = 3, conv2's
// 128 × 256 × 2304).
std::vector<Case> sweep() {
  const int shapes[][3] = {{1, 1, 1},    {1, 1, 0},     {0, 5, 3},    {5, 0, 3},
                           {3, 5, 17},   {17, 33, 5},   {33, 17, 257}, {257, 33, 17},
                           {5, 257, 33}, {1, 257, 3},   {257, 1, 5},  {3, 3, 2049},
                           {9, 49, 1025}, {33, 5, 1},   {17, 17, 2},  {8, 48, 1024}};
  std::vector<Case> cases;
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      cases.push_back({ta, tb, s[0], s[1], s[2], 1.f, 0.f, 0});
      cases.push_back({ta, tb, s[0], s[1], s[2], 1.f, 1.f, 3});
      cases.push_back({ta, tb, s[0], s[1], s[2], -1.5f, 0.f, 1});
      cases.push_back({ta, tb, s[0], s[1], s[2], 0.5f, -2.f, 17});
    }
  cases.push_back({false, false, 9, 21, 5, 0.f, 0.f, 2});  // alpha = 0 only scales C
  cases.push_back({true, true, 9, 21, 5, 0.f, 0.75f, 2});
  for (int t = 0; t < 4; ++t) {  // several blocks in every dimension, ragged edges
    cases.push_back({bool(t & 1), bool(t & 2), 200, 401, 1061, 1.f, 1.f, 5});
  }
  cases.push_back({false, false, 64, 1024, 27, 1.f, 1.f, 0});    // conv1 forward
  cases.push_back({false, false, 3, 1024, 2304, 1.f, 0.f, 0});   // conv5 forward
  cases.push_back({false, true, 3, 2304, 1024, 1.f, 1.f, 0});    // conv5 weight gradient
  cases.push_back({true, false, 2304, 64, 3, 1.f, 0.f, 0});      // conv5 input gradient
  return cases;
}

void run_sweep(GemmFn fn) {
  uint64_t seed = 1;
  for (const Case& cs : sweep()) check_case(fn, cs, seed++);
}

#define SKIP_WITHOUT_AVX512_BF16()                                                          \
  do {                                                                                      \
    if (!bf16gemm_avx512_supported())                                                       \
      GTEST_SKIP() << "this CPU lacks AVX512_BF16 (with F, VL, BW, DQ): hpmc's bf16 kernel " \
                      "not run";                                                            \
  } while (0)

#define SKIP_WITHOUT_AMX()                                                                 \
  do {                                                                                     \
    if (!bf16gemm_amx_supported())                                                         \
      GTEST_SKIP() << "no AMX here (" << bf16gemm_amx_missing() << "): hpmc's AMX kernel " \
                   << "not run";                                                           \
  } while (0)

// The emulated AMX kernel runs the real one's packs, which use AVX512_BF16.
#define SKIP_WITHOUT_AMX_PACKS()                                                        \
  do {                                                                                  \
    if (!bf16gemm_avx512_supported())                                                   \
      GTEST_SKIP() << "this CPU lacks AVX512_BF16 (with F, VL, BW, DQ), which the AMX " \
                      "kernel's packs use: not run";                                    \
  } while (0)

TEST(Bf16Gemm, Avx512Bf16MeetsBothBounds) {
  SKIP_WITHOUT_AVX512_BF16();
  run_sweep(bf16gemm_avx512);
}

TEST(Bf16Gemm, AmxMeetsBothBounds) {
  SKIP_WITHOUT_AMX();
  run_sweep(bf16gemm_amx);
}

TEST(Bf16Gemm, AmxEmulatedMeetsBothBounds) {
  SKIP_WITHOUT_AMX_PACKS();
  run_sweep(bf16gemm_amx_emulated);
}

TEST(Bf16Gemm, FallbackMeetsBothBounds) { run_sweep(bf16gemm_fallback); }

TEST(Bf16Gemm, DispatchedPathMeetsBothBounds) {
  std::printf("  bf16 GEMM path: %s\n", bf16gemm_path_name(bf16gemm_path()));
  run_sweep(bf16gemm);
}

// The sharp bound is sharp: the FP32 GEMM on the same (unrounded) operands
// breaks it on most elements, and so does a bf16 GEMM fed operands that were
// rounded the wrong way (truncated instead of rounded to nearest), while both
// meet the loose one. The sweep above would catch either mistake.
TEST(Bf16Gemm, BoundsCatchUnroundedOperands) {
  const Case cs{false, true, 33, 17, 257, 1.f, 0.f, 0};
  const Operands o(cs, 42);
  const std::vector<float> fp32 = run(sgemm, cs, o);
  EXPECT_EQ(count_violations(cs, o, fp32, false, false), 0);
  EXPECT_GT(count_violations(cs, o, fp32, true, false), cs.m * cs.n / 2);

  Operands truncated = o;
  for (auto* v : {&truncated.a, &truncated.b})
    for (float& x : *v) x = from_bits(to_bits(x) & 0xffff0000u);
  std::vector<float> c = run(sgemm, cs, truncated);
  EXPECT_GT(count_violations(cs, o, c, true, false), cs.m * cs.n / 10);
}

// The paths round the same operands, so they differ only in how FP32 sums:
// within twice the sharp bound of each other on every element. Returns how
// many elements differ in their bits.
int expect_paths_agree(GemmFn fx, const char* x_name, GemmFn fy, const char* y_name) {
  uint64_t seed = 100;
  int differ = 0;
  for (const Case& cs : sweep()) {
    SCOPED_TRACE(cs.name());
    const Operands o(cs, seed++);
    const std::vector<float> x = run(fx, cs, o), y = run(fy, cs, o);
    int bad = 0;
    for (int i = 0; i < cs.m; ++i)
      for (int j = 0; j < cs.n; ++j) {
        const size_t at = size_t(i) * o.ldc + j;
        if (to_bits(x[at]) != to_bits(y[at])) ++differ;
        if (bad >= 5) continue;
        double mag = 0;
        for (int p = 0; p < cs.k; ++p)
          mag += std::fabs(double(round_bf16(float(o.at_a(cs, i, p)))) *
                           round_bf16(float(o.at_b(cs, p, j))));
        const double c0 = cs.beta == 0.f ? 0 : std::fabs(double(cs.beta) * o.c0[at]);
        const double tol = 2 * (cs.k + 4) * kUfp32 * (std::fabs(cs.alpha) * mag + c0) + 1e-30;
        if (!(std::fabs(double(x[at]) - y[at]) <= tol)) {
          ADD_FAILURE() << "C(" << i << ", " << j << "): " << x_name << " " << x[at] << ", "
                        << y_name << " " << y[at] << ", apart " << std::fabs(double(x[at]) - y[at])
                        << " > " << tol;
          ++bad;
        }
      }
  }
  return differ;
}

TEST(Bf16Gemm, PathsAgreeWithinFp32Rounding) {
  SKIP_WITHOUT_AVX512_BF16();
  expect_paths_agree(bf16gemm_avx512, "avx512_bf16", bf16gemm_fallback, "fallback");
}

TEST(Bf16Gemm, AmxAgreesWithTheOtherPathsWithinFp32Rounding) {
  SKIP_WITHOUT_AMX();
  expect_paths_agree(bf16gemm_amx, "amx", bf16gemm_fallback, "fallback");
  expect_paths_agree(bf16gemm_amx, "amx", bf16gemm_avx512, "avx512_bf16");
}

TEST(Bf16Gemm, AmxEmulatedAgreesWithTheFallbackWithinFp32Rounding) {
  SKIP_WITHOUT_AMX_PACKS();
  expect_paths_agree(bf16gemm_amx_emulated, "amx emulated", bf16gemm_fallback, "fallback");
}

// The tile instruction against its emulation (Intel's intrinsics-guide
// pseudo-code, bf16gemm_amx.cpp): within the bound, and the number of
// elements whose bits differ printed, for the record, since Intel does not
// promise the pseudo-code's summation order.
TEST(Bf16Gemm, AmxAgainstItsEmulation) {
  SKIP_WITHOUT_AMX();
  const int differ = expect_paths_agree(bf16gemm_amx, "amx", bf16gemm_amx_emulated, "emulated");
  std::printf("  amx against its emulation: %d elements of the sweep differ in their bits\n",
              differ);
}

// A product cut by rows or columns over several calls, as linear_ops.h and
// conv2d_ops.h cut theirs over threads, gives the bits of one call: each
// element's sum order depends on K only (bf16gemm.h, determinism). And
// repeated calls give the same bits whatever ran in between.
TEST(Bf16Gemm, Avx512Bf16SplitsAndRepeatsAreBitIdentical) {
  SKIP_WITHOUT_AVX512_BF16();
  // K: three blocks of pairs and an odd end.
  testing::expect_pieces_and_repeats_bit_identical(bf16gemm_avx512, 64, 200, 2101, 7);
}

// K: five blocks of 16 tiles (of 32) and an odd end; M two 32-row blocks.
TEST(Bf16Gemm, AmxSplitsAndRepeatsAreBitIdentical) {
  SKIP_WITHOUT_AMX();
  testing::expect_pieces_and_repeats_bit_identical(bf16gemm_amx, 64, 200, 2101, 7);
}

TEST(Bf16Gemm, AmxEmulatedSplitsAndRepeatsAreBitIdentical) {
  SKIP_WITHOUT_AMX_PACKS();
  testing::expect_pieces_and_repeats_bit_identical(bf16gemm_amx_emulated, 64, 200, 2101, 7);
}

// The leading dimensions do not change the bits: operands and C copied
// into wider rows (with other values in the gaps) give C's bits again.
void expect_leading_dimensions_bit_identical(GemmFn fn) {
  uint64_t seed = 700;
  for (int t = 0; t < 4; ++t)
    for (const auto& [alpha, beta] : {std::pair{1.f, 0.f}, {-0.5f, 1.5f}}) {
      const Case tight{bool(t & 1), bool(t & 2), 45, 70, 1100, alpha, beta, 0};
      Case wide = tight;
      wide.pad = 13;
      SCOPED_TRACE(wide.name());
      const Operands o(tight, seed), ow(wide, seed + 1);
      ++seed;
      // ow's operands and C with o's values in o's places.
      Operands copy = ow;
      auto place = [](const std::vector<float>& from, int ld_from, std::vector<float>& to,
                      int ld_to, int rows, int cols) {
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < cols; ++c) to[size_t(r) * ld_to + c] = from[size_t(r) * ld_from + c];
      };
      place(o.a, o.lda, copy.a, copy.lda, tight.ta ? tight.k : tight.m,
            tight.ta ? tight.m : tight.k);
      place(o.b, o.ldb, copy.b, copy.ldb, tight.tb ? tight.n : tight.k,
            tight.tb ? tight.k : tight.n);
      place(o.c0, o.ldc, copy.c0, copy.ldc, tight.m, tight.n);
      const std::vector<float> want = run(fn, tight, o), got = run(fn, wide, copy);
      int differ = 0;
      for (int i = 0; i < tight.m; ++i)
        for (int j = 0; j < tight.n; ++j)
          differ += to_bits(want[size_t(i) * o.ldc + j]) != to_bits(got[size_t(i) * copy.ldc + j]);
      EXPECT_EQ(differ, 0) << "elements whose bits the leading dimensions changed";
    }
}

TEST(Bf16Gemm, Avx512Bf16LeadingDimensionsKeepTheBits) {
  SKIP_WITHOUT_AVX512_BF16();
  expect_leading_dimensions_bit_identical(bf16gemm_avx512);
}

TEST(Bf16Gemm, AmxLeadingDimensionsKeepTheBits) {
  SKIP_WITHOUT_AMX();
  expect_leading_dimensions_bit_identical(bf16gemm_amx);
}

TEST(Bf16Gemm, AmxEmulatedLeadingDimensionsKeepTheBits) {
  SKIP_WITHOUT_AMX_PACKS();
  expect_leading_dimensions_bit_identical(bf16gemm_amx_emulated);
}

// A prepacked A (bf16gemm_avx512_pack_a, bf16gemm_amx_pack_a) gives the
// bits of its path's unpacked call, C's padding included: shapes off every
// tile and block size (several M blocks of 192 rows, N past a 384-column
// block, K odd and over one 512-pair block), both transposes of each operand,
// alpha/beta variants (beta = 0 over a NaN C, alpha = 0 and k = 0 only
// scaling C), and one packed object reused: a larger pack after a smaller
// one grows it, a smaller one after a larger reuses its words, and one pack
// serves several B.
using PackFn = void (*)(bool, int, int, const float*, int, Bf16PackedA&);
using PackedFn = void (*)(const Bf16PackedA&, bool, int, float, const float*, int, float, float*,
                          int);

void check_prepacked(GemmFn unpacked, PackFn pack, PackedFn packed_product, Bf16GemmPath path,
                     bool large) {
  std::vector<std::array<int, 3>> shapes = {
      {1, 1, 1},    {3, 5, 17},   {17, 33, 5}, {33, 17, 257}, {257, 33, 17}, {9, 49, 1025},
      {3, 3, 2049}, {20, 800, 3}, {1, 1, 0},   {0, 5, 3},     {5, 0, 3}};
  if (large)  // several blocks of everything: too slow for the emulation
    shapes.insert(
        shapes.end(),
        {{200, 401, 1061}, {385, 20, 1031}, {130, 50, 2305}, {128, 256, 2304}, {2304, 256, 128}});
  const float ab[][2] = {{1.f, 0.f}, {1.f, 1.f}, {-1.5f, 0.f}, {0.5f, -2.f}, {0.f, 0.75f}};
  Bf16PackedA packed;  // one object through the whole sweep
  uint64_t seed = 300;
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (const auto& [alpha, beta] : ab) {
        const Case cs{bool(t & 1), bool(t & 2), s[0], s[1], s[2], alpha, beta, int(seed % 3)};
        SCOPED_TRACE(cs.name());
        const Operands o(cs, seed++);
        const std::vector<float> want = run(unpacked, cs, o);
        pack(cs.ta, cs.m, cs.k, o.a.data(), o.lda, packed);
        EXPECT_EQ(packed.path, path);
        EXPECT_EQ(packed.trans, cs.ta);
        EXPECT_EQ(packed.m, cs.m);
        EXPECT_EQ(packed.k, cs.k);
        std::vector<float> got = o.c0;
        packed_product(packed, cs.tb, cs.n, cs.alpha, o.b.data(), o.ldb, cs.beta, got.data(),
                       o.ldc);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << "the prepacked product differs from the unpacked one";
        // The same pack with a second B and C (o2's, with o's A): its words
        // are only read.
        const Operands o2(cs, seed + 1000);
        std::vector<float> want2 = o2.c0, got2 = o2.c0;
        unpacked(cs.ta, cs.tb, cs.m, cs.n, cs.k, cs.alpha, o.a.data(), o.lda, o2.b.data(), o2.ldb,
                 cs.beta, want2.data(), o2.ldc);
        packed_product(packed, cs.tb, cs.n, cs.alpha, o2.b.data(), o2.ldb, cs.beta, got2.data(),
                       o2.ldc);
        ASSERT_EQ(0, std::memcmp(want2.data(), got2.data(), got2.size() * sizeof(float)))
            << "a second product with the same pack differs";
      }
}

TEST(Bf16Gemm, Avx512Bf16PrepackedAIsBitIdentical) {
  SKIP_WITHOUT_AVX512_BF16();
  check_prepacked(bf16gemm_avx512, bf16gemm_avx512_pack_a, bf16gemm_avx512_packed_a,
                  Bf16GemmPath::kAvx512Bf16, true);
}

TEST(Bf16Gemm, AmxPrepackedAIsBitIdentical) {
  SKIP_WITHOUT_AMX();
  check_prepacked(bf16gemm_amx, bf16gemm_amx_pack_a, bf16gemm_amx_packed_a, Bf16GemmPath::kAmx,
                  true);
}

TEST(Bf16Gemm, AmxEmulatedPrepackedAIsBitIdentical) {
  SKIP_WITHOUT_AMX_PACKS();
  check_prepacked(bf16gemm_amx_emulated, bf16gemm_amx_pack_a, bf16gemm_amx_emulated_packed_a,
                  Bf16GemmPath::kAmx, false);
}

// The path-neutral entries (bf16gemm_pack_a, bf16gemm_packed_a), as the
// convolutions call them: the dispatched path's bits.
TEST(Bf16Gemm, DispatchedPrepackedAIsBitIdentical) {
  if (!bf16gemm_packs_a())
    GTEST_SKIP() << "the dispatched path (" << bf16gemm_path_name(bf16gemm_path())
                 << ") takes no packed A";
  check_prepacked(bf16gemm, bf16gemm_pack_a, bf16gemm_packed_a, bf16gemm_path(), false);
}

// A pack made for one path is refused by the other's product (the layouts
// differ), and a pack that was never made by both.
TEST(Bf16Gemm, PackedAIsRefusedByTheOtherPath) {
  SKIP_WITHOUT_AVX512_BF16();
  const float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {1, 1, 1};
  float c[2];
  Bf16PackedA for_avx512, for_amx, never;
  bf16gemm_avx512_pack_a(false, 2, 3, a, 3, for_avx512);
  bf16gemm_amx_pack_a(false, 2, 3, a, 3, for_amx);
  EXPECT_THROW(bf16gemm_amx_emulated_packed_a(for_avx512, false, 1, 1.f, b, 1, 0.f, c, 2),
               RuntimeError);
  EXPECT_THROW(bf16gemm_avx512_packed_a(for_amx, false, 1, 1.f, b, 1, 0.f, c, 2), RuntimeError);
  EXPECT_THROW(bf16gemm_packed_a(never, false, 1, 1.f, b, 1, 0.f, c, 2), RuntimeError);
  if (bf16gemm_amx_supported())
    EXPECT_THROW(bf16gemm_amx_packed_a(for_avx512, false, 1, 1.f, b, 1, 0.f, c, 2), RuntimeError);
}

// A B read through shifts and masks (bf16gemm.h, Bf16ShiftedB) gives the
// bits of the same product with that B made whole: random groups, shifts
// (negative ones included) and masks over one buffer whose every position
// outside the masks is NaN, so a read the masks forbid would show; shapes
// over several K blocks (K past 1024, so blocks start at columns that are
// not multiples of 16 or 64) and column blocks (N past 384), both
// transposes, alpha/beta variants, unpacked and packed A.
TEST(Bf16Gemm, Avx512Bf16ShiftedBIsBitIdentical) {
  SKIP_WITHOUT_AVX512_BF16();
  const std::vector<std::array<int, 3>> shapes = {
      {1, 1, 1},       {3, 5, 17},    {17, 33, 5},      {33, 17, 257},    {9, 49, 1025},
      {3, 3, 2049},    {20, 800, 3},  {200, 401, 1061}, {128, 256, 1153}, {40, 1153, 256},
      {256, 1024, 27}, {7, 385, 33}};
  const float ab[][2] = {{1.f, 0.f}, {1.f, 1.f}, {-1.5f, 0.f}, {0.5f, -2.f}};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Bf16PackedA packed;
  uint64_t seed = 900;
  for (const auto& sh : shapes)
    for (int t = 0; t < 4; ++t)
      for (const auto& [alpha, beta] : ab) {
        const Case cs{bool(t & 1), bool(t & 2), sh[0], sh[1], sh[2], alpha, beta, 0};
        SCOPED_TRACE(cs.name());
        Rng rng(seed++);
        const int b_rows = cs.tb ? cs.n : cs.k, b_cols = cs.tb ? cs.k : cs.n;
        // groups of 1..9 rows, each row a shift of up to ±40 into its group's
        // data, about 1 in 5 positions masked off, and off wherever the
        // shifted position falls outside the buffer's values
        const int group = 1 + int(rng.next_u64() % 9), groups = (b_rows + group - 1) / group;
        const ptrdiff_t stride = b_cols + int(rng.next_u64() % 7), margin = 64;
        std::vector<float> buf(size_t(margin + groups * stride + margin), nan);
        std::vector<ptrdiff_t> offset(static_cast<size_t>(group));
        for (auto& o : offset) o = ptrdiff_t(rng.next_u64() % 81) - 40;
        const int words = (b_cols + 63) / 64 + 2;
        std::vector<uint64_t> mask(size_t(group) * words, 0);
        for (int g = 0; g < group; ++g)
          for (int j = 0; j < b_cols; ++j)
            if (rng.next_u64() % 5 != 0) mask[size_t(g) * words + j / 64] |= uint64_t(1) << (j % 64);
        Bf16ShiftedB sb;
        sb.x = buf.data() + margin;
        sb.group = group;
        sb.group_stride = stride;
        sb.offset = offset.data();
        sb.mask = mask.data();
        sb.mask_words = words;
        // the whole B, and the values the masks let through (the rest stays NaN)
        std::vector<float> whole(size_t(b_rows) * b_cols, 0.f);
        for (int i = 0; i < b_rows; ++i) {
          const int g = i / group, tap = i % group;
          for (int j = 0; j < b_cols; ++j) {
            const ptrdiff_t at = g * stride + offset[size_t(tap)] + j;
            uint64_t& word = mask[size_t(tap) * words + j / 64];
            if (at < -margin || at >= ptrdiff_t(buf.size()) - margin) word &= ~(uint64_t(1) << (j % 64));
            if (!(word >> (j % 64) & 1)) continue;
            float& v = buf[size_t(margin + at)];
            if (std::isnan(v)) v = rng.uniform(-1.f, 1.f);
            whole[size_t(i) * b_cols + j] = v;
          }
        }
        // a row's mask cleared after an earlier row of its tap read the value:
        // remake B from the final masks
        for (int i = 0; i < b_rows; ++i)
          for (int j = 0; j < b_cols; ++j) {
            const int tap = i % group;
            if (!(mask[size_t(tap) * words + j / 64] >> (j % 64) & 1))
              whole[size_t(i) * b_cols + j] = 0.f;
          }
        Operands o(cs, seed + 5000);
        o.b = whole;
        o.ldb = b_cols;
        const std::vector<float> want = run(bf16gemm_avx512, cs, o);
        std::vector<float> got = o.c0;
        bf16gemm_avx512_shifted_b(cs.ta, cs.tb, cs.m, cs.n, cs.k, cs.alpha, o.a.data(), o.lda, sb,
                                  cs.beta, got.data(), o.ldc);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << "the product through shifts and masks differs from the one with B whole";
        bf16gemm_avx512_pack_a(cs.ta, cs.m, cs.k, o.a.data(), o.lda, packed);
        std::vector<float> got_packed = o.c0;
        bf16gemm_avx512_packed_a_shifted_b(packed, cs.tb, cs.n, cs.alpha, sb, cs.beta,
                                           got_packed.data(), o.ldc);
        ASSERT_EQ(0, std::memcmp(want.data(), got_packed.data(), want.size() * sizeof(float)))
            << "the packed-A product through shifts and masks differs";
      }
}

// The path-neutral entries read a Bf16ShiftedB exactly where the path says
// so, and refuse it elsewhere with an error rather than a wrong product.
TEST(Bf16Gemm, ShiftedBOnlyWhereThePathTakesOne) {
  // B (3 × 1) = (x[1], 0, x[0]): taps of offsets 1, 2, 0 over one group,
  // the middle one (x[2] = -4) masked off
  const float a[6] = {1, 2, 3, 4, 5, 6}, x[3] = {0.5f, 1.f, -4.f};
  const ptrdiff_t offset[3] = {1, 2, 0};
  const uint64_t mask[6] = {1, 0, 0, 0, 1, 0};
  Bf16ShiftedB sb;
  sb.x = x;
  sb.group = 3;
  sb.group_stride = 3;
  sb.offset = offset;
  sb.mask = mask;
  sb.mask_words = 2;
  float c[2] = {0, 0};
  EXPECT_EQ(bf16gemm_takes_shifted_b(), bf16gemm_path() == Bf16GemmPath::kAvx512Bf16);
  if (!bf16gemm_takes_shifted_b()) {
    EXPECT_THROW(bf16gemm_shifted_b(false, false, 2, 1, 3, 1.f, a, 3, sb, 0.f, c, 1),
                 RuntimeError);
    return;
  }
  bf16gemm_shifted_b(false, false, 2, 1, 3, 1.f, a, 3, sb, 0.f, c, 1);
  EXPECT_EQ(c[0], 2.5f);  // 1·1 + 2·0 + 3·0.5, every value exact in bf16
  EXPECT_EQ(c[1], 7.f);   // 4·1 + 5·0 + 6·0.5
  Bf16PackedA for_amx;
  bf16gemm_amx_pack_a(false, 2, 3, a, 3, for_amx);
  EXPECT_THROW(bf16gemm_packed_a_shifted_b(for_amx, false, 1, 1.f, sb, 0.f, c, 1), RuntimeError);
}

// The AMX pack's words are the layout bf16gemm_amx.cpp states: op(A) in
// 16-row panels of tiles 32 k wide, tile (q, t) at word (q·KT + t)·256, its
// row i at + 16·i, pair p of that row (k = 32t + 2p low, + 1 high) at + p;
// zeros past m and k. Checked word for word against bf16.h's rounding.
TEST(Bf16Gemm, AmxPackedALayout) {
  SKIP_WITHOUT_AMX_PACKS();
  const int shapes[][2] = {{1, 1}, {3, 5}, {16, 32}, {17, 33}, {33, 64}, {40, 71}, {5, 100}};
  Bf16PackedA packed;
  uint64_t seed = 900;
  for (const auto& [m, k] : shapes)
    for (const bool ta : {false, true}) {
      const Case cs{ta, false, m, 1, k, 1.f, 0.f, 2};
      SCOPED_TRACE(cs.name());
      const Operands o(cs, seed++);
      bf16gemm_amx_pack_a(ta, m, k, o.a.data(), o.lda, packed);
      const int kt = (k + 31) / 32, panels = (m + 15) / 16;
      ASSERT_EQ(bf16gemm_amx_packed_a_words(m, k), size_t(panels) * kt * 256);
      ASSERT_GE(packed.capacity, bf16gemm_amx_packed_a_words(m, k));
      int bad = 0;
      for (int q = 0; q < panels; ++q)
        for (int t = 0; t < kt; ++t)
          for (int i = 0; i < 16; ++i)
            for (int p = 0; p < 16; ++p) {
              const int row = 16 * q + i, k0 = 32 * t + 2 * p;
              auto want = [&](int kk) -> uint32_t {
                return row < m && kk < k ? bf16_bits(float(o.at_a(cs, row, kk))) : 0;
              };
              const uint32_t expected = want(k0) | want(k0 + 1) << 16;
              const uint32_t word = packed.words[(size_t(q) * kt + t) * 256 + 16 * i + p];
              if (word != expected && bad++ < 5)
                ADD_FAILURE() << "tile (" << q << ", " << t << ") row " << i << " pair " << p
                              << std::hex << ": 0x" << word << ", expected 0x" << expected;
            }
      EXPECT_EQ(bad, 0);
    }
}

// A product wider than one 384-column block packs A once, whole, for all of
// its column blocks (bf16gemm_avx512.cpp): the same bits as the product in
// pieces of at most one block, which pack A block by block, for every
// transpose, K over two blocks and odd, M over several row blocks. The AMX
// kernel (column blocks of 256, row blocks of 128, K blocks of 512) is held
// to the same.
void check_wide_product(GemmFn fn) {
  uint64_t seed = 500;
  for (int t = 0; t < 4; ++t)
    for (const auto& [alpha, beta] : {std::pair{1.f, 1.f}, {-0.5f, 0.f}}) {
      const Case cs{bool(t & 1), bool(t & 2), 203, 1001, 1061, alpha, beta, 1};
      SCOPED_TRACE(cs.name());
      const Operands o(cs, seed++);
      const std::vector<float> whole = run(fn, cs, o);
      std::vector<float> pieces = o.c0;
      for (int j0 = 0; j0 < cs.n; j0 += 300) {
        const int nj = std::min(300, cs.n - j0);
        const float* b = cs.tb ? o.b.data() + size_t(j0) * o.ldb : o.b.data() + j0;
        fn(cs.ta, cs.tb, cs.m, nj, cs.k, cs.alpha, o.a.data(), o.lda, b, o.ldb, cs.beta,
           pieces.data() + j0, o.ldc);
      }
      ASSERT_EQ(0, std::memcmp(whole.data(), pieces.data(), whole.size() * sizeof(float)))
          << "the wide product differs from its pieces";
    }
}

TEST(Bf16Gemm, Avx512Bf16WideProductMatchesOneBlockPieces) {
  SKIP_WITHOUT_AVX512_BF16();
  check_wide_product(bf16gemm_avx512);
}

TEST(Bf16Gemm, AmxWideProductMatchesOneBlockPieces) {
  SKIP_WITHOUT_AMX();
  check_wide_product(bf16gemm_amx);
}

// Special operands: a NaN or an infinity reaches the elements whose sums it
// is in (and no others); a denormal operand counts as zero on both paths
// (bf16.h), even where its product with a large value would be a normal
// FP32 number; and operands that round to the same bf16 give the same C.
void check_specials(GemmFn fn) {
  const int m = 3, n = 20, k = 7;
  std::vector<float> a(size_t(m) * k, 0.5f), b(size_t(k) * n, 0.25f), c(size_t(m) * n);
  a[0 * k + 2] = std::numeric_limits<float>::quiet_NaN();  // row 0
  a[1 * k + 4] = INFINITY;                                 // row 1
  fn(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n);
  for (int j = 0; j < n; ++j) {
    EXPECT_TRUE(std::isnan(c[0 * n + j])) << "column " << j;
    EXPECT_EQ(c[1 * n + j], INFINITY) << "column " << j;
    EXPECT_EQ(c[2 * n + j], 7 * 0.5f * 0.25f) << "column " << j;
  }
  // 2^-127 (a float32 denormal) times 2^100 would be 2^-27.
  float tiny = from_bits(0x00400000u), big = 0x1p100f, one = 1.f;
  float out = 5.f;
  fn(false, false, 1, 1, 1, 1.f, &tiny, 1, &big, 1, 0.f, &out, 1);
  EXPECT_EQ(out, 0.f);
  // 1 + 2^-9 rounds to 1: the product with 1 is exactly 1.
  float near_one = 1.f + 0x1p-9f;
  fn(false, false, 1, 1, 1, 1.f, &near_one, 1, &one, 1, 0.f, &out, 1);
  EXPECT_EQ(out, 1.f);
}

TEST(Bf16Gemm, Avx512Bf16SpecialValues) {
  SKIP_WITHOUT_AVX512_BF16();
  check_specials(bf16gemm_avx512);
}

TEST(Bf16Gemm, AmxSpecialValues) {
  SKIP_WITHOUT_AMX();
  check_specials(bf16gemm_amx);
}

TEST(Bf16Gemm, AmxEmulatedSpecialValues) {
  SKIP_WITHOUT_AMX_PACKS();
  check_specials(bf16gemm_amx_emulated);
}

TEST(Bf16Gemm, FallbackSpecialValues) { check_specials(bf16gemm_fallback); }

// A direct call to the AMX kernel where the machine cannot run it is an
// error, not an illegal instruction.
TEST(Bf16Gemm, AmxRefusesWhereItCannotRun) {
  if (bf16gemm_amx_supported()) GTEST_SKIP() << "this machine runs AMX";
  EXPECT_NE(std::string(bf16gemm_amx_missing()), "");
  float a = 1, b = 1, c = 0;
  EXPECT_THROW(bf16gemm_amx(false, false, 1, 1, 1, 1.f, &a, 1, &b, 1, 0.f, &c, 1), RuntimeError);
}

// HPMC_BF16_GEMM picks the path for the whole process, as `hpmc info`
// reports; a path the machine cannot run is an error, an unknown value a
// usage error.
TEST(Bf16Gemm, EnvironmentChoosesThePath) {
  auto info = [](const std::string& env) { return testing::run_hpmc("info", env); };
  testing::CliResult r = info("HPMC_BF16_GEMM=fallback");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("bf16 GEMM    : bf16-rounded operands, float GEMM"), std::string::npos)
      << r.out;

  r = info("HPMC_BF16_GEMM=auto");
  EXPECT_EQ(r.code, 0) << r.err;
  const Bf16GemmPath best = bf16gemm_amx_supported()      ? Bf16GemmPath::kAmx
                            : bf16gemm_avx512_supported() ? Bf16GemmPath::kAvx512Bf16
                                                          : Bf16GemmPath::kFallback;
  const std::string expected = std::string("bf16 GEMM    : ") + bf16gemm_path_name(best);
  EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;

  for (const char* path : {"amx", "avx512_bf16"}) {
    const bool can =
        std::string(path) == "amx" ? bf16gemm_amx_supported() : bf16gemm_avx512_supported();
    r = info(std::string("HPMC_BF16_GEMM=") + path);
    if (can) {
      EXPECT_EQ(r.code, 0) << r.err;
    } else {
      EXPECT_NE(r.code, 0);
      EXPECT_NE(r.err.find(std::string("HPMC_BF16_GEMM=") + path + ", but"), std::string::npos)
          << r.err;
    }
  }

  r = info("HPMC_BF16_GEMM=fastest");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("HPMC_BF16_GEMM=fastest: expected amx, avx512_bf16, fallback or auto"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace hpmc
