// The implicit-GEMM family (src/layers/gpu/conv2d_implicit_gemm.cu) against
// straightforward double-precision loops written here, aimed at its edge
// logic: every GEMM extent at 1, prime, just below / at / just above each tile
// size (16, 64, 128 for M and N; 8 for K), stride 2 with padding 2, 1x1 and 5x5
// kernels, batch 1, the CIFAR autoencoder's layers, shapes that select each
// tile configuration and the split-K path, the four GEMM transposes with
// accumulate on and off, padded and misaligned leading dimensions and
// pointers, determinism, NaN-poisoned outputs and accumulation; the forward
// with every epilogue activation (act_testing.h) on every one of these paths.
//
// Every device array sits between guard zones: inputs' guards hold NaN (a read
// past either end would poison a result), outputs' guards a sentinel that must
// come back bit for bit (a write past either end is caught). Outputs that are
// overwritten start as NaN, so an element left unwritten fails the comparison.
//
// Error bound: ‖gpu − ref‖∞ ≤ 1e-5·max(‖ref‖∞, 1e-30). Each output is an FP32
// FMA chain of length L ≤ 2304 here (C·R·S, K·R·S, or a split-K slice of
// N·P·Q, slices summed in double) over products of U(−1, 1) values. Rounding
// errors of such a chain are independent and zero-mean, so the error of one
// output is about u·sqrt(Σ_i s_i²) ≈ u·L/7 (u = 2^-24, partial sums s_i of
// size ≈ sqrt(i/9)), i.e. ≈ 2e-5 absolute at L = 2304, while ‖ref‖∞ over
// thousands of outputs is ≈ 4·sqrt(L/9) ≈ 64: a relative ≈ 3e-7, and the
// worst of ~1e5 outputs (≈ 5σ) ≈ 1.5e-6, several times under 1e-5. The worst
// case bound γ_L·Σ|a_i b_i| (≈ 1e-4 relative) never comes near for random
// signs; an indexing error, by contrast, is O(1) relative. GEMM cases use
// L ≤ 1000. The bias sum runs in double and is rounded once.
//
// Tensor cores (GpuImplicitTc, training.precision tf32 and bf16): the same
// checks under a ScopedPrecision, against references computed in double from
// the operands rounded as the kernels round them (tf32: to nearest, ties away
// from zero, 10 stored bits; bf16: to nearest even, 7 bits). The products of
// rounded operands are exact, so what remains is the FP32 summation, checked
// at 1e-4·‖ref‖∞: the tensor cores align the addends of each k-step to the
// largest and truncate, an error of either sign but not zero-mean, ≤ 2^-23 of
// the partial sum per k-step, ≈ 8e-6 relative over the longest reduction
// here. A kernel that skipped the rounding is off by ≈ u·|ref| (u = 2^-11
// for tf32): 5 times the tolerance at the worst of many outputs, and far
// more for bf16. The thin kernels (K ≤ 4) and the few-input-channel weight
// gradient keep FP32 products in every precision (conv2d_implicit_gemm.cu);
// their references are not rounded.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/precision.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "act_testing.h"
#include "dev_array.h"
#include "gpu_testing.h"
#include "layers/conv_shape.h"
#include "layers/cpu/maxpool2d_ops.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/implicit_conv.h"
#include "layers/gpu/implicit_fastdiv.h"
#include "layers/gpu/implicit_plan.h"
#include "layers/gpu/simple_kernels.h"

namespace hpmc {
namespace {

namespace imp = gpu::implicit;
using namespace hpmc::testing;  // dev_array.h


// The precision the checks below run the kernels in (a TensorCores scope sets
// it), and the operand rounding of their references.
Precision g_products = Precision::kFp32;

class TensorCores {
 public:
  explicit TensorCores(Precision p) : scope_(p), saved_(g_products) { g_products = p; }
  ~TensorCores() { g_products = saved_; }

 private:
  ScopedPrecision scope_;
  Precision saved_;
};

std::vector<float> operands(const std::vector<float>& v, bool rounded = true) {
  if (!rounded || g_products == Precision::kFp32) return v;
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = testing::round_operand(g_products, v[i]);
  return r;
}

// Whether a pass of conv2d_* runs on tensor cores in tf32 and bf16 (and so
// rounds its operands): the GEMM engine does, the thin kernels keep FP32 —
// K ≤ 4 in every pass, 1–4 input channels in the weight gradient and, in
// tf32, the forward (in bf16 both run on tensor-core kernels of their own,
// which take 5×5 too).
enum class Pass { kForward, kBackwardData, kWeightGrad };
bool on_tensor_cores(const Conv2dShape& s, Pass pass) {
  using namespace gpu::implicit_detail;
  if (choose_thin(s.K, s.R, s.S, s.stride, s.pad, s.W, true) != ThinPath::kNone) return false;
  const bool bf16 = g_products == Precision::kBf16;
  if (pass == Pass::kBackwardData ||
      !thin_input_applies(s.C, s.K, s.R, s.S, s.stride, s.pad, bf16))
    return true;
  return g_products == Precision::kBf16;  // the few-input-channel kernels: bf16's on tensor cores
}

// ‖got − ref‖∞ ≤ tol·max(‖ref‖∞, 1e-30), every element finite; tol = 1e-5 in
// fp32, 1e-4 on tensor cores (the header says why).
::testing::AssertionResult matches(const std::vector<float>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.size();
  double rmax = 0;
  for (double r : ref) rmax = std::max(rmax, std::fabs(r));
  const double rel = g_products == Precision::kFp32 ? 1e-5 : 1e-4;
  const double tol = rel * std::max(rmax, 1e-30);
  double worst = -1;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]))
      return ::testing::AssertionFailure() << "element " << i << " is " << got[i] << " (ref "
                                           << ref[i] << "): unwritten, or read out of range";
    const double err = std::fabs(double(got[i]) - ref[i]);
    if (err > worst) worst = err, at = i;
  }
  if (worst > tol)
    return ::testing::AssertionFailure()
           << "max |gpu - ref| = " << worst << " at element " << at << " (gpu " << got[at]
           << ", ref " << ref[at] << ") exceeds " << rel << "·‖ref‖∞ = " << tol << " of "
           << got.size() << " (" << precision_name(g_products) << ")";
  return ::testing::AssertionSuccess();
}

// fused[i] is the ReLU layer's function (v < 0 ? 0 : v) of plain[i], bit for bit;
// with `mixed`, the data must also have both signs (else the check proves little).
::testing::AssertionResult relu_of(const std::vector<float>& plain,
                                   const std::vector<float>& fused, bool mixed = true) {
  if (plain.size() != fused.size())
    return ::testing::AssertionFailure() << "size " << fused.size() << " vs " << plain.size();
  size_t positive = 0, zeroed = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const float want = plain[i] < 0.0f ? 0.0f : plain[i];
    if (!same_bits(fused[i], want))
      return ::testing::AssertionFailure() << "element " << i << ": " << fused[i]
                                           << ", expected relu(" << plain[i] << ") = " << want;
    (want > 0.0f ? positive : zeroed) += 1;
  }
  if (mixed && plain.size() > 8 && (positive == 0 || zeroed == 0))
    return ::testing::AssertionFailure() << "degenerate: " << positive << " positive, " << zeroed
                                         << " zeroed";
  return ::testing::AssertionSuccess();
}

// ---- double-precision references ------------------------------------------------------

size_t idx4(int a, int b, int c, int d, int nb, int nc, int nd) {
  return ((size_t(a) * nb + b) * nc + c) * nd + d;
}

std::vector<double> ref_forward(const Conv2dShape& s, const std::vector<float>& x,
                                const std::vector<float>& w, const std::vector<float>* b) {
  std::vector<double> y(size_t(s.N) * s.out_sample(), 0.0);
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k)
      for (int p = 0; p < s.P; ++p)
        for (int q = 0; q < s.Q; ++q) {
          double acc = b ? double((*b)[k]) : 0.0;
          for (int c = 0; c < s.C; ++c)
            for (int r = 0; r < s.R; ++r) {
              const int h = p * s.stride - s.pad + r;
              if (h < 0 || h >= s.H) continue;
              for (int t = 0; t < s.S; ++t) {
                const int ww = q * s.stride - s.pad + t;
                if (ww < 0 || ww >= s.W) continue;
                acc += double(x[idx4(n, c, h, ww, s.C, s.H, s.W)]) *
                       double(w[idx4(k, c, r, t, s.C, s.R, s.S)]);
              }
            }
          y[idx4(n, k, p, q, s.K, s.P, s.Q)] = acc;
        }
  return y;
}

// Written as a scatter (each dy element to the pixels it came from), the
// opposite of the kernel's gather.
std::vector<double> ref_backward_data(const Conv2dShape& s, const std::vector<float>& dy,
                                      const std::vector<float>& w) {
  std::vector<double> dx(size_t(s.N) * s.in_sample(), 0.0);
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k)
      for (int p = 0; p < s.P; ++p)
        for (int q = 0; q < s.Q; ++q) {
          const double g = dy[idx4(n, k, p, q, s.K, s.P, s.Q)];
          for (int c = 0; c < s.C; ++c)
            for (int r = 0; r < s.R; ++r) {
              const int h = p * s.stride - s.pad + r;
              if (h < 0 || h >= s.H) continue;
              for (int t = 0; t < s.S; ++t) {
                const int ww = q * s.stride - s.pad + t;
                if (ww < 0 || ww >= s.W) continue;
                dx[idx4(n, c, h, ww, s.C, s.H, s.W)] +=
                    g * double(w[idx4(k, c, r, t, s.C, s.R, s.S)]);
              }
            }
        }
  return dx;
}

// The weight gradient alone (what backward_params adds to dw).
std::vector<double> ref_weight_grad(const Conv2dShape& s, const std::vector<float>& x,
                                    const std::vector<float>& dy) {
  std::vector<double> dw(s.weight_count(), 0.0);
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k)
      for (int p = 0; p < s.P; ++p)
        for (int q = 0; q < s.Q; ++q) {
          const double g = dy[idx4(n, k, p, q, s.K, s.P, s.Q)];
          for (int c = 0; c < s.C; ++c)
            for (int r = 0; r < s.R; ++r) {
              const int h = p * s.stride - s.pad + r;
              if (h < 0 || h >= s.H) continue;
              for (int t = 0; t < s.S; ++t) {
                const int ww = q * s.stride - s.pad + t;
                if (ww < 0 || ww >= s.W) continue;
                dw[idx4(k, c, r, t, s.C, s.R, s.S)] +=
                    g * double(x[idx4(n, c, h, ww, s.C, s.H, s.W)]);
              }
            }
        }
  return dw;
}

std::vector<double> ref_bias_grad(const Conv2dShape& s, const std::vector<float>& dy) {
  std::vector<double> db(size_t(s.K), 0.0);
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k)
      for (int i = 0; i < s.P * s.Q; ++i) db[k] += dy[(size_t(n) * s.K + k) * s.P * s.Q + i];
  return db;
}

// op(A)·op(B) for row-major A, B with leading dimensions.
std::vector<double> ref_gemm(bool ta, bool tb, int m, int n, int k, const std::vector<float>& a,
                             int lda, const std::vector<float>& b, int ldb) {
  std::vector<double> c(size_t(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int p = 0; p < k; ++p) {
        const double av = ta ? a[size_t(p) * lda + i] : a[size_t(i) * lda + p];
        const double bv = tb ? b[size_t(j) * ldb + p] : b[size_t(p) * ldb + j];
        acc += av * bv;
      }
      c[size_t(i) * n + j] = acc;
    }
  return c;
}

// ---- one convolution, all three passes -----------------------------------------------------

std::string describe(const Conv2dShape& s) {
  return str("N=", s.N, " C=", s.C, " H=", s.H, " W=", s.W, " K=", s.K, " R=", s.R, " S=", s.S,
             " stride=", s.stride, " pad=", s.pad, " -> P=", s.P, " Q=", s.Q);
}

struct ConvCase {
  int N, C, H, W, K, R, S, stride, pad;
  Conv2dShape shape() const { return make_conv2d_shape(N, C, H, W, K, R, S, stride, pad); }
};

// Forward (with or without bias), backward_data and backward_params (dw and db
// starting from random values: they accumulate) against the references, on
// fresh random inputs drawn from `seed`. misalign = 1 shifts every device
// array off 16-byte alignment (the scalar paths).
void check_conv(const ConvCase& cc, uint64_t seed, bool bias = true, size_t misalign = 0) {
  const Conv2dShape s = cc.shape();
  SCOPED_TRACE(describe(s) + " seed=" + std::to_string(seed) + (bias ? "" : " no bias") +
               (misalign ? " misaligned" : ""));
  ASSERT_GT(s.P, 0);
  ASSERT_GT(s.Q, 0);
  Rng rng(seed);
  const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
  const std::vector<float> w = random_floats(s.weight_count(), rng);
  const std::vector<float> b = random_floats(size_t(s.K), rng);
  const std::vector<float> dy = random_floats(size_t(s.N) * s.out_sample(), rng);
  const std::vector<float> dw0 = random_floats(s.weight_count(), rng);
  const std::vector<float> db0 = random_floats(size_t(s.K), rng);

  auto dx_in = input(x, misalign), dw_in = input(w, misalign), db_in = input(b, misalign),
       ddy_in = input(dy, misalign);

  // forward
  DevArray y(dy.size(), misalign);
  y.upload(std::vector<float>(dy.size(), kNaN), kGuard);
  imp::conv2d_forward(s, dx_in->ptr(), dw_in->ptr(), bias ? db_in->ptr() : nullptr, y.ptr());
  finish("implicit conv2d_forward");
  const bool tc = on_tensor_cores(s, Pass::kForward),
             tc_dx = on_tensor_cores(s, Pass::kBackwardData),
             tc_dw = on_tensor_cores(s, Pass::kWeightGrad);
  EXPECT_TRUE(matches(y.payload(), ref_forward(s, operands(x, tc), operands(w, tc),
                                               bias ? &b : nullptr)))
      << "forward";
  EXPECT_TRUE(y.guards_intact(kGuard)) << "forward";

  // forward with an activation in the epilogue (the ReLU and every other kind,
  // act_testing.h): the activation of the forward's own output, bit for bit
  // (sigmoid and tanh within 4 ulp of the host's)
  const std::vector<float> slopes = random_floats(size_t(s.K), rng);  // prelu's, per channel
  auto slopes_in = input(slopes);
  const std::vector<float> plain = y.payload();
  for (const Activation& act : epilogue_activations(slopes_in->ptr())) {
    SCOPED_TRACE("epilogue " + act_name(act));
    DevArray ya(dy.size(), misalign);
    ya.upload(std::vector<float>(dy.size(), kNaN), kGuard);
    imp::conv2d_forward_act(s, dx_in->ptr(), dw_in->ptr(), bias ? db_in->ptr() : nullptr,
                            ya.ptr(), act);
    finish("implicit conv2d_forward_act");
    // With no input channel the output is the bias alone: K values, maybe all positive.
    EXPECT_TRUE(act_of(plain, ya.payload(), act, slopes, size_t(s.P) * s.Q, size_t(s.K), s.C > 0));
    if (act.kind == ActKind::kRelu) {
      EXPECT_TRUE(relu_of(plain, ya.payload(), s.C > 0));
    }
    EXPECT_TRUE(ya.guards_intact(kGuard));
  }

  // backward_data
  DevArray dx(x.size(), misalign);
  dx.upload(std::vector<float>(x.size(), kNaN), kGuard);
  imp::conv2d_backward_data(s, ddy_in->ptr(), dw_in->ptr(), dx.ptr());
  finish("implicit conv2d_backward_data");
  EXPECT_TRUE(matches(dx.payload(), ref_backward_data(s, operands(dy, tc_dx), operands(w, tc_dx))))
      << "backward_data";
  EXPECT_TRUE(dx.guards_intact(kGuard)) << "backward_data";

  // backward_params: dw += ..., db += ...
  DevArray dw(w.size(), misalign), db(b.size(), misalign);
  dw.upload(dw0, kGuard);
  db.upload(db0, kGuard);
  imp::conv2d_backward_params(s, dx_in->ptr(), ddy_in->ptr(), dw.ptr(), bias ? db.ptr() : nullptr);
  finish("implicit conv2d_backward_params");
  std::vector<double> want_dw = ref_weight_grad(s, operands(x, tc_dw), operands(dy, tc_dw));
  for (size_t i = 0; i < want_dw.size(); ++i) want_dw[i] += dw0[i];
  EXPECT_TRUE(matches(dw.payload(), want_dw)) << "backward_params dw";
  EXPECT_TRUE(dw.guards_intact(kGuard)) << "backward_params dw";
  std::vector<double> want_db(db0.begin(), db0.end());
  if (bias) {
    const std::vector<double> g = ref_bias_grad(s, dy);
    for (size_t i = 0; i < want_db.size(); ++i) want_db[i] += g[i];
  }
  EXPECT_TRUE(matches(db.payload(), want_db)) << "backward_params db";
  EXPECT_TRUE(db.guards_intact(kGuard)) << "backward_params db";
}

