// The large-GEMM engine (layers/gpu/gemm_large.h): every transpose, the
// accumulate flag, both tile configurations, with and without split-K,
// against a double-precision reference over odd shapes (1, 7, 129, 257,
// 1000, 4099-style: no size a multiple of a tile, k = 1, m or n = 1),
// leading dimensions wider than the rows and not multiples of 4 (the 4-byte
// loaders) or multiples of 4 with rows that are not (the 16-byte loader's
// partial pieces); the output poisoned with NaN before each call and its
// padding columns checked untouched. Then: the shape rule, split plans, the
// HPMC_GEMM_LARGE override, bit-identity with the implicit engine where no
// split regroups k, repeatability, and the Linear layer at a shape the rule
// routes here (forward and both gradients against the layer's maths in
// double).
//
// The tests that launch kernels start with HPMC_REQUIRE_GPU(): without a
// visible device they skip and say why. Built in CUDA builds only
// (tests/CMakeLists.txt).
//
// Error bound: as test_gpu_conv.cpp argues, ‖gpu − ref‖∞ ≤ 1e-5·‖ref‖∞ for
// zero-mean U(−1, 1) data leaves a margin of ~10 at k = 1000 (expected
// worst element ≈ 0.4·√k·2^-24 ≈ 8e-7) while a dropped or doubled product
// (≥ ~1e-3 relative) fails by two orders of magnitude. Split-K sums the
// slices in double, which only lowers the error.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "gpu_testing.h"
#include "layers/cpu/linear_ops.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/factory.h"
#include "layers/gpu/gemm_large.h"
#include "layers/gpu/linear.h"
#include "model/impl.h"
#include "testing.h"