void check_convs(const std::vector<ConvCase>& cases, uint64_t seed) {
  for (const ConvCase& c : cases) check_conv(c, seed++);
}

// ---- one GEMM ------------------------------------------------------------------------------

// C (m×n, leading dimension ldc) = or += op(A)·op(B). The padding columns of A,
// B (beyond their logical width) hold NaN, those of C the guard value, which
// must survive. misalign shifts C off 16-byte alignment.
void check_gemm(bool ta, bool tb, int m, int n, int k, bool accumulate, uint64_t seed,
                int pad_a = 0, int pad_b = 0, int pad_c = 0, size_t misalign = 0) {
  const int lda = std::max(1, (ta ? m : k) + pad_a);
  const int ldb = std::max(1, (tb ? k : n) + pad_b);
  const int ldc = std::max(1, n + pad_c);
  SCOPED_TRACE(str("gemm ta=", ta, " tb=", tb, " m=", m, " n=", n, " k=", k, " acc=", accumulate,
                   " lda=", lda, " ldb=", ldb, " ldc=", ldc, " misalign=", misalign,
                   " seed=", seed));
  Rng rng(seed);
  const int a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int b_rows = tb ? n : k, b_cols = tb ? k : n;
  std::vector<float> a(size_t(a_rows) * lda, kNaN), b(size_t(b_rows) * ldb, kNaN);
  for (int i = 0; i < a_rows; ++i)
    for (int j = 0; j < a_cols; ++j) a[size_t(i) * lda + j] = rng.uniform(-1.f, 1.f);
  for (int i = 0; i < b_rows; ++i)
    for (int j = 0; j < b_cols; ++j) b[size_t(i) * ldb + j] = rng.uniform(-1.f, 1.f);
  std::vector<float> c0(size_t(m) * ldc, kGuard);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      c0[size_t(i) * ldc + j] = accumulate ? rng.uniform(-1.f, 1.f) : kNaN;

  auto da = input(a), dbm = input(b);
  DevArray dc(c0.size(), misalign);
  dc.upload(c0, kGuard);
  imp::gemm(ta, tb, m, n, k, da->ptr(), lda, dbm->ptr(), ldb, dc.ptr(), ldc, accumulate);
  finish("implicit gemm");

  const std::vector<double> prod = ref_gemm(ta, tb, m, n, k, operands(a), lda, operands(b), ldb);
  const std::vector<float> got_all = dc.payload();
  std::vector<float> got(size_t(m) * n);
  std::vector<double> want(size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      got[size_t(i) * n + j] = got_all[size_t(i) * ldc + j];
      want[size_t(i) * n + j] =
          prod[size_t(i) * n + j] + (accumulate ? double(c0[size_t(i) * ldc + j]) : 0.0);
    }
  EXPECT_TRUE(matches(got, want));
  for (int i = 0; i < m; ++i)
    for (int j = n; j < ldc; ++j)
      ASSERT_TRUE(same_bits(got_all[size_t(i) * ldc + j], kGuard))
          << "C padding (" << i << ", " << j << ") overwritten with "
          << got_all[size_t(i) * ldc + j];
  EXPECT_TRUE(dc.guards_intact(kGuard));
}

// ---- the tests -------------------------------------------------------------------------------

// (m, n, k): each extent at 1, primes, and around the tile sizes 16 / 64 / 128
// (M, N) and 8 (K).
struct Mnk {
  int m, n, k;
};
const std::vector<Mnk> kGemmSizes = {
    {1, 1, 1},      {1, 129, 7},    {129, 1, 9},     {2, 3, 1},       {13, 17, 8},
    {15, 16, 9},    {16, 15, 17},   {17, 17, 16},    {31, 33, 31},    {63, 64, 65},
    {64, 65, 63},   {65, 63, 64},   {127, 128, 129}, {128, 129, 127}, {129, 127, 128},
    {257, 13, 300}, {13, 257, 300}, {3, 300, 257},   {300, 3, 1000},  {7, 11, 2},
};

TEST(GpuImplicit, GemmAllTransposesAndSizes) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const Mnk& s : kGemmSizes)
    for (int t = 0; t < 4; ++t)
      for (int acc = 0; acc < 2; ++acc) check_gemm(t & 1, t & 2, s.m, s.n, s.k, acc, seed++);
}

// Large enough that the heuristic picks the 128×128 tiles (1000×1100: 72
// blocks) and the 128×64 tiles (2000×1100: 288 blocks) on an H100, with
// partial tiles on both edges (ImplicitPlan.TileChoices pins the choice).
TEST(GpuImplicit, GemmLargeTiles) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 2000;
  for (int t = 0; t < 4; ++t) check_gemm(t & 1, t & 2, 2000, 1100, 37, t == 3, seed++);
  for (int t = 0; t < 4; ++t) check_gemm(t & 1, t & 2, 1000, 1100, 21, t == 1, seed++);
}

// Leading dimensions above the minimum: odd ones (scalar epilogue) and ones that
// keep 16-byte rows (float4 epilogue); the padding must be neither read (A, B
// padding is NaN) nor written (C padding is a guard).
TEST(GpuImplicit, GemmPaddedLeadingDimensions) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 3000;
  for (const Mnk& s : {Mnk{37, 45, 29}, Mnk{130, 70, 19}, Mnk{5, 140, 33}, Mnk{140, 6, 12}})
    for (int t = 0; t < 4; ++t)
      for (int acc = 0; acc < 2; ++acc) {
        check_gemm(t & 1, t & 2, s.m, s.n, s.k, acc, seed++, 3, 5, 3);  // ldc odd
        const int to4 = (4 - s.n % 4) % 4;
        check_gemm(t & 1, t & 2, s.m, s.n, s.k, acc, seed++, 1, 2, to4 + 4);  // ldc % 4 == 0
      }
}

// C off 16-byte alignment with ldc % 4 == 0: the float4 path must step aside.
TEST(GpuImplicit, GemmMisalignedOutput) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 4000;
  for (int t = 0; t < 4; ++t)
    for (int acc = 0; acc < 2; ++acc) check_gemm(t & 1, t & 2, 70, 68, 21, acc, seed++, 0, 0, 0, 1);
}

// k = 0: C = 0 without accumulate, unchanged with it; m or n = 0: nothing.
TEST(GpuImplicit, GemmEmptyExtents) {
  HPMC_REQUIRE_GPU();
  check_gemm(false, false, 9, 10, 0, false, 5000);
  check_gemm(true, true, 9, 10, 0, true, 5001);
  DevArray c(16);
  c.upload(std::vector<float>(16, kGuard), kGuard);
  DevArray a(16), b(16);
  a.upload(std::vector<float>(16, 1.f), kNaN);
  b.upload(std::vector<float>(16, 1.f), kNaN);
  imp::gemm(false, false, 0, 4, 4, a.ptr(), 4, b.ptr(), 4, c.ptr(), 4, false);
  imp::gemm(false, false, 4, 0, 4, a.ptr(), 4, b.ptr(), 4, c.ptr(), 4, false);
  finish("implicit gemm (empty)");
  EXPECT_TRUE(c.guards_intact(kGuard));
  for (float v : c.payload()) EXPECT_TRUE(same_bits(v, kGuard));
}

TEST(GpuImplicit, ConvAllExtentsOne) {
  HPMC_REQUIRE_GPU();
  check_convs({{1, 1, 1, 1, 1, 1, 1, 1, 0}, {1, 1, 3, 3, 1, 3, 3, 1, 0}}, 10);
}

// Each case lists its GEMM extents (M×N×K) for forward / backward_data / backward_params.
TEST(GpuImplicit, ConvTileEdges) {
  HPMC_REQUIRE_GPU();
  check_convs(
      {
          {1, 7, 1, 13, 3, 1, 1, 1, 0},      // 13×3×7 / 13×7×3 / 3×7×13
          {1, 8, 3, 5, 17, 1, 1, 1, 0},      // 15×17×8 / 15×8×17 / 17×8×15
          {1, 9, 1, 17, 15, 1, 1, 1, 0},     // 17×15×9 / 17×9×15 / 15×9×17
          {1, 16, 4, 4, 16, 1, 1, 1, 0},     // 16×16×16 everywhere
          {1, 3, 7, 9, 65, 1, 1, 1, 0},      // 63×65×3 / 63×3×65 / 65×3×63
          {1, 5, 5, 13, 63, 1, 1, 1, 0},     // 65×63×5 / 65×5×63 / 63×5×65
          {1, 2, 8, 8, 64, 1, 1, 1, 0},      // 64×64×2 / 64×2×64 / 64×2×64
          {1, 4, 1, 127, 129, 1, 1, 1, 0},   // 127×129×4 / 127×4×129 / 129×4×127
          {3, 1, 1, 43, 127, 3, 3, 1, 1},    // 129×127×9 / 129×1×1143 / 127×9×129
          {1, 17, 4, 4, 16, 3, 3, 1, 1},     // 16×16×153 / 16×17×144 / 16×153×16
          {2, 13, 11, 11, 131, 3, 3, 1, 1},  // 242×131×117 / 242×13×1179 / 131×117×242
          {1, 129, 3, 3, 5, 3, 3, 1, 1},     // 9×5×1161 / 9×129×45 / 5×1161×9
          {1, 65, 5, 5, 17, 1, 1, 1, 0},     // 25×17×65 / 25×65×17 / 17×65×25
          {1, 63, 2, 9, 127, 2, 2, 1, 0},    // 8×127×252 / 18×63×508 / 127×252×8
          {2, 15, 3, 3, 7, 2, 2, 1, 1},      // 32×7×60 / 18×15×28 / 7×60×32
          {1, 3, 3, 3, 7, 3, 3, 1, 0},       // 1×7×27 / 9×3×63 / 7×27×1
      },
      100);
}

TEST(GpuImplicit, ConvStride2Pad2) {
  HPMC_REQUIRE_GPU();
  check_convs({{2, 5, 11, 13, 7, 3, 3, 2, 2},
               {1, 4, 9, 10, 6, 5, 5, 2, 2},
               {3, 2, 8, 8, 9, 4, 4, 2, 2},
               {2, 3, 7, 6, 5, 3, 3, 3, 2},
               {1, 1, 5, 5, 1, 2, 2, 2, 2}},
              200);
}

TEST(GpuImplicit, ConvPointwise) {
  HPMC_REQUIRE_GPU();
  check_convs({{2, 16, 7, 9, 33, 1, 1, 1, 0},
               {2, 6, 9, 9, 5, 1, 1, 2, 0},
               {1, 5, 4, 6, 3, 1, 1, 1, 1},
               {3, 130, 5, 5, 20, 1, 1, 1, 0}},
              300);
}

TEST(GpuImplicit, Conv5x5) {
  HPMC_REQUIRE_GPU();
  check_convs({{2, 3, 12, 12, 10, 5, 5, 1, 2}, {1, 6, 9, 11, 17, 5, 5, 1, 0}}, 400);
}

TEST(GpuImplicit, ConvBatch1) {
  HPMC_REQUIRE_GPU();
  check_convs({{1, 32, 16, 16, 64, 3, 3, 1, 1}, {1, 3, 32, 32, 16, 3, 3, 1, 1}}, 500);
}

// The CIFAR autoencoder's convolutions at batch 2 (3x3, pad 1). 3→256 and
// 256→3 exercise the thin tiles (GEMM_N = 3 / GEMM_M = 3) and split-K.
const std::vector<ConvCase> kCifarCases = {{2, 3, 32, 32, 256, 3, 3, 1, 1},
                                           {2, 256, 16, 16, 128, 3, 3, 1, 1},
                                           {2, 128, 8, 8, 128, 3, 3, 1, 1},
                                           {2, 128, 16, 16, 256, 3, 3, 1, 1},
                                           {2, 256, 32, 32, 3, 3, 3, 1, 1}};

TEST(GpuImplicit, CifarAutoencoderShapes) {
  HPMC_REQUIRE_GPU();
  check_convs(kCifarCases, 600);
}

// Shapes for which the heuristic picks the large tiles on an H100: the
// 128×128 tiles for forward (M = 16348, N = 250) and backward_data (M = 16348,
// N = 250), the 128×64 tiles for backward_params (M = 250, N = 540, split-K
// over N·P·Q = 1058), and split-K in forward and backward_data (M = 1058; the
// forward's four slices on 128×128 tiles).
TEST(GpuImplicit, ConvLargeTiles) {
  HPMC_REQUIRE_GPU();
  check_convs({{4, 3, 61, 67, 250, 3, 3, 1, 1},
               {4, 250, 61, 67, 3, 3, 3, 1, 1},
               {2, 60, 23, 23, 250, 3, 3, 1, 1}},
              700);
}

// Shapes for which the heuristic picks the wide engine (its 128×128 tile, WL)
// on an H100 (ImplicitPlan.WideTileChoices pins them): the forward of 32→256
// at 121×121 (M = 14641: 115 blocks, the last partial) and, with two slices,
// the forward of 64→128 at 120×120. Each is also run twice for identical bits.
TEST(GpuImplicit, ConvWideTiles) {
  HPMC_REQUIRE_GPU();
  check_convs({{1, 32, 121, 121, 256, 3, 3, 1, 1}, {1, 64, 120, 120, 128, 3, 3, 1, 1}}, 750);
  for (const ConvCase& cc : std::vector<ConvCase>{{1, 32, 121, 121, 256, 3, 3, 1, 1},
                                                  {1, 64, 120, 120, 128, 3, 3, 1, 1}}) {
    const Conv2dShape s = cc.shape();
    SCOPED_TRACE(describe(s));
    Rng rng(760);
    const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
    const std::vector<float> w = random_floats(s.weight_count(), rng);
    auto dx_in = input(x), dw_in = input(w);
    std::vector<float> out[2];
    for (int run = 0; run < 2; ++run) {
      DevArray y(size_t(s.N) * s.out_sample());
      y.upload(std::vector<float>(y.size(), kNaN), kGuard);
      imp::conv2d_forward(s, dx_in->ptr(), dw_in->ptr(), nullptr, y.ptr());
      finish("implicit conv2d_forward (wide, determinism)");
      out[run] = y.payload();
    }
    EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4));
  }
}