namespace hpmc {
namespace {

namespace gl = gpu::gemm_large;
using testing::to_cpu;
using testing::to_gpu;

constexpr double kTol = 1e-5;

std::vector<float> random_floats(size_t n, Rng& rng, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

Tensor gpu_from(const std::vector<float>& v) {
  Tensor h = Tensor::empty(Shape(1, int(std::max<size_t>(v.size(), 1)), 1, 1));
  std::copy(v.begin(), v.end(), h.data<float>());
  return to_gpu(h);
}

std::vector<float> host_vector(const Tensor& t) {
  Tensor h = to_cpu(t);
  const float* p = h.data<float>();
  return std::vector<float>(p, p + h.numel());
}

using testing::rel_inf_error;

// HPMC_GEMM_LARGE for one scope.
struct EnvScope : testing::EnvScope {
  explicit EnvScope(const char* value) : testing::EnvScope("HPMC_GEMM_LARGE", value) {}
};

// One product's inputs: logical op(A) m×k and op(B) k×n, C0 (m×n), and the
// double reference op(A)·op(B) (without C0).
struct Problem {
  int m, n, k;
  std::vector<float> a, b, c0;  // a[i·k + l], b[l·n + j], c0[i·n + j]
  std::vector<double> ab;

  Problem(int m_, int n_, int k_, uint64_t seed) : m(m_), n(n_), k(k_) {
    Rng rng(seed);
    a = random_floats(size_t(m) * k, rng);
    b = random_floats(size_t(k) * n, rng);
    c0 = random_floats(size_t(m) * n, rng);
    ab.assign(size_t(m) * n, 0.0);
    for (int i = 0; i < m; ++i)
      for (int l = 0; l < k; ++l) {
        const double av = a[size_t(i) * k + l];
        const float* brow = &b[size_t(l) * n];
        double* out = &ab[size_t(i) * n];
        for (int j = 0; j < n; ++j) out[j] += av * double(brow[j]);
      }
  }
};

// A leading dimension for `cols` columns: wider than needed and not a
// multiple of 4 (aligned = false), or a multiple of 4 (aligned = true).
int ld_for(int cols, bool aligned) {
  if (aligned) return (cols + 3) / 4 * 4 + 4;
  int ld = cols + 1;
  while (ld % 4 == 0) ++ld;
  return ld;
}

struct Outcome {
  std::vector<float> c;  // the m×n block of C
  bool padding_intact = true;
};

// C (= or +=) op(A)·op(B) through fn, with A and B stored transposed or not
// at the given alignment; C's block poisoned with NaN unless accumulating.
template <class Fn>
Outcome run_product(const Problem& p, bool ta, bool tb, bool acc, bool aligned, Fn&& fn) {
  const int m = p.m, n = p.n, k = p.k;
  const int a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int b_rows = tb ? n : k, b_cols = tb ? k : n;
  const int lda = ld_for(a_cols, aligned), ldb = ld_for(b_cols, aligned);
  const int ldc = ld_for(n, aligned);
  std::vector<float> a(size_t(a_rows) * lda, 7.f), b(size_t(b_rows) * ldb, 7.f);
  for (int i = 0; i < m; ++i)
    for (int l = 0; l < k; ++l)
      (ta ? a[size_t(l) * lda + i] : a[size_t(i) * lda + l]) = p.a[size_t(i) * k + l];
  for (int l = 0; l < k; ++l)
    for (int j = 0; j < n; ++j)
      (tb ? b[size_t(j) * ldb + l] : b[size_t(l) * ldb + j]) = p.b[size_t(l) * n + j];
  std::vector<float> c(size_t(m) * ldc, -3.f);  // padding columns: -3
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      c[size_t(i) * ldc + j] = acc ? p.c0[size_t(i) * n + j] : std::numeric_limits<float>::quiet_NaN();
  Tensor da = gpu_from(a), db = gpu_from(b), dc = gpu_from(c);
  fn(ta, tb, m, n, k, da.data<float>(), lda, db.data<float>(), ldb, dc.data<float>(), ldc, acc);
  gpu::check_after("gemm");
  const auto out = host_vector(dc);
  Outcome r;
  r.c.resize(size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < ldc; ++j) {
      const float v = out[size_t(i) * ldc + j];
      if (j < n) r.c[size_t(i) * n + j] = v;
      else if (v != -3.f) r.padding_intact = false;
    }
  return r;
}

std::vector<double> expected(const Problem& p, bool acc) {
  std::vector<double> e = p.ab;
  if (acc)
    for (size_t i = 0; i < e.size(); ++i) e[i] += p.c0[i];
  return e;
}

// ---- against the double reference --------------------------------------------------

struct Size {
  int m, n, k;
};

TEST(GpuGemmLarge, EveryTransposeAccumulateAndSplitMatchesDoubleReference) {
  HPMC_REQUIRE_GPU();
  // Single elements, k = 1, m or n = 1, edges of one or several 128-tiles in
  // m and n, k-tails of 1 … 7 past the k-tiles, a long thin 4099.
  const Size sizes[] = {{1, 1, 1},     {1, 7, 5},     {7, 1, 3},      {7, 129, 1},
                        {129, 7, 257}, {257, 129, 9}, {131, 133, 1000}, {4099, 3, 17},
                        {3, 4099, 17}, {1000, 257, 33}};
  const gl::Variant variants[] = {gl::Variant::kK8, gl::Variant::kK16};
  uint64_t seed = 900;
  for (const Size& sz : sizes) {
    const Problem p(sz.m, sz.n, sz.k, ++seed);
    for (gl::Variant v : variants)
      for (int splits : {0, 1, 3})
        for (int aligned = 0; aligned < 2; ++aligned)
          for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb)
              for (int acc = 0; acc < 2; ++acc) {
                SCOPED_TRACE(str("m", p.m, " n", p.n, " k", p.k, " ", gl::variant_name(v),
                                 " splits ", splits, aligned ? " ld%4==0" : " ld%4!=0",
                                 ta ? " At" : "", tb ? " Bt" : "", acc ? " accumulate" : ""));
                const Outcome r = run_product(
                    p, ta, tb, acc, aligned,
                    [&](bool ta_, bool tb_, int m, int n, int k, const float* a, int lda,
                        const float* b, int ldb, float* c, int ldc, bool acc_) {
                      gl::gemm(ta_, tb_, m, n, k, a, lda, b, ldb, c, ldc, acc_, v, splits);
                    });
                EXPECT_LE(rel_inf_error(r.c, expected(p, acc)), kTol);
                EXPECT_TRUE(r.padding_intact) << "a column j >= n of C was written";
              }
  }
}

// Through implicit::gemm with HPMC_GEMM_LARGE=1 (the route the Linear layer
// takes), and k = 0 (C = 0, or C unchanged with accumulate).
TEST(GpuGemmLarge, ForcedRouteAndEmptyReduction) {
  HPMC_REQUIRE_GPU();
  EnvScope env("1");
  const Problem p(130, 140, 77, 31);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE(str(ta ? "At" : "A", tb ? " Bt" : " B"));
      const Outcome r = run_product(p, ta, tb, false, false, gpu::implicit::gemm);
      EXPECT_LE(rel_inf_error(r.c, expected(p, false)), kTol);
    }
  const Problem z(5, 9, 0, 32);
  for (int acc = 0; acc < 2; ++acc) {
    const Outcome r = run_product(z, false, false, acc, true,
                              [](bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                                 const float* b, int ldb, float* c, int ldc, bool ac) {
                                gl::gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, ac);
                              });
    EXPECT_EQ(rel_inf_error(r.c, expected(z, acc)), 0.0) << (acc ? "accumulate" : "overwrite");
  }
}