// No bias (db null) and every array off 16-byte alignment (scalar epilogues).
TEST(GpuImplicit, ConvNoBiasAndMisaligned) {
  HPMC_REQUIRE_GPU();
  check_conv({2, 5, 8, 8, 12, 3, 3, 1, 1}, 800, /*bias=*/false);
  check_conv({2, 5, 8, 8, 12, 3, 3, 1, 1}, 801, /*bias=*/true, /*misalign=*/1);
  check_conv({2, 4, 10, 12, 130, 3, 3, 1, 1}, 802, /*bias=*/true, /*misalign=*/1);
  check_conv({2, 3, 32, 32, 5, 3, 3, 1, 1}, 803, /*bias=*/false, /*misalign=*/1);
}

// Forward, backward_data and backward_params of `cc` twice on the same fresh
// random inputs from `seed`: every output the same bits both times.
void expect_deterministic(const ConvCase& cc, uint64_t seed, const char* what) {
  const Conv2dShape s = cc.shape();
  SCOPED_TRACE(describe(s));
  Rng rng(seed);
  const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
  const std::vector<float> w = random_floats(s.weight_count(), rng);
  const std::vector<float> b = random_floats(size_t(s.K), rng);
  const std::vector<float> dy = random_floats(size_t(s.N) * s.out_sample(), rng);
  const std::vector<float> dw0 = random_floats(s.weight_count(), rng);
  auto dx_in = input(x), dw_in = input(w), db_in = input(b), ddy_in = input(dy);
  std::vector<float> runs[2][4];
  for (int run = 0; run < 2; ++run) {
    DevArray y(dy.size()), dx(x.size()), dw(w.size()), db(b.size());
    y.upload(std::vector<float>(dy.size(), kNaN), kGuard);
    dx.upload(std::vector<float>(x.size(), kNaN), kGuard);
    dw.upload(dw0, kGuard);
    db.upload(b, kGuard);
    imp::conv2d_forward(s, dx_in->ptr(), dw_in->ptr(), db_in->ptr(), y.ptr());
    imp::conv2d_backward_data(s, ddy_in->ptr(), dw_in->ptr(), dx.ptr());
    imp::conv2d_backward_params(s, dx_in->ptr(), ddy_in->ptr(), dw.ptr(), db.ptr());
    finish(what);
    runs[run][0] = y.payload();
    runs[run][1] = dx.payload();
    runs[run][2] = dw.payload();
    runs[run][3] = db.payload();
  }
  const char* names[4] = {"forward", "backward_data", "dw", "db"};
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(runs[0][i].size(), runs[1][i].size());
    EXPECT_EQ(0, std::memcmp(runs[0][i].data(), runs[1][i].data(), runs[0][i].size() * 4))
        << names[i] << " differs between two runs";
  }
}

// Two runs on the same inputs give the same bits (split-K included).
TEST(GpuImplicit, Deterministic) {
  HPMC_REQUIRE_GPU();
  const std::vector<ConvCase> cases = {{2, 256, 16, 16, 128, 3, 3, 1, 1},
                                       {2, 256, 32, 32, 3, 3, 3, 1, 1},
                                       {2, 60, 23, 23, 250, 3, 3, 1, 1},
                                       {2, 3, 32, 32, 256, 3, 3, 1, 1}};
  uint64_t seed = 900;
  for (const ConvCase& cc : cases) {
    expect_deterministic(cc, seed++, "implicit conv2d (determinism)");
  }
  // The GEMM, with the large tiles.
  Rng rng(seed);
  const std::vector<float> a = random_floats(2000 * 37, rng), b = random_floats(37 * 1100, rng);
  auto da = input(a), dbm = input(b);
  std::vector<float> out[2];
  for (int run = 0; run < 2; ++run) {
    DevArray c(2000 * 1100);
    c.upload(std::vector<float>(2000 * 1100, kNaN), kGuard);
    imp::gemm(false, false, 2000, 1100, 37, da->ptr(), 37, dbm->ptr(), 1100, c.ptr(), 1100, false);
    finish("implicit gemm (determinism)");
    out[run] = c.payload();
  }
  EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4)) << "gemm";
}

// Outputs that are overwritten start as NaN (and, in a second round, +inf) and
// come back finite and right; the guards around them survive.
TEST(GpuImplicit, PoisonedOutputsFullyOverwritten) {
  HPMC_REQUIRE_GPU();
  for (float poison : {kNaN, std::numeric_limits<float>::infinity()}) {
    for (const ConvCase& cc : std::vector<ConvCase>{{2, 7, 9, 11, 13, 3, 3, 1, 1},
                                                    {2, 3, 32, 32, 256, 3, 3, 1, 1},
                                                    {2, 256, 32, 32, 3, 3, 3, 1, 1}}) {
      const Conv2dShape s = cc.shape();
      SCOPED_TRACE(describe(s) + " poison=" + std::to_string(poison));
      Rng rng(1100);
      const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
      const std::vector<float> w = random_floats(s.weight_count(), rng);
      const std::vector<float> dy = random_floats(size_t(s.N) * s.out_sample(), rng);
      auto dx_in = input(x), dw_in = input(w), ddy_in = input(dy);
      DevArray y(dy.size()), dx(x.size());
      y.upload(std::vector<float>(dy.size(), poison), kGuard);
      dx.upload(std::vector<float>(x.size(), poison), kGuard);
      imp::conv2d_forward(s, dx_in->ptr(), dw_in->ptr(), nullptr, y.ptr());
      imp::conv2d_backward_data(s, ddy_in->ptr(), dw_in->ptr(), dx.ptr());
      finish("implicit conv2d (poison)");
      EXPECT_TRUE(matches(y.payload(), ref_forward(s, x, w, nullptr)));
      EXPECT_TRUE(matches(dx.payload(), ref_backward_data(s, dy, w)));
      EXPECT_TRUE(y.guards_intact(kGuard));
      EXPECT_TRUE(dx.guards_intact(kGuard));
    }
  }
  check_gemm(true, false, 45, 77, 19, false, 1101);  // C starts as NaN
}

// backward_params adds: two calls on the same dw give dw0 + 2·Δ (split-K and
// direct paths), and a null db is allowed.
TEST(GpuImplicit, BackwardParamsAccumulates) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 1200;
  for (const ConvCase& cc : std::vector<ConvCase>{{1, 4, 3, 3, 5, 3, 3, 1, 1},    // 1 slice
                                                  {2, 3, 32, 32, 5, 3, 3, 1, 1},  // split-K
                                                  {2, 256, 16, 16, 128, 3, 3, 1, 1}}) {
    for (bool with_db : {true, false}) {
      const Conv2dShape s = cc.shape();
      SCOPED_TRACE(describe(s) + (with_db ? "" : " db=null"));
      Rng rng(seed++);
      const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
      const std::vector<float> dy = random_floats(size_t(s.N) * s.out_sample(), rng);
      const std::vector<float> dw0 = random_floats(s.weight_count(), rng);
      const std::vector<float> db0 = random_floats(size_t(s.K), rng);
      auto dx_in = input(x), ddy_in = input(dy);
      DevArray dw(dw0.size()), db(db0.size());
      dw.upload(dw0, kGuard);
      db.upload(db0, kGuard);
      for (int rep = 0; rep < 2; ++rep)
        imp::conv2d_backward_params(s, dx_in->ptr(), ddy_in->ptr(), dw.ptr(),
                                    with_db ? db.ptr() : nullptr);
      finish("implicit conv2d_backward_params (accumulate)");
      const std::vector<double> g = ref_weight_grad(s, x, dy);
      std::vector<double> want(dw0.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = double(dw0[i]) + 2.0 * g[i];
      EXPECT_TRUE(matches(dw.payload(), want));
      EXPECT_TRUE(dw.guards_intact(kGuard));
      std::vector<double> want_db(db0.begin(), db0.end());
      if (with_db) {
        const std::vector<double> gb = ref_bias_grad(s, dy);
        for (size_t i = 0; i < want_db.size(); ++i) want_db[i] += 2.0 * gb[i];
      }
      const std::vector<float> got_db = db.payload();
      if (with_db) {
        EXPECT_TRUE(matches(got_db, want_db));
      } else {
        for (size_t i = 0; i < got_db.size(); ++i) EXPECT_TRUE(same_bits(got_db[i], db0[i]));
      }
      EXPECT_TRUE(db.guards_intact(kGuard));
    }
  }
}

// A batch of zero is a no-op for every pass.
TEST(GpuImplicit, ConvEmptyBatch) {
  HPMC_REQUIRE_GPU();
  const Conv2dShape s = make_conv2d_shape(0, 3, 8, 8, 4, 3, 3, 1, 1);
  DevArray x(8), w(size_t(s.weight_count())), y(8), dw(size_t(s.weight_count())), db(4);
  x.upload(std::vector<float>(8, 1.f), kGuard);
  w.upload(std::vector<float>(w.size(), 1.f), kGuard);
  y.upload(std::vector<float>(8, kGuard), kGuard);
  dw.upload(std::vector<float>(dw.size(), kGuard), kGuard);
  db.upload(std::vector<float>(4, kGuard), kGuard);
  imp::conv2d_forward(s, x.ptr(), w.ptr(), nullptr, y.ptr());
  imp::conv2d_backward_data(s, x.ptr(), w.ptr(), y.ptr());
  imp::conv2d_backward_params(s, x.ptr(), x.ptr(), dw.ptr(), db.ptr());
  finish("implicit conv2d (empty batch)");
  for (const DevArray* a : {&y, &dw, &db}) {
    EXPECT_TRUE(a->guards_intact(kGuard));
    for (float v : a->payload()) EXPECT_TRUE(same_bits(v, kGuard));
  }
}

// ---- every plan on the GEMM path (implicit_conv.h) -------------------------------------
//
// Each pass of each shape under every tile configuration (both engines), with
// and without split-K (3 slices, and as many as there are k-tiles: slices of
// one k-tile, shorter than the pipelines), and with both GEMM_K orders where
// the tap-major one applies: forward needs C % 8 == 0 and K % 4 == 0,
// backward_data stride 1, K % 8 == 0 and C % 4 == 0, backward_params' tap-major
// columns a tile whose BN divides C (16, 64, 128, 256). The shapes give partial
// tiles along M and N, several taps per k-tile row of channels (C = 8, 16, 40),
// a 5×5 window, an asymmetric 2×3 one, stride 2 and 1×1; C = 128 and 256 with
// long reductions (144 and 288 k-tiles: the wide engine's 4-stage ring wraps
// many times) and GEMM_M past 256 (partial 256-row tiles).

// only: the tile configurations to run (default: all of them).
void check_planned(const ConvCase& cc, uint64_t seed, size_t misalign = 0,
                   std::vector<gpu::implicit_detail::Tile> only = {}) {
  using namespace gpu::implicit_detail;
  const Conv2dShape s = cc.shape();
  SCOPED_TRACE(describe(s) + " seed=" + std::to_string(seed) + (misalign ? " misaligned" : ""));
  Rng rng(seed);
  const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
  const std::vector<float> w = random_floats(s.weight_count(), rng);
  const std::vector<float> b = random_floats(size_t(s.K), rng);
  const std::vector<float> dy = random_floats(size_t(s.N) * s.out_sample(), rng);
  const std::vector<float> dw0 = random_floats(s.weight_count(), rng);
  auto dx_in = input(x, misalign), dw_in = input(w, misalign), db_in = input(b, misalign),
       ddy_in = input(dy, misalign);
  const std::vector<float> slopes = random_floats(size_t(s.K), rng);  // prelu's, per channel
  auto slopes_in = input(slopes);
  // The GEMM path in every pass: tensor cores in tf32 and bf16.
  const std::vector<float> xr = operands(x), wr = operands(w), dyr = operands(dy);
  const std::vector<double> want_y = ref_forward(s, xr, wr, &b);
  const std::vector<double> want_dx = ref_backward_data(s, dyr, wr);
  std::vector<double> want_dw = ref_weight_grad(s, xr, dyr);
  for (size_t i = 0; i < want_dw.size(); ++i) want_dw[i] += dw0[i];
  std::vector<double> want_db = ref_bias_grad(s, dy);  // added to db = b
  for (size_t i = 0; i < want_db.size(); ++i) want_db[i] += b[i];
  int bias_columns = 0;  // weight-gradient plans that took db as a GEMM column

  const Tile all_tiles[] = {Tile::kL,  Tile::kM,  Tile::kS,  Tile::kThinN, Tile::kThinM,
                            Tile::kWN, Tile::kWM, Tile::kWQ, Tile::kWL};
  const char* tile_names[] = {"L", "M", "S", "ThinN", "ThinM", "WN", "WM", "WQ", "WL"};
  for (ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kWeightGrad}) {
    const int kt = conv_ktiles(s, pass);
    // In bf16 the channels-last kernel where it applies, once (it has its own tile).
    bool nhwc_left = g_products == Precision::kBf16 &&
                     (pass == ConvPass::kForward        ? nhwc_forward(s.C, s.K)
                      : pass == ConvPass::kBackwardData ? nhwc_backward_data(s.stride, s.C, s.K)
                                                        : nhwc_weight_grad(s.C, s.K));
    for (int t = 0; t < 9; ++t) {
      if (!only.empty() && std::find(only.begin(), only.end(), all_tiles[t]) == only.end())
        continue;
      const bool tap_ok = pass == ConvPass::kForward ? tap_major_forward(s.C, s.K)
                          : pass == ConvPass::kBackwardData
                              ? tap_major_backward_data(s.stride, s.C, s.K)
                              : tap_major_weight_grad(s.C, all_tiles[t]);
      const bool with_nhwc = nhwc_left;
      nhwc_left = false;
      for (int splits : {1, 3, kt})
        for (int order = 0; order < 3; ++order) {
          const bool tap = order > 0, nhwc = order == 2;
          if ((tap && !tap_ok) || (nhwc && !with_nhwc)) continue;
          const ConvPlan p = make_conv_plan(s, pass, all_tiles[t], splits, tap, nhwc);
          SCOPED_TRACE(str("pass ", int(pass), " tile ", tile_names[t], " splits ", p.splits,
                           " tps ", p.tps, " tap ", tap, " nhwc ", nhwc));
          if (pass == ConvPass::kForward) {
            DevArray y(dy.size(), misalign);
            y.upload(std::vector<float>(dy.size(), kNaN), kGuard);
            conv_forward_planned(s, p, dx_in->ptr(), dw_in->ptr(), db_in->ptr(), y.ptr());
            finish("planned forward");
            EXPECT_TRUE(matches(y.payload(), want_y));
            EXPECT_TRUE(y.guards_intact(kGuard));
            // with an activation (the epilogue, or the split sum's): every kind
            const std::vector<float> plain = y.payload();
            for (const Activation& act : epilogue_activations(slopes_in->ptr())) {
              SCOPED_TRACE("epilogue " + act_name(act));
              DevArray ya(dy.size(), misalign);
              ya.upload(std::vector<float>(dy.size(), kNaN), kGuard);
              conv_forward_planned(s, p, dx_in->ptr(), dw_in->ptr(), db_in->ptr(), ya.ptr(), act);
              finish("planned forward with an activation");
              EXPECT_TRUE(act_of(plain, ya.payload(), act, slopes, size_t(s.P) * s.Q, size_t(s.K)));
              if (act.kind == ActKind::kRelu) {
                EXPECT_TRUE(relu_of(plain, ya.payload()));
              }
              EXPECT_TRUE(ya.guards_intact(kGuard));
            }
          } else if (pass == ConvPass::kBackwardData) {
            DevArray dx(x.size(), misalign);
            dx.upload(std::vector<float>(x.size(), kNaN), kGuard);
            conv_backward_data_planned(s, p, ddy_in->ptr(), dw_in->ptr(), dx.ptr());
            finish("planned backward_data");
            EXPECT_TRUE(matches(dx.payload(), want_dx));
            EXPECT_TRUE(dx.guards_intact(kGuard));
          } else {
            DevArray dw(w.size(), misalign);
            dw.upload(dw0, kGuard);
            conv_weight_grad_planned(s, p, dx_in->ptr(), ddy_in->ptr(), dw.ptr());
            finish("planned weight gradient");
            EXPECT_TRUE(matches(dw.payload(), want_dw));
            EXPECT_TRUE(dw.guards_intact(kGuard));
            if (bias_column_fits(s, p)) {  // db as the GEMM's column of ones
              DevArray dw2(w.size(), misalign), db2(b.size(), misalign);
              dw2.upload(dw0, kGuard);
              db2.upload(b, kGuard);
              conv_weight_grad_planned(s, p, dx_in->ptr(), ddy_in->ptr(), dw2.ptr(), db2.ptr());
              finish("planned weight gradient with the bias column");
              EXPECT_TRUE(matches(dw2.payload(), want_dw));
              EXPECT_TRUE(matches(db2.payload(), want_db));
              EXPECT_TRUE(dw2.guards_intact(kGuard));
              EXPECT_TRUE(db2.guards_intact(kGuard));
              ++bias_columns;
            } else {
              EXPECT_THROW(conv_weight_grad_planned(s, p, dx_in->ptr(), ddy_in->ptr(), dw.ptr(),
                                                    db_in->ptr()),
                           RuntimeError);
            }
          }
        }
    }
  }
  // C·R·S not a multiple of 16: some split plan has room for the bias column.
  // (On tensor cores never: the bias gradient stays an FP32 reduction.)
  if ((s.C * s.R * s.S) % 16 != 0 && conv_ktiles(s, ConvPass::kWeightGrad) > 1 && only.empty())
    EXPECT_EQ(bias_columns > 0, g_products == Precision::kFp32);
}