// Every path at a size small enough for compute-sanitizer (scripts/gpu-check
// gemm runs memcheck and racecheck on this one): both tiles, with and without
// split-K, the 16-byte and 4-byte loaders, the k-tail, edge tiles in m and n.
TEST(GpuGemmLarge, SmallEveryPath) {
  HPMC_REQUIRE_GPU();
  const Problem p(130, 133, 77, 33);
  for (gl::Variant v : {gl::Variant::kK8, gl::Variant::kK16})
    for (int splits : {1, 3})
      for (int aligned = 0; aligned < 2; ++aligned)
        for (int ta = 0; ta < 2; ++ta)
          for (int tb = 0; tb < 2; ++tb) {
            const bool acc = (ta + tb + splits) % 2 == 1;
            SCOPED_TRACE(str(gl::variant_name(v), " splits ", splits, aligned ? " ld%4==0" : "",
                             ta ? " At" : "", tb ? " Bt" : "", acc ? " accumulate" : ""));
            const Outcome r = run_product(p, ta, tb, acc, aligned,
                                      [&](bool a_t, bool b_t, int m, int n, int k, const float* a,
                                          int lda, const float* b, int ldb, float* c, int ldc,
                                          bool ac) {
                                        gl::gemm(a_t, b_t, m, n, k, a, lda, b, ldb, c, ldc, ac, v,
                                                 splits);
                                      });
            EXPECT_LE(rel_inf_error(r.c, expected(p, acc)), kTol);
            EXPECT_TRUE(r.padding_intact);
          }
}

// Host-side checks only: these two run without a device too.
TEST(GpuGemmLarge, BadArgumentsThrowWithTheNumbers) {
  float* none = nullptr;
  try {
    gl::gemm(false, false, 4, 4, 4, none, 3, none, 4, none, 4, false);
    FAIL() << "lda 3 < k 4 accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("lda=3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gl::gemm(false, false, -1, 4, 4, none, 4, none, 4, none, 4, false), RuntimeError);
}

// ---- the rule, the plans, the override -------------------------------------------------