const std::vector<ConvCase> kPlannedCases = {
    {2, 16, 9, 11, 24, 3, 3, 1, 1},   // both passes tap-major; M = 198
    {1, 8, 7, 5, 12, 5, 5, 1, 2},     // 5×5: forward tap-major (K = 12), backward_data not
    {2, 24, 10, 9, 16, 3, 3, 2, 1},   // stride 2: forward tap-major only
    {3, 32, 6, 6, 40, 1, 1, 1, 0},    // 1×1, both tap-major
    {1, 40, 5, 7, 8, 2, 3, 1, 0},     // 2×3, pad 0, both tap-major
    {2, 8, 12, 12, 136, 3, 3, 1, 1},  // N = 136: two 128-wide column tiles
    {1, 5, 6, 7, 9, 3, 3, 1, 1},      // neither (C = 5, K = 9)
};

TEST(GpuImplicitPlanned, EveryTileSplitAndOrder) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 7000;
  for (const ConvCase& cc : kPlannedCases) check_planned(cc, seed++);
  check_planned({2, 16, 9, 11, 24, 3, 3, 1, 1}, seed++, /*misalign=*/1);
}

// The wide engine's territory: long reductions, C = 128 / 256 (the weight
// gradient's tap-major columns on every tile), M = 2·13·11 = 286 (a partial
// 256-row tile), N = 200 and 136 (partial 128- and 256-wide column tiles),
// stride 2 (forward tap-major, backward_data channel-major), batch 1.
TEST(GpuImplicitPlanned, WideTilesLongReductions) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 7100;
  for (const ConvCase& cc : std::vector<ConvCase>{
           {2, 128, 13, 11, 200, 3, 3, 1, 1},  // 144 / 225 / 36 k-tiles
           {1, 256, 9, 10, 136, 3, 3, 1, 1},   // 288 / 153 / 12 k-tiles
           {1, 128, 11, 9, 64, 3, 3, 2, 1},    // stride 2: P×Q = 6×5
       })
    check_planned(cc, seed++);
  check_planned({1, 128, 6, 7, 24, 3, 3, 1, 1}, seed++, /*misalign=*/1);
}

// The wide engine on small problems, for compute-sanitizer (scripts/gpu-check
// sanitize runs GpuImplicit*Small*): every wide tile, both orders, split and
// not, one block or a few, reductions shorter and longer than the 4-stage ring,
// the fused ReLU and the bias column.
TEST(GpuImplicitPlanned, WideTilesSmall) {
  HPMC_REQUIRE_GPU();
  using gpu::implicit_detail::Tile;
  const std::vector<Tile> wide = {Tile::kWN, Tile::kWM, Tile::kWQ, Tile::kWL};
  check_planned({1, 16, 5, 6, 12, 3, 3, 1, 1}, 7200, 0, wide);   // 18 / 14 / 4 k-tiles
  check_planned({1, 128, 3, 4, 8, 3, 3, 1, 1}, 7201, 0, wide);   // C = 128: tap-major dw
  check_planned({1, 5, 9, 7, 20, 3, 3, 1, 1}, 7202, 0, wide);    // C·R·S = 45: bias column
}

// The forced plans are checked: tap-major where it does not apply, and slices
// rounded so that none is empty.
TEST(GpuImplicitPlanned, PlansAreChecked) {
  using namespace gpu::implicit_detail;
  const Conv2dShape s = make_conv2d_shape(2, 5, 8, 8, 12, 3, 3, 1, 1);  // C = 5
  EXPECT_THROW(make_conv_plan(s, ConvPass::kForward, Tile::kL, 1, true), RuntimeError);
  EXPECT_THROW(make_conv_plan(s, ConvPass::kWeightGrad, Tile::kL, 1, true), RuntimeError);
  const Conv2dShape t = make_conv2d_shape(2, 8, 8, 8, 12, 3, 3, 2, 1);  // stride 2
  EXPECT_NO_THROW(make_conv_plan(t, ConvPass::kForward, Tile::kL, 1, true));
  EXPECT_THROW(make_conv_plan(t, ConvPass::kBackwardData, Tile::kL, 1, true), RuntimeError);
  const ConvPlan p = make_conv_plan(s, ConvPass::kForward, Tile::kS, 5, false);  // 6 k-tiles
  EXPECT_EQ(p.tps, 2);
  EXPECT_EQ(p.splits, 3);
}

// ---- tensor cores: training.precision tf32 and bf16 (implicit_gemm_tc.cuh) ----------------
//
// The checks above in each tensor-core precision (the header says how the
// references round): every tile's stand-in with split-K and both GEMM_K
// orders, the wide tiles' shapes, the automatic plans on odd sizes (batch 1,
// 1, 3 and 5 channels, strides, 5×5, 1×1), the CIFAR autoencoder's layers
// (their thin passes stay FP32), no bias and misaligned arrays, identical
// bits on a second run, and the plain GEMM with every transpose, padding and
// the large products (gemm_tc.h).
class GpuImplicitTc : public ::testing::TestWithParam<Precision> {};

TEST_P(GpuImplicitTc, EveryTileSplitAndOrder) {
  HPMC_REQUIRE_GPU();
  const TensorCores tc(GetParam());
  uint64_t seed = 17000;
  for (const ConvCase& cc : kPlannedCases) check_planned(cc, seed++);
  check_planned({1, 128, 11, 9, 64, 3, 3, 2, 1}, seed++);  // stride 2, C = 128
  check_planned({2, 16, 9, 11, 24, 3, 3, 1, 1}, seed++, /*misalign=*/1);
  using gpu::implicit_detail::Tile;
  check_planned({2, 128, 13, 11, 200, 3, 3, 1, 1}, seed++, 0, {Tile::kWN, Tile::kWM, Tile::kWQ});
  // bf16's channels-last kernels: forward and backward_data with partial tiles
  // along M (126) and N (64); the weight gradient with 126 pixels, K = 96.
  check_planned({2, 32, 7, 9, 64, 3, 3, 1, 1}, seed++, 0, {Tile::kL});
  check_planned({2, 128, 7, 9, 96, 3, 3, 1, 1}, seed++, 0, {Tile::kL});
}

// bf16's channels-last kernels (implicit_nhwc_kernels.cuh) against the
// FP32-stage engine on the same plan: the same roundings and mma sequence, so
// the same bits wherever the slices' boundaries agree (one slice, or tps % 4
// == 0) and, in the weight gradient, the pixels come in whole 16s — on both
// main loops of the forward and backward_data (ldmatrix and mma.sync; wgmma
// where it runs: its sums of 16 products are mma.sync's); against
// the double reference everywhere; with the forward's epilogues (bias, ReLU,
// any activation, split sums) and the weight gradient added into dw; batch
// 1, odd sizes, partial 128-row and 128-column tiles, 5×5, stride 2 (no
// backward_data there), CIFAR's conv2. Their plans are checked, and refused
// outside bf16.
TEST_P(GpuImplicitTc, ChannelsLastKernelMatchesTheEngine) {
  HPMC_REQUIRE_GPU();
  if (GetParam() != Precision::kBf16) GTEST_SKIP() << "the channels-last kernel is bf16's";
  using namespace gpu::implicit_detail;
  const TensorCores tc(GetParam());
  const ConvCase cases[] = {{2, 64, 16, 16, 96, 3, 3, 1, 1},  {1, 32, 5, 7, 160, 3, 3, 1, 1},
                            {3, 96, 9, 6, 32, 5, 5, 1, 2},    {2, 32, 11, 13, 64, 3, 3, 2, 1},
                            {4, 256, 16, 16, 128, 3, 3, 1, 1}, {1, 128, 5, 7, 96, 3, 3, 1, 1},
                            {2, 256, 11, 13, 32, 3, 3, 2, 1}, {3, 128, 8, 8, 160, 5, 5, 1, 2}};
  uint64_t seed = 17600;
  int same_bits_runs = 0;
  for (const int wg : {0, 1}) {  // ldmatrix and mma.sync, then wgmma where it runs
    const ScopedNhwcWgmma loop(wg);
    if (wg && !nhwc_wgmma()) {
      std::printf("  wgmma main loop: not run here (needs sm_90a code on a 9.0 device)\n");
      continue;
    }
    SCOPED_TRACE(wg ? "wgmma" : "mma.sync");
    for (const ConvCase& cc : cases) {
      const Conv2dShape s = cc.shape();
      SCOPED_TRACE(describe(s));
      Rng rng(seed++);
      const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
      const std::vector<float> w = random_floats(s.weight_count(), rng);
      const std::vector<float> b = random_floats(size_t(s.K), rng);
      const std::vector<float> dy = random_floats(size_t(s.N) * s.out_sample(), rng);
      auto x_in = input(x), w_in = input(w), b_in = input(b), dy_in = input(dy);
      const std::vector<double> want_y = ref_forward(s, operands(x), operands(w), &b);
      const std::vector<double> want_dx = ref_backward_data(s, operands(dy), operands(w));
      const std::vector<float> dw0 = random_floats(s.weight_count(), rng);
      std::vector<double> want_dw = ref_weight_grad(s, operands(x), operands(dy));
      for (size_t i = 0; i < want_dw.size(); ++i) want_dw[i] += dw0[i];
      for (ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kWeightGrad}) {
        const bool fwd = pass == ConvPass::kForward;
        const bool applies = fwd ? nhwc_forward(s.C, s.K)
                             : pass == ConvPass::kBackwardData
                                 ? nhwc_backward_data(s.stride, s.C, s.K)
                                 : nhwc_weight_grad(s.C, s.K);
        EXPECT_EQ(plan_conv(s, pass).nhwc, applies);
        if (!applies) {
          EXPECT_THROW(make_conv_plan(s, pass, Tile::kL, 1, true, true), RuntimeError);
          continue;
        }
        EXPECT_THROW(make_conv_plan(s, pass, Tile::kL, 1, false, true), RuntimeError);
        if (pass == ConvPass::kWeightGrad) {
          const bool whole16 = (long long)s.N * s.P * s.Q % 16 == 0;
          for (int splits : {1, 2, 3, 7}) {
            const ConvPlan p0 = make_conv_plan(s, pass, Tile::kL, splits, true, false);
            const ConvPlan p1 = make_conv_plan(s, pass, Tile::kL, splits, true, true);
            SCOPED_TRACE(str("weight gradient splits ", p1.splits, " tps ", p1.tps));
            DevArray d0(w.size()), d1(w.size());
            d0.upload(dw0, kGuard);
            d1.upload(dw0, kGuard);
            conv_weight_grad_planned(s, p0, x_in->ptr(), dy_in->ptr(), d0.ptr());
            conv_weight_grad_planned(s, p1, x_in->ptr(), dy_in->ptr(), d1.ptr());
            finish("channels-last weight gradient");
            EXPECT_TRUE(d1.guards_intact(kGuard));
            const std::vector<float> got = d1.payload(), eng = d0.payload();
            EXPECT_TRUE(matches(got, want_dw));
            if (whole16 && (p1.splits == 1 || p1.tps % 4 == 0)) {
              EXPECT_EQ(0, std::memcmp(got.data(), eng.data(), got.size() * 4))
                  << "not the engine's bits";
              ++same_bits_runs;
            }
          }
          const ConvPlan p1 = make_conv_plan(s, pass, Tile::kL, 1, true, true);
          const ScopedPrecision fp32(Precision::kFp32);
          DevArray d(w.size());
          EXPECT_THROW(conv_weight_grad_planned(s, p1, x_in->ptr(), dy_in->ptr(), d.ptr()),
                       RuntimeError);
          continue;
        }
        const size_t out_size = fwd ? dy.size() : x.size();
        for (int splits : {1, 2, 3, 5}) {
          const ConvPlan p0 = make_conv_plan(s, pass, Tile::kL, splits, true, false);
          const ConvPlan p1 = make_conv_plan(s, pass, Tile::kL, splits, true, true);
          SCOPED_TRACE(str(fwd ? "forward" : "backward_data", " splits ", p1.splits, " tps ",
                           p1.tps));
          const bool same_slices = p1.splits == 1 || p1.tps % 4 == 0;
          for (const Activation& act :
               {Activation::none(), Activation::relu(), Activation::tanh()}) {
            if (!fwd && !act.is_none()) continue;
            DevArray o0(out_size), o1(out_size);
            o0.upload(std::vector<float>(out_size, kNaN), kGuard);
            o1.upload(std::vector<float>(out_size, kNaN), kGuard);
            if (fwd) {
              conv_forward_planned(s, p0, x_in->ptr(), w_in->ptr(), b_in->ptr(), o0.ptr(), act);
              conv_forward_planned(s, p1, x_in->ptr(), w_in->ptr(), b_in->ptr(), o1.ptr(), act);
            } else {
              conv_backward_data_planned(s, p0, dy_in->ptr(), w_in->ptr(), o0.ptr());
              conv_backward_data_planned(s, p1, dy_in->ptr(), w_in->ptr(), o1.ptr());
            }
            finish("channels-last pass");
            EXPECT_TRUE(o1.guards_intact(kGuard));
            const std::vector<float> got = o1.payload(), eng = o0.payload();
            if (act.is_none()) EXPECT_TRUE(matches(got, fwd ? want_y : want_dx));
            if (same_slices) {
              EXPECT_EQ(0, std::memcmp(got.data(), eng.data(), got.size() * 4))
                  << "not the engine's bits (" << act_name(act) << ")";
              ++same_bits_runs;
            }
            if (act.kind == ActKind::kRelu) {
              DevArray plain(out_size);
              conv_forward_planned(s, p1, x_in->ptr(), w_in->ptr(), b_in->ptr(), plain.ptr());
              finish("channels-last forward, no activation");
              EXPECT_TRUE(relu_of(plain.payload(), got));
            }
          }
        }
        // Refused outside bf16, with one line.
        const ConvPlan p1 = make_conv_plan(s, pass, Tile::kL, 1, true, true);
        const ScopedPrecision fp32(Precision::kFp32);
        DevArray o(out_size);
        if (fwd)
          EXPECT_THROW(conv_forward_planned(s, p1, x_in->ptr(), w_in->ptr(), b_in->ptr(), o.ptr()),
                       RuntimeError);
        else
          EXPECT_THROW(conv_backward_data_planned(s, p1, dy_in->ptr(), w_in->ptr(), o.ptr()),
                       RuntimeError);
      }
    }
  }
  EXPECT_GT(same_bits_runs, 20);
}