TEST(GpuGemmLarge, ShapeRuleKeepsTheShippedMlpOnTheImplicitEngine) {
  // configs/mnist_mlp.yaml at batch 64: forward, weight gradient, data gradient of each layer.
  const Size mlp[] = {{64, 320, 784}, {320, 784, 64}, {64, 784, 320}, {64, 160, 320},
                      {160, 320, 64}, {64, 320, 160}, {64, 10, 160},  {10, 160, 64},
                      {64, 160, 10}};
  for (const Size& s : mlp) EXPECT_FALSE(gl::applies(s.m, s.n, s.k)) << s.m << "x" << s.n << "x" << s.k;
  EXPECT_TRUE(gl::applies(4096, 4096, 4096));
  EXPECT_TRUE(gl::applies(256, 4096, 4096));
  EXPECT_TRUE(gl::applies(1024, 1024, 128));
  EXPECT_FALSE(gl::applies(127, 1 << 20, 4096));  // m below one block tile
  EXPECT_FALSE(gl::applies(1024, 1024, 127));     // below 2^27 multiply-adds

  // Splits: one wave of 2 blocks per SM on 132 SMs, ≥ 8 k-tiles a slice, ≤ 16.
  EXPECT_EQ(gl::splits_for(4096, 4096, 4096, 8), 1);  // 1024 blocks
  EXPECT_EQ(gl::splits_for(1024, 4096, 4096, 8), 1);  // 256 blocks
  EXPECT_EQ(gl::splits_for(256, 4096, 4096, 8), 4);   // 64 blocks → 256
  EXPECT_EQ(gl::splits_for(1024, 1024, 1024, 8), 4);  // 64 blocks, 128 k-tiles
  EXPECT_EQ(gl::splits_for(256, 512, 1024, 8), 16);   // 8 blocks; capped at 16
  EXPECT_EQ(gl::splits_for(256, 512, 1024, 16), 8);   // 64 k-tiles of 16: 8 a slice
  EXPECT_EQ(gl::splits_for(128, 128, 40, 8), 1);      // 5 k-tiles: too few to split

  {
    EnvScope env(nullptr);  // unset: the rule
    EXPECT_TRUE(gl::use_large(4096, 4096, 4096));
    EXPECT_FALSE(gl::use_large(64, 320, 784));
  }
  {
    EnvScope env("auto");
    EXPECT_TRUE(gl::use_large(4096, 4096, 4096));
    EXPECT_FALSE(gl::use_large(64, 320, 784));
  }
  {
    EnvScope env("0");
    EXPECT_FALSE(gl::use_large(4096, 4096, 4096));
  }
  {
    EnvScope env("1");
    EXPECT_TRUE(gl::use_large(1, 1, 1));
  }
  {
    EnvScope env("yes");
    try {
      gl::use_large(1, 1, 1);
      FAIL() << "HPMC_GEMM_LARGE=yes accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("HPMC_GEMM_LARGE=yes"), std::string::npos) << e.what();
    }
  }
}

// Without split-K both engines compute each output as the same FMA chain over
// k ascending from 0, then add C: the route changes no bit. With split-K the
// result is repeatable bit for bit.
TEST(GpuGemmLarge, BitIdenticalToTheImplicitEngineWithoutSplitAndRepeatable) {
  HPMC_REQUIRE_GPU();
  // 1536×1536: 144 blocks (more than half the plan's 264 slots: no split);
  // 1536²·64 ≥ 2^27, so the rule routes it here.
  const Problem p(1536, 1536, 64, 77);
  ASSERT_TRUE(gl::applies(p.m, p.n, p.k));
  ASSERT_EQ(gl::splits_for(p.m, p.n, p.k, 16), 1);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int acc = 0; acc < 2; ++acc) {
        SCOPED_TRACE(str(ta ? "At" : "A", tb ? " Bt" : " B", acc ? " accumulate" : ""));
        Outcome old_r, new_r, k8;
        {
          EnvScope env("0");
          old_r = run_product(p, ta, tb, acc, true, gpu::implicit::gemm);
        }
        {
          EnvScope env("auto");
          new_r = run_product(p, ta, tb, acc, true, gpu::implicit::gemm);
        }
        k8 = run_product(p, ta, tb, acc, false,
                          [](bool a_t, bool b_t, int m, int n, int k, const float* a, int lda,
                             const float* b, int ldb, float* c, int ldc, bool ac) {
                            gl::gemm(a_t, b_t, m, n, k, a, lda, b, ldb, c, ldc, ac,
                                     gl::Variant::kK8, 1);
                          });
        EXPECT_LE(rel_inf_error(new_r.c, expected(p, acc)), kTol);
        EXPECT_EQ(std::memcmp(old_r.c.data(), new_r.c.data(), new_r.c.size() * sizeof(float)), 0)
            << "implicit engine vs large engine";
        EXPECT_EQ(std::memcmp(k8.c.data(), new_r.c.data(), new_r.c.size() * sizeof(float)), 0)
            << "K8 vs the default K16 tiles";
      }
  // Split-K (1000×257: 16 blocks → 16 slices of k = 1000): twice the same bits.
  const Problem q(1000, 257, 1000, 78);
  const auto split = [](bool a_t, bool b_t, int m, int n, int k, const float* a, int lda,
                        const float* b, int ldb, float* c, int ldc, bool ac) {
    gl::gemm(a_t, b_t, m, n, k, a, lda, b, ldb, c, ldc, ac);
  };
  const Outcome r1 = run_product(q, true, false, true, true, split);
  const Outcome r2 = run_product(q, true, false, true, true, split);
  EXPECT_LE(rel_inf_error(r1.c, expected(q, true)), kTol);
  EXPECT_EQ(std::memcmp(r1.c.data(), r2.c.data(), r1.c.size() * sizeof(float)), 0);
}

// ---- the Linear layer at a shape the rule routes here -------------------------------------

TEST(GpuGemmLarge, LinearLayerMatchesItsMathsInDouble) {
  HPMC_REQUIRE_GPU();
  EnvScope env("auto");
  const int batch = 256, in = 1024, out = 512;
  // All three products take the large engine, each with split-K.
  ASSERT_TRUE(gl::use_large(batch, out, in));   // y = x·Wᵀ
  ASSERT_TRUE(gl::use_large(out, in, batch));   // dW += dyᵀ·x
  ASSERT_TRUE(gl::use_large(batch, in, out));   // dx = dy·W
  Rng rng(2026);
  const float bound = 1.f / std::sqrt(float(in));
  const auto x = random_floats(size_t(batch) * in, rng);
  const auto w = random_floats(size_t(out) * in, rng, -bound, bound);
  const auto b = random_floats(size_t(out), rng, -bound, bound);
  const auto dy = random_floats(size_t(batch) * out, rng);
  const auto gw0 = random_floats(w.size(), rng);  // dW accumulates onto this

  // The reference: the CPU layer's maths (linear_ops.h) in double.
  const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end()),
      dyd(dy.begin(), dy.end());
  std::vector<double> y_ref(size_t(batch) * out), dx_ref(x.size(), 0.0), dw_ref(gw0.begin(), gw0.end()),
      db_ref(b.size(), 0.0);
  cpu::linear_forward(batch, in, out, xd.data(), wd.data(), bd.data(), y_ref.data());
  cpu::linear_backward_params(batch, in, out, xd.data(), dyd.data(), dw_ref.data(), db_ref.data());
  cpu::linear_backward_data(batch, in, out, dyd.data(), wd.data(), dx_ref.data());

  auto layer = std::make_shared<gpu::LinearGPU>("fc", LinearConfig{in, out, true},
                                                gpu::family_of(Impl::kIm2col, "fc"));
  Tensor tw = gpu_from(w), tb = gpu_from(b), tgw = gpu_from(gw0);
  Tensor tgb = Tensor::zeros(tb.shape(), DType::kF32, Device::kGPU);
  layer->bind({tw.data<float>(), tb.data<float>()}, {tgw.data<float>(), tgb.data<float>()});
  layer->set_input_shape(Shape(1, in, 1, 1));
  Tensor tx = to_gpu([&] {
    Tensor h = Tensor::empty(Shape(batch, in, 1, 1));
    std::copy(x.begin(), x.end(), h.data<float>());
    return h;
  }());
  Tensor ty = Tensor::empty(Shape(batch, out, 1, 1), DType::kF32, Device::kGPU);
  Tensor tdx = Tensor::empty(tx.shape(), DType::kF32, Device::kGPU);
  {
    Tensor nan = Tensor::empty(ty.shape());
    std::fill(nan.data<float>(), nan.data<float>() + nan.numel(), std::numeric_limits<float>::quiet_NaN());
    ty.copy_from(nan);
    Tensor nan2 = Tensor::empty(tdx.shape());
    std::fill(nan2.data<float>(), nan2.data<float>() + nan2.numel(), std::numeric_limits<float>::quiet_NaN());
    tdx.copy_from(nan2);
  }
  layer->forward(tx, ty);
  Tensor tdy = to_gpu([&] {
    Tensor h = Tensor::empty(Shape(batch, out, 1, 1));
    std::copy(dy.begin(), dy.end(), h.data<float>());
    return h;
  }());
  layer->backward(tx, ty, tdy, &tdx);
  gpu::check_after("linear");
  EXPECT_LE(rel_inf_error(host_vector(ty), y_ref), kTol) << "forward y";
  EXPECT_LE(rel_inf_error(host_vector(tdx), dx_ref), kTol) << "input gradient dx";
  EXPECT_LE(rel_inf_error(host_vector(tgw), dw_ref), kTol) << "weight gradient dW (accumulated)";
  EXPECT_LE(rel_inf_error(host_vector(tgb), db_ref), kTol) << "bias gradient db";
}

}  // namespace
}  // namespace hpmc