// Small, for compute-sanitizer (scripts/gpu-check sanitize): every tile's
// stand-in on one or a few blocks, split and not, both orders, the bias column;
// in bf16 the channels-last kernels on ldmatrix and on wgmma.
TEST_P(GpuImplicitTc, SmallPlans) {
  HPMC_REQUIRE_GPU();
  const TensorCores tc(GetParam());
  check_planned({1, 16, 5, 6, 12, 3, 3, 1, 1}, 17050);
  check_planned({1, 5, 9, 7, 20, 3, 3, 1, 1}, 17051);
  check_gemm(false, true, 37, 45, 29, true, 17052, 3, 5, 3);
  // bf16: the channels-last forward and backward_data on one block each
  // (K = 40: a partial column tile), on both main loops
  for (const int wg : {0, 1}) {
    const gpu::implicit_detail::ScopedNhwcWgmma loop(wg);
    check_planned({1, 32, 5, 7, 40, 3, 3, 1, 1}, 17053 + wg);
  }
}

TEST_P(GpuImplicitTc, AutomaticPlansOnOddShapes) {
  HPMC_REQUIRE_GPU();
  const TensorCores tc(GetParam());
  check_convs({{1, 1, 1, 1, 1, 1, 1, 1, 0},
               {2, 5, 11, 13, 7, 3, 3, 2, 2},
               {3, 2, 8, 8, 9, 4, 4, 2, 2},
               {2, 16, 7, 9, 33, 1, 1, 1, 0},
               {3, 130, 5, 5, 20, 1, 1, 1, 0},
               {2, 3, 12, 12, 10, 5, 5, 1, 2},
               {1, 32, 16, 16, 64, 3, 3, 1, 1},
               {1, 3, 32, 32, 16, 3, 3, 1, 1},
               {4, 3, 61, 67, 250, 3, 3, 1, 1},
               {1, 32, 121, 121, 256, 3, 3, 1, 1}},
              17100);
  check_convs(kCifarCases, 17200);
  check_conv({2, 5, 8, 8, 12, 3, 3, 1, 1}, 17300, /*bias=*/false);
  check_conv({2, 4, 10, 12, 130, 3, 3, 1, 1}, 17301, /*bias=*/true, /*misalign=*/1);
  expect_deterministic({2, 256, 16, 16, 128, 3, 3, 1, 1}, 17302, "tensor-core conv2d");
  expect_deterministic({2, 60, 23, 23, 250, 3, 3, 1, 1}, 17303, "tensor-core conv2d");
}

TEST_P(GpuImplicitTc, Gemm) {
  HPMC_REQUIRE_GPU();
  const TensorCores tc(GetParam());
  uint64_t seed = 17400;
  for (const Mnk& s : kGemmSizes)
    for (int t = 0; t < 4; ++t)
      for (int acc = 0; acc < 2; ++acc) check_gemm(t & 1, t & 2, s.m, s.n, s.k, acc, seed++);
  for (int t = 0; t < 4; ++t) check_gemm(t & 1, t & 2, 2000, 1100, 37, t == 3, seed++);
  for (int t = 0; t < 4; ++t)
    check_gemm(t & 1, t & 2, 130, 70, 19, t & 1, seed++, 3, 5, 3);  // odd leading dimensions
  check_gemm(false, true, 70, 68, 21, true, seed++, 0, 0, 0, /*misalign=*/1);
  // Past the large-product rule (gemm_large.h): the tensor-core engine, gemm_tc.h.
  check_gemm(false, true, 600, 520, 515, false, seed++);
  check_gemm(true, false, 520, 600, 515, true, seed++);
}

// The FP32 path is bit for bit the same with and without a scope (fp32 is
// the default), and a tensor-core precision changes the bits.
TEST_P(GpuImplicitTc, Fp32ScopeChangesNothing) {
  HPMC_REQUIRE_GPU();
  const ConvCase cc{2, 16, 9, 11, 24, 3, 3, 1, 1};
  const Conv2dShape s = cc.shape();
  Rng rng(17500);
  const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
  const std::vector<float> w = random_floats(s.weight_count(), rng);
  auto dx_in = input(x), dw_in = input(w);
  std::vector<float> out[3];
  for (int run = 0; run < 3; ++run) {
    std::unique_ptr<ScopedPrecision> scope;
    if (run == 1) scope = std::make_unique<ScopedPrecision>(Precision::kFp32);
    if (run == 2) scope = std::make_unique<ScopedPrecision>(GetParam());
    DevArray y(size_t(s.N) * s.out_sample());
    y.upload(std::vector<float>(y.size(), kNaN), kGuard);
    imp::conv2d_forward(s, dx_in->ptr(), dw_in->ptr(), nullptr, y.ptr());
    finish("conv2d_forward (scopes)");
    out[run] = y.payload();
  }
  EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4));
  EXPECT_NE(0, std::memcmp(out[0].data(), out[2].data(), out[0].size() * 4))
      << "the tensor-core precision changed no bit: its kernels did not run";
  EXPECT_EQ(current_precision(), Precision::kFp32);
}

// implicit::SharedDy (conv2d_kernels.h): in bf16, a layer's weight gradient
// and input gradient with one NHWC copy of dy give the bits of the two passes
// converting it each (a plain convolution and the upsample fold); after the
// scope ends, new contents at the same address are read afresh; inside one,
// another dy is converted, not mistaken for the first; a second scope on the
// thread is refused.
TEST(GpuImplicitSharedDy, OneConversionTheSameBits) {
  HPMC_REQUIRE_GPU();
  const TensorCores tc(Precision::kBf16);
  Rng rng(17900);
  const Conv2dShape cs = make_conv2d_shape(2, 128, 9, 7, 64, 3, 3, 1, 1);
  const Conv2dShape us = make_conv2d_shape(2, 128, 10, 6, 96, 3, 3, 1, 1);  // folded: x 5×3
  for (const bool fold : {false, true}) {
    SCOPED_TRACE(fold ? "upsample fold" : "convolution");
    const Conv2dShape& s = fold ? us : cs;
    namespace det = gpu::implicit_detail;
    for (det::ConvPass pass : {det::ConvPass::kWeightGrad, det::ConvPass::kBackwardData})
      ASSERT_TRUE((fold ? det::plan_upconv(s, pass) : det::plan_conv(s, pass)).nhwc);
    const size_t xn = size_t(s.N) * s.C * (fold ? s.H * s.W / 4 : s.H * s.W);
    const size_t yn = size_t(s.N) * s.out_sample();
    const std::vector<float> x = random_floats(xn, rng), w = random_floats(s.weight_count(), rng);
    const std::vector<float> dy1 = random_floats(yn, rng), dy2 = random_floats(yn, rng);
    auto x_in = input(x), w_in = input(w), dy_a = input(dy1), dy_b = input(dy2);
    // dw (from zero) and dx of dy, with or without a scope around both passes
    const auto passes = [&](const float* dy, std::vector<float>& dw, std::vector<float>& dx) {
      DevArray d_w(w.size()), d_x(xn);
      d_w.upload(std::vector<float>(w.size(), 0.f), kGuard);
      d_x.upload(std::vector<float>(xn, kNaN), kGuard);
      if (fold) {
        imp::upconv_backward_params(s, x_in->ptr(), dy, d_w.ptr(), nullptr);
        imp::upconv_backward_data(s, dy, w_in->ptr(), nullptr, d_x.ptr());
      } else {
        imp::conv2d_backward_params(s, x_in->ptr(), dy, d_w.ptr(), nullptr);
        imp::conv2d_backward_data(s, dy, w_in->ptr(), d_x.ptr());
      }
      finish("backward passes");
      dw = d_w.payload(), dx = d_x.payload();
    };
    const auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
    };
    std::vector<float> dw1, dx1, dw2, dx2, sw, sx;
    passes(dy_a->ptr(), dw1, dx1);  // no scope: each pass converts dy
    passes(dy_b->ptr(), dw2, dx2);
    ASSERT_FALSE(same(dx1, dx2));
    {
      const imp::SharedDy shared;
      EXPECT_THROW(imp::SharedDy{}, RuntimeError);
      passes(dy_a->ptr(), sw, sx);
      EXPECT_TRUE(same(sw, dw1) && same(sx, dx1)) << "one conversion changed the bits";
      passes(dy_b->ptr(), sw, sx);  // another dy in the same scope
      EXPECT_TRUE(same(sw, dw2) && same(sx, dx2)) << "the first dy's copy was read";
    }
    dy_a->upload(dy2, kNaN);  // new contents at the first address
    {
      const imp::SharedDy shared;
      passes(dy_a->ptr(), sw, sx);
      EXPECT_TRUE(same(sw, dw2) && same(sx, dx2)) << "a copy outlived its scope";
    }
  }
}

// implicit::KeepInput (conv2d_kernels.h): in bf16, a forward inside one
// converts x into the layer's InputCopy and a weight gradient inside one on
// the same x reads that copy: the bits of the passes converting x each (a
// plain convolution and the upsample fold). The copy is what the weight
// gradient reads (x changed after the forward is not seen: why a layer must
// not change it); another x is converted, not mistaken for the copy; a
// second scope on the thread is refused; input_copy_bytes counts the copy in
// bf16 only.
TEST(GpuImplicitKeepInput, OneConversionTheSameBits) {
  HPMC_REQUIRE_GPU();
  const TensorCores tc(Precision::kBf16);
  Rng rng(17950);
  const Conv2dShape cs = make_conv2d_shape(3, 128, 9, 7, 96, 3, 3, 1, 1);
  const Conv2dShape us = make_conv2d_shape(2, 128, 10, 6, 64, 3, 3, 1, 1);  // folded: x 5×3
  for (const bool fold : {false, true}) {
    SCOPED_TRACE(fold ? "upsample fold" : "convolution");
    const Conv2dShape& s = fold ? us : cs;
    namespace det = gpu::implicit_detail;
    for (det::ConvPass pass : {det::ConvPass::kForward, det::ConvPass::kWeightGrad})
      ASSERT_TRUE((fold ? det::plan_upconv(s, pass) : det::plan_conv(s, pass)).nhwc);
    const size_t xn = size_t(s.N) * s.C * (fold ? s.H * s.W / 4 : s.H * s.W);
    const size_t yn = size_t(s.N) * s.out_sample();
    EXPECT_EQ(imp::input_copy_bytes(s, fold, Precision::kBf16), xn * 2);
    EXPECT_EQ(imp::input_copy_bytes(s, fold, Precision::kFp32), 0u);
    const std::vector<float> x1 = random_floats(xn, rng), x2 = random_floats(xn, rng);
    const std::vector<float> w = random_floats(s.weight_count(), rng);
    const std::vector<float> b = random_floats(size_t(s.K), rng), dy = random_floats(yn, rng);
    auto x_a = input(x1), x_b = input(x2), w_in = input(w), b_in = input(b), dy_in = input(dy);
    const auto forward = [&](const float* x) {
      DevArray y(yn);
      y.upload(std::vector<float>(yn, kNaN), kGuard);
      const Activation relu = Activation::relu();
      if (fold) imp::upconv_forward(s, x, w_in->ptr(), b_in->ptr(), y.ptr(), relu);
      else imp::conv2d_forward_act(s, x, w_in->ptr(), b_in->ptr(), y.ptr(), relu);
      finish("forward");
      return y.payload();
    };
    const auto wgrad = [&](const float* x) {
      DevArray d_w(w.size());
      d_w.upload(std::vector<float>(w.size(), 0.f), kGuard);
      if (fold) imp::upconv_backward_params(s, x, dy_in->ptr(), d_w.ptr(), nullptr);
      else imp::conv2d_backward_params(s, x, dy_in->ptr(), d_w.ptr(), nullptr);
      finish("weight gradient");
      return d_w.payload();
    };
    const auto same = [](const std::vector<float>& a, const std::vector<float>& c) {
      return a.size() == c.size() && std::memcmp(a.data(), c.data(), a.size() * 4) == 0;
    };
    const std::vector<float> y1 = forward(x_a->ptr()), dw1 = wgrad(x_a->ptr());  // no scope
    const std::vector<float> dw2 = wgrad(x_b->ptr());
    ASSERT_FALSE(same(dw1, dw2));
    imp::InputCopy copy;
    {
      const imp::KeepInput keep(copy);
      EXPECT_THROW(imp::KeepInput{copy}, RuntimeError);
      EXPECT_TRUE(same(forward(x_a->ptr()), y1)) << "the forward's output changed";
    }
    {
      const imp::KeepInput keep(copy);
      EXPECT_TRUE(same(wgrad(x_a->ptr()), dw1)) << "the kept copy changed the bits";
      EXPECT_TRUE(same(wgrad(x_b->ptr()), dw2)) << "another x was mistaken for the copy";
      x_a->upload(x2, kNaN);  // new contents at the kept address
      EXPECT_TRUE(same(wgrad(x_a->ptr()), dw1)) << "the weight gradient did not read the copy";
    }
    EXPECT_TRUE(same(wgrad(x_a->ptr()), dw2)) << "the copy was read outside a scope";
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuImplicitTc,
                         ::testing::Values(Precision::kTf32, Precision::kBf16),
                         [](const ::testing::TestParamInfo<Precision>& i) {
                           return std::string(precision_name(i.param));
                         });

// ---- thin convolutions: K ≤ 4 output channels (conv2d_thin.cu) ------------------------------
//
// choose_thin sends these to their own kernels: kFast3x3 for 3×3 / stride 1 /
// pad 1 / W % 4 == 0 / aligned, kFast5x5 for the same with 5×5 / pad 2,
// kGeneric otherwise (ImplicitPlan.ThinChoices
// pins the routing of the shapes below). The sizes straddle the fast kernels'
// tiles: 32 columns per warp (W = 4 … 100), 8 rows per forward block and per
// weight-gradient tile, 4 per backward-data warp (H = 1 … 33), 8 warps
// splitting C with 16-channel weight rounds in forward (C = 1 … 300), 32
// channels per backward-data block (C = 33).

TEST(GpuImplicitThin, Fast3x3Shapes) {
  HPMC_REQUIRE_GPU();
  check_convs(
      {
          {1, 1, 1, 4, 1, 3, 3, 1, 1},      // one row, one masked-off 32-column warp
          {3, 3, 3, 8, 2, 3, 3, 1, 1},      // odd batch, C < 8 warps
          {1, 5, 7, 28, 3, 3, 3, 1, 1},     // 28 columns: lane 7 masked
          {2, 17, 9, 32, 4, 3, 3, 1, 1},    // 9 rows: a second, nearly empty row tile
          {1, 3, 8, 36, 1, 3, 3, 1, 1},     // 36 columns: a second column tile of 4
          {3, 33, 5, 64, 3, 3, 3, 1, 1},    // two full column tiles, 33 channels
          {1, 300, 6, 12, 3, 3, 3, 1, 1},   // 38 channels per warp: 3 weight rounds
          {2, 256, 32, 32, 3, 3, 3, 1, 1},  // the CIFAR autoencoder's conv5
          {1, 7, 33, 100, 2, 3, 3, 1, 1},   // 33 rows, 4 column tiles, the last of 4
          {1, 2, 2, 16, 4, 3, 3, 1, 1},
      },
      6000);
}

TEST(GpuImplicitThin, GenericShapes) {
  HPMC_REQUIRE_GPU();
  check_convs(
      {
          {1, 1, 1, 1, 1, 3, 3, 1, 1},      // H = W = 1
          {3, 3, 3, 3, 2, 3, 3, 1, 1},      // W % 4 != 0
          {1, 5, 7, 7, 3, 3, 3, 1, 1},
          {2, 256, 7, 33, 3, 3, 3, 1, 1},   // C = 256, odd width
          {1, 3, 33, 33, 4, 3, 3, 2, 0},    // stride 2, pad 0
          {3, 5, 33, 7, 1, 3, 3, 2, 2},     // stride 2, pad 2
          {2, 3, 32, 32, 3, 3, 3, 1, 0},    // 3×3 pad 0 on a fast-sized image
          {1, 4, 16, 16, 3, 3, 3, 1, 2},    // pad 2
          {2, 6, 9, 11, 2, 5, 5, 1, 2},     // 5×5
          {1, 130, 5, 6, 3, 8, 8, 1, 3},    // 8×8 = kThinMaxTaps, 2 channels per round
          {2, 9, 7, 9, 4, 1, 1, 1, 0},      // 1×1
          {1, 3, 12, 13, 2, 2, 3, 3, 1},    // R ≠ S, stride 3
          {1, 1, 7, 3, 1, 3, 3, 2, 2},
          {1, 20, 70, 69, 3, 3, 3, 8, 1},   // stride 8: most pixels see no output
      },
      6100);
}

// kFast5x5: the same tiles with a 5×5 window (2 halo columns from each
// neighbour lane, 6 window rows, weight rounds of 5 channels). W = 4 … 100
// (lane 0 alone; 28: lane 7 masked; 36: a second column tile of one lane),
// H = 1 … 33, C = 1 … 300 (38 channels per warp: 8 rounds), every K; the
// 5×5 autoencoder's last layer (256 → 3 at 32×32).
TEST(GpuImplicitThin, Fast5x5Shapes) {
  HPMC_REQUIRE_GPU();
  check_convs(
      {
          {1, 1, 1, 4, 1, 5, 5, 1, 2},      // one row, one lane: every halo is padding
          {3, 3, 3, 8, 2, 5, 5, 1, 2},      // odd batch, C < 8 warps, 2 lanes
          {1, 5, 7, 28, 3, 5, 5, 1, 2},     // 28 columns: lane 7 masked
          {2, 17, 9, 32, 4, 5, 5, 1, 2},    // 9 rows: a second, nearly empty row tile
          {1, 3, 8, 36, 1, 5, 5, 1, 2},     // 36 columns: a second column tile of 4
          {3, 33, 5, 64, 3, 5, 5, 1, 2},    // two full column tiles: halos across them
          {1, 300, 6, 12, 3, 5, 5, 1, 2},   // 38 channels per warp: 8 weight rounds
          {2, 256, 32, 32, 3, 5, 5, 1, 2},  // the 5×5 autoencoder's last layer
          {1, 7, 33, 100, 2, 5, 5, 1, 2},   // 33 rows, 4 column tiles, the last of 4
          {1, 2, 2, 16, 4, 5, 5, 1, 2},
      },
      6050);
}

// Just past the rule (K = 5), and 9×9 kernels (81 taps > kThinMaxTaps): the GEMM.
TEST(GpuImplicitThin, PastTheRuleStaysOnTheGemm) {
  HPMC_REQUIRE_GPU();
  check_convs({{2, 256, 8, 32, 5, 3, 3, 1, 1}, {1, 3, 7, 33, 5, 3, 3, 2, 2},
               {1, 3, 11, 12, 3, 9, 9, 1, 4}},
              6200);
}

// Misaligned tensors leave kFast3x3 and kFast5x5 for kGeneric; no bias (db null).
TEST(GpuImplicitThin, NoBiasAndMisaligned) {
  HPMC_REQUIRE_GPU();
  check_conv({2, 7, 9, 32, 3, 3, 3, 1, 1}, 6300, /*bias=*/false);
  check_conv({2, 7, 9, 32, 3, 3, 3, 1, 1}, 6301, /*bias=*/true, /*misalign=*/1);
  check_conv({1, 5, 9, 11, 2, 3, 3, 2, 0}, 6302, /*bias=*/false, /*misalign=*/1);
  check_conv({2, 7, 9, 32, 3, 5, 5, 1, 2}, 6303, /*bias=*/false);
  check_conv({2, 7, 9, 32, 3, 5, 5, 1, 2}, 6304, /*bias=*/true, /*misalign=*/1);
}

// Batches whose weight gradient is split into many slices (kFast3x3: 64 images of
// 4 tiles over 2 channel groups → 64 slices; kGeneric: 65536 pixels) and a
// larger slice of the autoencoder's conv5.
TEST(GpuImplicitThin, ManySlices) {
  HPMC_REQUIRE_GPU();
  check_convs({{64, 8, 32, 32, 3, 3, 3, 1, 1},
               {64, 3, 32, 32, 2, 3, 3, 1, 2},
               {8, 256, 32, 32, 3, 3, 3, 1, 1},
               {64, 8, 32, 32, 3, 5, 5, 1, 2}},
              6400);
}

// Few input channels (1 ≤ C ≤ 4, K > 4, 3×3 stride 1 pad 1): the weight
// gradient runs on thin_input_wgrad_kernel (implicit_thin_input_kernels.cuh;
// in bf16 thin_input_wgrad_tc_kernel, held to the double reference on
// bf16-rounded x and dy, its bias gradient on the unrounded dy), forward and
// backward_data stay on the GEMM. Units of 32 pixels: one pixel
// (1×1), widths short of a unit (5, 7) and past one (33: a unit of one pixel;
// 65: three units), K short of (17), equal to (256) and past (300: a second,
// nearly empty block of 256 output channels) one block; batches up to 8 (64
// slices of 4 units). Every C from 1 to 4 (C = 4: 512 threads a block in
// fp32). fp32 and bf16; in bf16 the same shapes with a 5×5, pad-2 window
// (the tensor-core kernels' R = 5: 100 columns at C = 4), which fp32 runs on
// the GEMM.
TEST(GpuImplicitThinInput, WeightGradShapes) {
  HPMC_REQUIRE_GPU();
  for (Precision prec : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(precision_name(prec));
    const TensorCores tc(prec);
    const uint64_t s0 = prec == Precision::kFp32 ? 0 : 1000;
    check_convs(
        {
            {1, 1, 1, 1, 5, 3, 3, 1, 1},
            {2, 3, 7, 5, 17, 3, 3, 1, 1},
            {3, 2, 9, 33, 64, 3, 3, 1, 1},
            {1, 4, 5, 40, 300, 3, 3, 1, 1},
            {1, 3, 3, 65, 8, 3, 3, 1, 1},
            {2, 3, 32, 32, 256, 3, 3, 1, 1},   // the CIFAR autoencoder's conv1
            {4, 1, 28, 28, 16, 3, 3, 1, 1},    // the Fashion autoencoder's conv1
            {8, 3, 32, 32, 40, 3, 3, 1, 1},
        },
        6050 + s0);
    check_conv({2, 3, 11, 37, 24, 3, 3, 1, 1}, 6060 + s0, /*bias=*/false);
    check_conv({2, 4, 6, 32, 9, 3, 3, 1, 1}, 6061 + s0, /*bias=*/true, /*misalign=*/1);
    check_convs(
        {
            {1, 1, 1, 1, 5, 5, 5, 1, 2},
            {2, 3, 7, 5, 17, 5, 5, 1, 2},
            {3, 2, 9, 33, 64, 5, 5, 1, 2},
            {1, 4, 5, 40, 300, 5, 5, 1, 2},
            {1, 3, 3, 65, 8, 5, 5, 1, 2},
            {2, 3, 32, 32, 256, 5, 5, 1, 2},  // the sweep's 5×5 autoencoder's conv1
            {8, 1, 28, 28, 40, 5, 5, 1, 2},
        },
        6080 + s0);
    EXPECT_EQ(gpu::implicit_detail::thin_input_applies(3, 256, 5, 5, 1, 2,
                                                       prec == Precision::kBf16),
              prec == Precision::kBf16);
    check_conv({2, 3, 11, 37, 24, 5, 5, 1, 2}, 6090 + s0, /*bias=*/false);
    check_conv({2, 4, 6, 32, 9, 5, 5, 1, 2}, 6091 + s0, /*bias=*/true, /*misalign=*/1);
    uint64_t seed = 6070 + s0;
    for (const ConvCase& cc : std::vector<ConvCase>{{8, 3, 32, 32, 256, 3, 3, 1, 1},
                                                    {3, 2, 9, 33, 300, 3, 3, 1, 1},
                                                    {8, 3, 32, 32, 256, 5, 5, 1, 2},
                                                    {3, 4, 9, 33, 300, 5, 5, 1, 2}})
      expect_deterministic(cc, seed++, "few-input-channel conv2d (determinism)");
  }
}

// A device byte buffer of n bytes and 64 guard bytes after them.
class DevBytes {
 public:
  static constexpr size_t kTail = 64;
  static constexpr unsigned char kFill = 0xEE;
  explicit DevBytes(size_t n) : n_(n), mem_(gpu::allocate_shared(n + kTail)) {
    const std::vector<unsigned char> all(n + kTail, kFill);
    gpu::copy(mem_.get(), Device::kGPU, all.data(), Device::kCPU, all.size());
  }
  unsigned char* ptr() { return static_cast<unsigned char*>(mem_.get()); }
  std::vector<unsigned char> all() const {
    std::vector<unsigned char> v(n_ + kTail);
    gpu::copy(v.data(), Device::kCPU, mem_.get(), Device::kGPU, v.size());
    return v;
  }

 private:
  size_t n_;
  std::shared_ptr<void> mem_;
};

// The few-input-channel forward (thin_input_fwd_kernel: FP32 FMAs; in bf16
// thin_input_fwd_tc_kernel on tensor cores) matches the double reference (in
// bf16 on rounded operands, which an FP32 kernel would miss) and is, in fp32,
// the GEMM path's bits (the same chain over k = c·9 + r·3 + s), with and
// without the ReLU; and the same kernel with the
// 2×2 max pool in its stores (conv2d_forward_pool) gives bit for bit the
// MaxPool2D layer's output on that forward (the CPU's argmax: first maximum,
// first NaN), codes that name each window's choice, and, from the codes, the
// pool layer's backward (maxpool2x2_backward_codes against
// gpu::maxpool2d_backward on the formed output, with and without the ReLU's
// mask), and the weight gradient from the codes without that backward's
// output (conv2d_backward_params_pool: dw and db bit for bit those of
// conv2d_backward_params on it; refused where the codes' rows are not whole
// 4-byte words). Batch 1, C 1-4, K short of a block of 64 channels and past one, odd
// H and W (a last row or column no window covers: zero gradient), 2×2 (one
// window), misaligned outputs (scalar stores), batch 40 (the bf16 kernel's
// blocks of two quad rows; one at smaller grids); fp32 and bf16, and in bf16
// 5×5 windows (pad 2; in fp32 those are not conv_pool_applies').
TEST(GpuImplicitThinInput, ForwardWithPool) {
  HPMC_REQUIRE_GPU();
  const ConvCase cases[] = {{2, 3, 32, 32, 256, 3, 3, 1, 1},  // the CIFAR autoencoder's conv1
                            {1, 1, 7, 9, 5, 3, 3, 1, 1},    {3, 2, 10, 6, 70, 3, 3, 1, 1},
                            {1, 4, 5, 13, 17, 3, 3, 1, 1},  {2, 3, 2, 2, 65, 3, 3, 1, 1},
                            {4, 1, 28, 28, 16, 3, 3, 1, 1},  // the Fashion autoencoder's conv1
                            {1, 2, 9, 17, 33, 3, 3, 1, 1},   // odd, whole code words
                            {2, 3, 5, 40, 70, 3, 3, 1, 1},   // a second unit of 8 pixels
                            {2, 3, 32, 32, 256, 5, 5, 1, 2},  // the 5×5 autoencoder's conv1
                            {1, 1, 7, 9, 5, 5, 5, 1, 2},    {3, 4, 10, 6, 70, 5, 5, 1, 2},
                            {2, 2, 2, 2, 65, 5, 5, 1, 2},   {1, 3, 9, 17, 33, 5, 5, 1, 2},
                            // grids of two blocks an SM and more: in bf16 two quad rows a
                            // block (the others one)
                            {40, 3, 32, 32, 40, 3, 3, 1, 1}, {40, 2, 32, 32, 24, 5, 5, 1, 2}};
  uint64_t seed = 6080;
  for (Precision prec : {Precision::kFp32, Precision::kBf16}) {
    const TensorCores tc(prec);
    for (const ConvCase& cc : cases) {
      if (cc.R == 5 && prec != Precision::kBf16) {
        EXPECT_FALSE(imp::conv_pool_applies(cc.shape(), prec));
        continue;
      }
      for (bool relu : {true, false}) {
        for (size_t misalign : {size_t(0), size_t(1)}) {
          const Conv2dShape s = cc.shape();
          SCOPED_TRACE(describe(s) + (relu ? " relu" : "") + (misalign ? " misaligned" : "") +
                       " " + precision_name(prec) + " seed " + std::to_string(seed));
          ASSERT_TRUE(imp::conv_pool_applies(s, prec));
          Rng rng(seed++);
          const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
          const std::vector<float> w = random_floats(s.weight_count(), rng);
          const std::vector<float> b = random_floats(size_t(s.K), rng);
          auto dx_in = input(x), dw_in = input(w), db_in = input(b);
          const Activation act = relu ? Activation::relu() : Activation::none();
          const size_t outs = size_t(s.N) * s.out_sample();
          DevArray y(outs, misalign);
          y.upload(std::vector<float>(outs, kNaN), kGuard);
          imp::conv2d_forward_act(s, dx_in->ptr(), dw_in->ptr(), db_in->ptr(), y.ptr(), act);
          finish("conv2d_forward_act (few input channels)");
          const std::vector<float> plain = y.payload();
          EXPECT_TRUE(y.guards_intact(kGuard));
          {
            const bool tc = on_tensor_cores(s, Pass::kForward);
            EXPECT_EQ(tc, prec == Precision::kBf16);
            std::vector<double> ref = ref_forward(s, operands(x, tc), operands(w, tc), &b);
            if (relu)
              for (double& v : ref) v = v < 0.0 ? 0.0 : v;
            EXPECT_TRUE(matches(plain, ref)) << "forward against the double reference";
          }
          if (prec == Precision::kFp32) {
            DevArray yg(outs);
            yg.upload(std::vector<float>(outs, kNaN), kGuard);
            gpu::implicit_detail::conv_forward_planned(
                s, gpu::implicit_detail::plan_conv(s, gpu::implicit_detail::ConvPass::kForward),
                dx_in->ptr(), dw_in->ptr(), db_in->ptr(), yg.ptr(), act);
            finish("conv_forward_planned");
            const std::vector<float> gemm = yg.payload();
            size_t differ = 0;
            for (size_t i = 0; i < outs; ++i) differ += !same_bits(plain[i], gemm[i]);
            EXPECT_EQ(differ, 0u) << "of " << outs << " outputs differ from the GEMM path's";
          }

          const int oh = s.P / 2, ow = s.Q / 2;
          const size_t planes = size_t(s.N) * s.K, pooled = planes * oh * ow;
          DevArray yp(pooled, misalign);
          yp.upload(std::vector<float>(pooled, kNaN), kGuard);
          DevBytes code(pooled);
          imp::conv2d_forward_pool(s, dx_in->ptr(), dw_in->ptr(), db_in->ptr(), relu, yp.ptr(),
                                   code.ptr());
          finish("conv2d_forward_pool");
          const std::vector<float> got = yp.payload();
          const std::vector<unsigned char> codes = code.all();
          EXPECT_TRUE(yp.guards_intact(kGuard));
          for (size_t i = pooled; i < codes.size(); ++i)
            ASSERT_EQ(codes[i], DevBytes::kFill) << "guard byte " << i - pooled;
          size_t bad_y = 0, bad_code = 0, masked = 0;
          for (size_t p = 0; p < planes; ++p)
            for (int i = 0; i < oh; ++i)
              for (int j = 0; j < ow; ++j) {
                const float* plane = plain.data() + p * s.P * s.Q;
                const size_t at = maxpool2d_argmax(plane, s.Q, 2 * i, 2 * j, 2);
                const size_t o = (p * oh + i) * ow + j;
                const int pos = int(at / s.Q - 2 * i) * 2 + int(at % s.Q - 2 * j);
                const int want = pos | (plane[at] > 0.0f ? 0 : 4);
                bad_y += !same_bits(got[o], plane[at]);
                bad_code += codes[o] != want;
                masked += (want & 4) != 0;
              }
          EXPECT_EQ(bad_y, 0u) << "pooled outputs differ from the pool of the forward";
          EXPECT_EQ(bad_code, 0u) << "codes";
          if (relu) {
            EXPECT_GT(masked, 0u) << "no window without a positive value: the mask is untested";
          }

          // backward, from the codes and from the formed output
          const std::vector<float> dyp = random_floats(pooled, rng);
          auto dyp_in = input(dyp);
          for (bool mask : {relu, false}) {
            SCOPED_TRACE(mask ? "backward with the ReLU mask" : "backward");
            DevArray dxc(outs, misalign), dxl(outs);
            dxc.upload(std::vector<float>(outs, kNaN), kGuard);
            dxl.upload(std::vector<float>(outs, kNaN), kGuard);
            imp::maxpool2x2_backward_codes(s, code.ptr(), dyp_in->ptr(), mask, dxc.ptr());
            const Shape ys(s.N, s.K, s.P, s.Q);
            gpu::maxpool2d_backward(ys, PoolWindow{2, 2}, y.ptr(), dyp_in->ptr(), dxl.ptr(), mask);
            finish("maxpool2x2_backward_codes");
            const std::vector<float> a = dxl.payload(), c = dxc.payload();
            size_t differ = 0, nonzero = 0;
            for (size_t i = 0; i < outs; ++i) {
              differ += !same_bits(a[i], c[i]);
              nonzero += c[i] != 0.0f;
            }
            EXPECT_EQ(differ, 0u) << "of " << outs << " input-gradient elements differ";
            EXPECT_GT(nonzero, 0u);
            EXPECT_TRUE(dxc.guards_intact(kGuard));

            // the weight gradient from the codes, without the formed dx: the
            // same bits as conv2d_backward_params on it
            if (imp::conv_pool_wgrad_applies(s, prec)) {
              const std::vector<float> dw0 = random_floats(s.weight_count(), rng);
              const std::vector<float> db0 = random_floats(size_t(s.K), rng);
              DevArray dwa(dw0.size()), dba(db0.size()), dwb(dw0.size()), dbb(db0.size());
              dwa.upload(dw0, kGuard), dba.upload(db0, kGuard);
              dwb.upload(dw0, kGuard), dbb.upload(db0, kGuard);
              imp::conv2d_backward_params(s, dx_in->ptr(), dxc.ptr(), dwa.ptr(), dba.ptr());
              imp::conv2d_backward_params_pool(s, dx_in->ptr(), code.ptr(), dyp_in->ptr(), mask,
                                               dwb.ptr(), dbb.ptr());
              finish("conv2d_backward_params_pool");
              const std::vector<float> wa = dwa.payload(), wb = dwb.payload();
              const std::vector<float> ba = dba.payload(), bb = dbb.payload();
              size_t dw_differ = 0, db_differ = 0;
              for (size_t i = 0; i < wa.size(); ++i) dw_differ += !same_bits(wa[i], wb[i]);
              for (size_t i = 0; i < ba.size(); ++i) db_differ += !same_bits(ba[i], bb[i]);
              EXPECT_EQ(dw_differ, 0u) << "dw from the codes";
              EXPECT_EQ(db_differ, 0u) << "db from the codes";
              EXPECT_TRUE(dwb.guards_intact(kGuard));
              EXPECT_TRUE(dbb.guards_intact(kGuard));
            } else {
              EXPECT_THROW(imp::conv2d_backward_params_pool(s, dx_in->ptr(), code.ptr(),
                                                            dyp_in->ptr(), mask, nullptr, nullptr),
                           RuntimeError);
            }
            if (!relu) break;
          }
        }
      }
    }
  }
}

// Two runs give the same bits: every thin kernel sums in a fixed order.
TEST(GpuImplicitThin, Deterministic) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 6500;
  for (const ConvCase& cc : std::vector<ConvCase>{{16, 256, 32, 32, 3, 3, 3, 1, 1},
                                                  {3, 5, 33, 36, 4, 3, 3, 1, 1},
                                                  {8, 64, 17, 15, 3, 3, 3, 2, 1},
                                                  {1, 300, 20, 20, 1, 5, 5, 1, 2}}) {
    expect_deterministic(cc, seed++, "thin conv2d (determinism)");
  }
}

// y and dx start as +inf (check_conv poisons with NaN) and come back right;
// guards survive.
TEST(GpuImplicitThin, PoisonedOutputsFullyOverwritten) {
  HPMC_REQUIRE_GPU();
  const float poison = std::numeric_limits<float>::infinity();
  for (const ConvCase& cc : std::vector<ConvCase>{{3, 9, 13, 40, 3, 3, 3, 1, 1},
                                                  {2, 5, 13, 11, 4, 3, 3, 2, 2}}) {
    const Conv2dShape s = cc.shape();
    SCOPED_TRACE(describe(s));
    Rng rng(6600);
    const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
    const std::vector<float> w = random_floats(s.weight_count(), rng);
    const std::vector<float> dy = random_floats(size_t(s.N) * s.out_sample(), rng);
    auto dx_in = input(x), dw_in = input(w), ddy_in = input(dy);
    DevArray y(dy.size()), dx(x.size());
    y.upload(std::vector<float>(dy.size(), poison), kGuard);
    dx.upload(std::vector<float>(x.size(), poison), kGuard);
    imp::conv2d_forward(s, dx_in->ptr(), dw_in->ptr(), nullptr, y.ptr());
    imp::conv2d_backward_data(s, ddy_in->ptr(), dw_in->ptr(), dx.ptr());
    finish("thin conv2d (poison)");
    EXPECT_TRUE(matches(y.payload(), ref_forward(s, x, w, nullptr)));
    EXPECT_TRUE(matches(dx.payload(), ref_backward_data(s, dy, w)));
    EXPECT_TRUE(y.guards_intact(kGuard));
    EXPECT_TRUE(dx.guards_intact(kGuard));
  }
}

// backward_params adds: two calls give dw0 + 2·Δ, db0 + 2·Δb (both paths).
TEST(GpuImplicitThin, BackwardParamsAccumulates) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 6700;
  for (const ConvCase& cc : std::vector<ConvCase>{{2, 12, 16, 32, 3, 3, 3, 1, 1},
                                                  {3, 5, 7, 9, 2, 3, 3, 2, 0}}) {
    const Conv2dShape s = cc.shape();
    SCOPED_TRACE(describe(s));
    Rng rng(seed++);
    const std::vector<float> x = random_floats(size_t(s.N) * s.in_sample(), rng);
    const std::vector<float> dy = random_floats(size_t(s.N) * s.out_sample(), rng);
    const std::vector<float> dw0 = random_floats(s.weight_count(), rng);
    const std::vector<float> db0 = random_floats(size_t(s.K), rng);
    auto dx_in = input(x), ddy_in = input(dy);
    DevArray dw(dw0.size()), db(db0.size());
    dw.upload(dw0, kGuard);
    db.upload(db0, kGuard);
    for (int rep = 0; rep < 2; ++rep)
      imp::conv2d_backward_params(s, dx_in->ptr(), ddy_in->ptr(), dw.ptr(), db.ptr());
    finish("thin conv2d_backward_params (accumulate)");
    const std::vector<double> g = ref_weight_grad(s, x, dy), gb = ref_bias_grad(s, dy);
    std::vector<double> want(dw0.size()), want_db(db0.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = double(dw0[i]) + 2.0 * g[i];
    for (size_t i = 0; i < want_db.size(); ++i) want_db[i] = double(db0[i]) + 2.0 * gb[i];
    EXPECT_TRUE(matches(dw.payload(), want));
    EXPECT_TRUE(matches(db.payload(), want_db));
    EXPECT_TRUE(dw.guards_intact(kGuard));
    EXPECT_TRUE(db.guards_intact(kGuard));
  }
}

// C = 0: forward gives the bias alone, backward_params adds only db (dw is
// empty), backward_data has nothing to write.
TEST(GpuImplicitThin, NoInputChannels) {
  HPMC_REQUIRE_GPU();
  check_convs({{2, 0, 5, 8, 3, 3, 3, 1, 1}, {1, 0, 3, 3, 2, 3, 3, 2, 0}}, 6800);
}

// ---- host-only: the multiply-high division the kernels index with ---------------------------

TEST(ImplicitFastDiv, MatchesIntegerDivision) {
  using gpu::implicit_detail::FastDiv;
  std::vector<int> divisors;
  for (int d = 1; d <= 1100; ++d) divisors.push_back(d);
  for (int e = 11; e <= 30; ++e)
    for (int delta : {-1, 0, 1}) divisors.push_back((1 << e) + delta);
  for (int d : {2147483647, 1000003, 65521, 9 * 9, 32 * 32, 1073741789, 3 * 61 * 67})
    divisors.push_back(d);
  Rng rng(77);
  for (int d : divisors) {
    const FastDiv f(d);
    std::vector<int64_t> xs = {0,          1,          2,          d - 1,     d, int64_t(d) + 1,
                               2147483647, 2147483646, 1073741823, 1073741824};
    for (int i = 0; i < 300; ++i) xs.push_back(int64_t(rng.below(2147483648ull)));
    for (int i = 0; i < 50; ++i) {  // around multiples of d
      const int64_t q = int64_t(rng.below(uint64_t(2147483647 / d) + 1));
      for (int64_t delta : {-1, 0, 1}) xs.push_back(q * d + delta);
    }
    for (int64_t xv : xs) {
      if (xv < 0 || xv > 2147483647) continue;
      const int x = int(xv);
      int q, r;
      f.divmod(x, q, r);
      ASSERT_EQ(q, x / d) << x << " / " << d;
      ASSERT_EQ(r, x % d) << x << " % " << d;
    }
  }
}

// ---- host-only: the tile and split-K plans ------------------------------------------------------

// Every k-tile lies in exactly one non-empty slice, slices hold ≥ 8 k-tiles
// when there are several, and there are at most 64.
TEST(ImplicitPlan, SplitsCoverEveryTileOnce) {
  using namespace gpu::implicit_detail;
  for (long long M : {1, 3, 16, 64, 65, 128, 256, 1000})
    for (long long N : {1, 27, 64, 576, 1152, 2304, 100000})
      for (int kt : {1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 128, 256, 1000, 2048, 16384, 1 << 20}) {
        int splits = 0, tps = 0;
        choose_splits(M, N, kt, splits, tps);
        SCOPED_TRACE(str("M=", M, " N=", N, " ktiles=", kt, " -> splits=", splits, " tps=", tps));
        ASSERT_GE(splits, 1);
        ASSERT_LE(splits, kMaxSplits);
        ASSERT_GE(tps, 1);
        ASSERT_LT((long long)(splits - 1) * tps, kt);  // the last slice is not empty
        ASSERT_GE((long long)splits * tps, kt);        // every tile is covered
        if (splits > 1) ASSERT_GE(tps, kMinTilesPerSplit);
      }
}

// The choices the GPU tests above rely on, for an H100's 132 SMs (the
// ConvLargeTiles / GemmLargeTiles shapes reach the 128×128 and 128×64 tiles),
// and the CIFAR autoencoder's layers at batch 2, 64 and 128.
TEST(ImplicitPlan, TileChoices) {
  using namespace gpu::implicit_detail;
  const int sms = 132;
  EXPECT_EQ(choose_tile(1000, 1100, 1, sms), Tile::kL);          // GemmLargeTiles: 72 L blocks
  EXPECT_EQ(choose_tile(2000, 1100, 1, sms), Tile::kM);          // 144 L blocks, 288 M blocks
  EXPECT_EQ(choose_tile(2000, 2100, 1, sms), Tile::kM);          // 272 L: 3 on the busiest SM
  EXPECT_EQ(choose_tile(4 * 61 * 67, 250, 1, sms), Tile::kL);    // forward
  EXPECT_EQ(choose_tile(4 * 61 * 67, 3, 1, sms), Tile::kThinN);  // backward_data, C = 3
  EXPECT_EQ(choose_tile(3, 250 * 9, 15, sms), Tile::kThinM);     // weight grad, K = 3
  int splits = 0, tps = 0;
  choose_splits(250, 540, int(tiles(2 * 23 * 23, 8)), splits, tps);  // weight grad
  EXPECT_EQ(splits, 15);
  EXPECT_EQ(choose_tile(250, 540, splits, sms), Tile::kM);
  choose_out_splits(2 * 23 * 23, 250, int(tiles(60 * 9, 8)), splits, tps);  // its forward
  EXPECT_EQ(splits, 4);
  EXPECT_EQ(choose_tile(2 * 23 * 23, 250, splits, sms), Tile::kL);  // 72 blocks of 128×128
  choose_splits(128, 2304, int(tiles(2 * 16 * 16, 8)), splits, tps);  // 256→128 @16, batch 2
  EXPECT_EQ(splits, 8);
  EXPECT_EQ(choose_tile(128, 2304, splits, sms), Tile::kM);
  EXPECT_EQ(choose_tile(2 * 32 * 32, 256, 1, sms), Tile::kS);      // 3→256 @32, batch 2
  EXPECT_EQ(choose_tile(128 * 32 * 32, 256, 1, sms), Tile::kL);    // … batch 128
  EXPECT_EQ(choose_tile(128 * 32 * 32, 3, 1, sms), Tile::kThinN);  // 256→3 @32
  EXPECT_EQ(choose_tile(3, 2304, 1, sms), Tile::kThinM);           // its weight grad
  EXPECT_EQ(choose_tile(256, 27, 64, sms), Tile::kThinN);          // 3→256 weight grad
  EXPECT_EQ(choose_tile(20, 2304, 8, sms), Tile::kThinM);
  EXPECT_EQ(choose_tile(33, 33, 1, sms), Tile::kS);
  EXPECT_EQ(choose_tile(5, 9, 1, sms), Tile::kThinN);
  // The plain GEMM's split-K (choose_gemm_splits): only below one block per SM,
  // slices of at least 8 k-tiles, at most 16; the slices cover every k-tile once.
  choose_gemm_splits(10, 128, int(tiles(4096, 8)), 16, 128, splits, tps);  // 10-class dW, b4096
  EXPECT_EQ(splits, 16);
  EXPECT_EQ(tps, 32);
  choose_gemm_splits(16, 128, int(tiles(784, 8)), 16, 128, splits, tps);  // batch-16 forward
  EXPECT_EQ(splits, 11);  // 98 k-tiles: ⌊98/8⌋ = 12 wanted, 9 a slice
  EXPECT_EQ(tps, 9);
  EXPECT_GT(splits * tps, 97);
  EXPECT_LE((splits - 1) * tps, 97);
  choose_gemm_splits(4096, 4096, 512, 128, 128, splits, tps);  // 1024 blocks: no split
  EXPECT_EQ(splits, 1);
  choose_gemm_splits(37, 23, 0, 128, 16, splits, tps);  // k = 0
  EXPECT_EQ(splits, 1);
}

// bf16's channels-last kernels: a tap-major forward with C % 32 == 0, a
// tap-major backward_data with K % 32 == 0 (stride 1), a weight gradient with
// C % 128 == 0 and K % 32 == 0.
TEST(ImplicitPlan, ChannelsLastRule) {
  using namespace gpu::implicit_detail;
  EXPECT_TRUE(nhwc_forward(256, 128));
  EXPECT_TRUE(nhwc_forward(32, 4));
  EXPECT_FALSE(nhwc_forward(48, 64));   // 48 channels: k-tiles of 32 would cross taps
  EXPECT_FALSE(nhwc_forward(3, 256));   // not tap-major
  EXPECT_FALSE(nhwc_forward(64, 6));    // not tap-major (K % 4)
  EXPECT_TRUE(nhwc_backward_data(1, 256, 128));
  EXPECT_FALSE(nhwc_backward_data(1, 5, 64));     // C % 4: not tap-major
  EXPECT_FALSE(nhwc_backward_data(2, 256, 128));  // stride 2: not tap-major
  EXPECT_FALSE(nhwc_backward_data(1, 256, 48));
  EXPECT_FALSE(nhwc_backward_data(1, 256, 16));
  EXPECT_TRUE(nhwc_weight_grad(256, 128));
  EXPECT_TRUE(nhwc_weight_grad(128, 32));
  EXPECT_FALSE(nhwc_weight_grad(64, 128));   // a block's 128 columns would span two taps
  EXPECT_FALSE(nhwc_weight_grad(256, 48));
  EXPECT_FALSE(nhwc_weight_grad(0, 128));
}

// The CIFAR autoencoder at batch 64 (conv1 … conv4; conv5 is thin): which
// tile, how many slices and which GEMM_K order each pass runs with (the
// weight gradient's tap-major columns: its tile's BN divides C).
TEST(ImplicitPlan, CifarBatch64) {
  using namespace gpu::implicit_detail;
  struct Want {
    int C, HW, K;
    Tile fwd, dgrad, wgrad;
    int fwd_splits, dgrad_splits, wgrad_splits;
    bool tap;        // forward and backward_data tap-major (conv1: neither)
    bool wgrad_tap;  // backward_params' tap-major columns
  };
  const Want layers[] = {
      {3, 32, 256, Tile::kL, Tile::kThinN, Tile::kThinN, 1, 1, 64, false, false},  // conv1
      {256, 16, 128, Tile::kWL, Tile::kWL, Tile::kL, 2, 1, 14, true, true},         // conv2
      {128, 8, 128, Tile::kL, Tile::kL, Tile::kL, 4, 4, 29, true, true},            // conv3
      {128, 16, 256, Tile::kWL, Tile::kWL, Tile::kL, 1, 2, 14, true, true},         // conv4
  };
  for (const Want& l : layers) {
    SCOPED_TRACE(str("C=", l.C, " HW=", l.HW, " K=", l.K));
    const long long pix = 64ll * l.HW * l.HW;
    int splits = 0, tps = 0;
    choose_out_splits(pix, l.K, int(tiles(l.C * 9, 8)), splits, tps);
    EXPECT_EQ(splits, l.fwd_splits);
    EXPECT_EQ(choose_conv_tile(pix, l.K, splits, tps, 132, 0), l.fwd);
    choose_out_splits(pix, l.C, int(tiles(l.K * 9, 8)), splits, tps);
    EXPECT_EQ(splits, l.dgrad_splits);
    EXPECT_EQ(choose_conv_tile(pix, l.C, splits, tps, 132, 0), l.dgrad);
    choose_splits(l.K, l.C * 9, int(tiles(pix, 8)), splits, tps);
    EXPECT_EQ(splits, l.wgrad_splits);
    const Tile wt = choose_conv_tile(l.K, l.C * 9, splits, tps, 132, l.C);
    EXPECT_EQ(wt, l.wgrad);
    EXPECT_EQ(tap_major_forward(l.C, l.K), l.tap);
    EXPECT_EQ(tap_major_backward_data(1, l.C, l.K), l.tap);
    EXPECT_EQ(tap_major_weight_grad(l.C, wt), l.wgrad_tap);
  }
}

// The wide engine's rule (choose_conv_tile): WL for forward and backward-data
// products with long reductions, little padding and full waves of WN or WM
// blocks; the weight gradient never (choose_tile's pick).
TEST(ImplicitPlan, WideTileChoices) {
  using namespace gpu::implicit_detail;
  const int sms = 132;
  EXPECT_EQ(choose_conv_tile(16384, 256, 1, 144, sms, 0), Tile::kWL);   // 128 WN blocks
  EXPECT_EQ(choose_conv_tile(16384, 256, 1, 31, sms, 0), Tile::kL);     // short reduction
  EXPECT_EQ(choose_conv_tile(16384, 128, 2, 144, sms, 0), Tile::kWL);   // 64 × 2 WM blocks
  EXPECT_EQ(choose_conv_tile(16384, 128, 1, 288, sms, 0), Tile::kL);    // 64 blocks: half a wave
  EXPECT_EQ(choose_conv_tile(20000, 256, 1, 144, sms, 0), Tile::kM);    // 157 WN, 158 WM blocks
  EXPECT_EQ(choose_conv_tile(16384, 200, 1, 144, sms, 0), Tile::kL);    // WN, WM pad 28%
  EXPECT_EQ(choose_conv_tile(128, 2304, 14, 146, sms, 256), Tile::kL);   // weight gradients
  EXPECT_EQ(choose_conv_tile(128, 2304, 14, 146, sms, 128), Tile::kL);
  EXPECT_EQ(choose_conv_tile(256, 1152, 14, 146, sms, 128), Tile::kL);
  EXPECT_EQ(choose_conv_tile(256, 27, 64, 128, sms, 3), Tile::kThinN);  // conv1's weights
  // GpuImplicit.ConvWideTiles' forwards.
  int splits = 0, tps = 0;
  choose_out_splits(121 * 121, 256, int(tiles(32 * 9, 8)), splits, tps);
  EXPECT_EQ(splits, 1);
  EXPECT_EQ(choose_conv_tile(121 * 121, 256, splits, tps, sms, 0), Tile::kWL);
  choose_out_splits(120 * 120, 128, int(tiles(64 * 9, 8)), splits, tps);
  EXPECT_EQ(splits, 2);
  EXPECT_EQ(choose_conv_tile(120 * 120, 128, splits, tps, sms, 0), Tile::kWL);
  EXPECT_EQ(tile_bm(Tile::kWM), 256);
  EXPECT_EQ(tile_bn(Tile::kWN), 256);
  EXPECT_TRUE(tap_major_weight_grad(256, Tile::kWN));
  EXPECT_FALSE(tap_major_weight_grad(128, Tile::kWN));
  EXPECT_TRUE(tap_major_weight_grad(48, Tile::kThinN));
  EXPECT_FALSE(tap_major_weight_grad(40, Tile::kS));
}

// Forward / backward_data splits: slices cover every k-tile once, none empty,
// at most kMaxOutSplits, at least kMinTilesPerOutSplit k-tiles when split; for
// a large output (the 128×64 tiles give a block per SM) none unless its wide
// blocks fill less than 3/4 of the SMs, and then slices of ≥ kWideMinTiles.
TEST(ImplicitPlan, OutSplitsCoverEveryTileOnce) {
  using namespace gpu::implicit_detail;
  for (long long M : {1ll, 100ll, 4096ll, 16384ll, 1ll << 20})
    for (long long N : {3ll, 64ll, 128ll, 256ll, 1000ll})
      for (int kt : {1, 4, 15, 16, 17, 31, 32, 33, 144, 288, 1 << 16}) {
        int splits = 0, tps = 0;
        choose_out_splits(M, N, kt, splits, tps);
        SCOPED_TRACE(str("M=", M, " N=", N, " ktiles=", kt, " -> splits=", splits, " tps=", tps));
        ASSERT_GE(splits, 1);
        ASSERT_LE(splits, kMaxOutSplits);
        ASSERT_LT((long long)(splits - 1) * tps, kt);
        ASSERT_GE((long long)splits * tps, kt);
        if (splits > 1) ASSERT_GE(tps, kMinTilesPerOutSplit);
        if (tiles(M, 128) * tiles(N, 64) >= kPlanSMs) {  // large: only to fill the wide tiles
          if (M < 256 || N < 128 || tiles(M * N, 128 * 256) * 4 >= kPlanSMs * 3)
            ASSERT_EQ(splits, 1);
          if (splits > 1) ASSERT_GE(tps, kWideMinTiles);
        }
      }
}

// The thin rule: K ≤ 4 and R·S ≤ kThinMaxTaps; the fast kernels only for
// 3×3 / pad 1 and 5×5 / pad 2, stride 1, W % 4 == 0, 16-byte aligned.
TEST(ImplicitPlan, ThinChoices) {
  using namespace gpu::implicit_detail;
  EXPECT_EQ(choose_thin(3, 3, 3, 1, 1, 32, true), ThinPath::kFast3x3);  // CIFAR conv5
  EXPECT_EQ(choose_thin(1, 3, 3, 1, 1, 28, true), ThinPath::kFast3x3);  // Fashion conv5
  for (int k = 1; k <= 4; ++k) {
    EXPECT_EQ(choose_thin(k, 3, 3, 1, 1, 4, true), ThinPath::kFast3x3) << k;
    EXPECT_EQ(choose_thin(k, 3, 3, 1, 1, 32, false), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 3, 3, 1, 1, 33, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 3, 3, 1, 1, 30, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 3, 3, 2, 1, 32, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 3, 3, 1, 0, 32, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 3, 3, 1, 2, 32, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 5, 5, 1, 1, 32, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 5, 5, 1, 2, 32, true), ThinPath::kFast5x5) << k;
    EXPECT_EQ(choose_thin(k, 5, 5, 1, 2, 4, true), ThinPath::kFast5x5) << k;
    EXPECT_EQ(choose_thin(k, 5, 5, 1, 2, 32, false), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 5, 5, 1, 2, 30, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 5, 5, 2, 2, 32, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 5, 3, 1, 2, 32, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 7, 7, 1, 3, 32, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 1, 1, 1, 0, 32, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 8, 8, 1, 3, 32, true), ThinPath::kGeneric) << k;
    EXPECT_EQ(choose_thin(k, 9, 9, 1, 4, 32, true), ThinPath::kNone) << k;
    EXPECT_EQ(choose_thin(k, 1, 65, 1, 0, 70, true), ThinPath::kNone) << k;
  }
  EXPECT_EQ(choose_thin(5, 3, 3, 1, 1, 32, true), ThinPath::kNone);
  EXPECT_EQ(choose_thin(0, 3, 3, 1, 1, 32, true), ThinPath::kNone);
  EXPECT_EQ(choose_thin(256, 3, 3, 1, 1, 32, true), ThinPath::kNone);
}

// The few-input-channel rule: C from 1 to kThinInputMaxC, K past the thin rule,
// 3×3 stride 1 pad 1 in every precision, 5×5 stride 1 pad 2 in bf16 only.
TEST(ImplicitPlan, ThinInputChoices) {
  using namespace gpu::implicit_detail;
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "fp32 or tf32");
    EXPECT_TRUE(thin_input_applies(3, 256, 3, 3, 1, 1, bf16));  // CIFAR conv1
    EXPECT_TRUE(thin_input_applies(1, 16, 3, 3, 1, 1, bf16));   // Fashion conv1
    for (int c = 1; c <= kThinInputMaxC; ++c) {
      EXPECT_TRUE(thin_input_applies(c, kThinMaxK + 1, 3, 3, 1, 1, bf16)) << c;
      EXPECT_FALSE(thin_input_applies(c, kThinMaxK, 3, 3, 1, 1, bf16)) << c;  // thin
      EXPECT_FALSE(thin_input_applies(c, 64, 3, 3, 2, 1, bf16)) << c;
      EXPECT_FALSE(thin_input_applies(c, 64, 3, 3, 1, 0, bf16)) << c;
      EXPECT_EQ(thin_input_applies(c, 64, 5, 5, 1, 2, bf16), bf16) << c;
      EXPECT_FALSE(thin_input_applies(c, kThinMaxK, 5, 5, 1, 2, bf16)) << c;
      EXPECT_FALSE(thin_input_applies(c, 64, 5, 5, 1, 1, bf16)) << c;
      EXPECT_FALSE(thin_input_applies(c, 64, 5, 5, 2, 2, bf16)) << c;
      EXPECT_FALSE(thin_input_applies(c, 64, 5, 3, 1, 2, bf16)) << c;
      EXPECT_FALSE(thin_input_applies(c, 64, 7, 7, 1, 3, bf16)) << c;
      EXPECT_FALSE(thin_input_applies(c, 64, 1, 1, 1, 0, bf16)) << c;
    }
    EXPECT_FALSE(thin_input_applies(0, 64, 3, 3, 1, 1, bf16));
    EXPECT_FALSE(thin_input_applies(kThinInputMaxC + 1, 64, 3, 3, 1, 1, bf16));
    EXPECT_FALSE(thin_input_applies(kThinInputMaxC + 1, 64, 5, 5, 1, 2, bf16));
  }
}

// Every unit of work lies in exactly one non-empty slice; slices hold at least
// min_items units when there are several, and there are at most kMaxSplits.
TEST(ImplicitPlan, ThinSplitsCoverEveryItemOnce) {
  using namespace gpu::implicit_detail;
  for (long long gx : {1ll, 2ll, 3ll, 32ll, 64ll, 528ll, 100000ll})
    for (long long items : {1ll, 2ll, 3ll, 4ll, 5ll, 63ll, 256ll, 1000ll, 65536ll, 1ll << 29})
      for (long long min_items : {1ll, 4ll, 2048ll}) {
        int splits = 0;
        long long per = 0;
        choose_thin_splits(gx, items, min_items, splits, per);
        SCOPED_TRACE(str("gx=", gx, " items=", items, " min=", min_items, " -> splits=", splits,
                         " per=", per));
        ASSERT_GE(splits, 1);
        ASSERT_LE(splits, kMaxSplits);
        ASSERT_GE(per, 1);
        ASSERT_LT((splits - 1) * per, items);  // the last slice is not empty
        ASSERT_GE(splits * per, items);        // every item is covered
        if (splits > 1) ASSERT_GE(per, min_items);
      }
  // The CIFAR autoencoder's conv5 at batch 64: 256 tiles over 64 channel groups.
  int splits = 0;
  long long per = 0;
  choose_thin_splits(64, 256, 4, splits, per);
  EXPECT_EQ(splits, 9);
  EXPECT_EQ(per, 29);
  // The fast kernels' target: two whole waves of their blocks on kPlanSMs SMs.
  choose_thin_splits(64, 256, 4, splits, per, thin_fast_wgrad_target(64, 3, 3));
  EXPECT_EQ(splits, 12);  // three blocks an SM: 768 of 792
  EXPECT_EQ(per, 22);
  choose_thin_splits(64, 256, 4, splits, per, thin_fast_wgrad_target(64, 5, 3));
  EXPECT_EQ(splits, 8);  // two blocks an SM: 512 of 528
  EXPECT_EQ(per, 32);
  EXPECT_EQ(thin_fast_wgrad_target(64, 5, 2), 512);  // 50 sums: two an SM
  EXPECT_EQ(thin_fast_wgrad_target(64, 5, 1), 768);  // 25: three
  EXPECT_EQ(thin_fast_wgrad_target(1000, 5, 3), 1000);  // one slice at least
}

}  // namespace
}  // namespace hpmc
