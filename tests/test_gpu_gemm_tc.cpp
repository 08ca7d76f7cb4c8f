// The tensor-core GEMM engine (layers/gpu/gemm_tc.h), in tf32 and bf16:
// every transpose, the accumulate flag, aligned (16-byte) and unaligned
// leading dimensions, odd shapes (1, 5, 37, 129, 257, 1000, 2051: no size a
// multiple of a tile; k = 0; m or n = 1), against two double references:
//
//   * the product of the operands rounded as the precision rounds them
//     (tf32: 10 mantissa bits, ties away; bf16: core/bf16.h). Those products
//     are exact in double and the tensor cores sum them in FP32, so each
//     element must be within 2·k·2^-24·Σ_l |a_r·b_r| of it (the classic
//     bound for a recursive FP32 sum, with a factor 2 of margin). A kernel
//     that skipped the rounding, dropped or doubled a product, or misplaced a
//     fragment fails this by orders of magnitude — the test checks that the
//     data make the rounding visible at that scale;
//   * the exact product of the unrounded operands: within (2·u + 2·k·2^-24)
//     of Σ|a||b| per element, u = 2^-11 (tf32) or 2^-8 (bf16): the
//     precision's own error, as issue 19 bounds it.
// C is poisoned with NaN unless accumulating, and its padding columns must
// stay untouched. Built in CUDA builds only; skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "act_testing.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "dev_array.h"
#include "gpu_testing.h"
#include "layers/gpu/gemm_tc.h"
#include "testing.h"

namespace hpmc {
namespace {

namespace tc = gpu::gemm_tc;
using testing::random_floats;

float round_to(tc::Operands p, float x) {
  return p == tc::Operands::kTf32 ? testing::round_tf32(x) : round_bf16(x);
}

double unit_roundoff(tc::Operands p) {
  return p == tc::Operands::kTf32 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
}

std::vector<float> host_of(const Tensor& t) {
  Tensor h = testing::to_cpu(t);
  const float* p = h.data<float>();
  return std::vector<float>(p, p + h.numel());
}

Tensor gpu_of(const std::vector<float>& v) {
  Tensor h = Tensor::empty(Shape(1, int(std::max<size_t>(v.size(), 1)), 1, 1));
  std::copy(v.begin(), v.end(), h.data<float>());
  return testing::to_gpu(h);
}

int ld_for(int cols, bool aligned) {
  if (aligned) return (cols + 3) / 4 * 4 + 4;
  int ld = cols + 1;
  while (ld % 4 == 0) ++ld;
  return ld;
}

struct Case {
  int m, n, k;
};

// Device memory for a packed rows×cols operand, poisoned: pack_bf16 must
// write every value the kernel reads, padding included.
Tensor packed_buffer(int rows, int cols) {
  const size_t words = (tc::packed_bytes(rows, cols) + 3) / 4;
  return gpu_of(std::vector<float>(std::max<size_t>(words, 1),
                                   std::numeric_limits<float>::quiet_NaN()));
}

// Runs one product and checks it against both references; returns the
// largest |c − exact(rounded)| / bound seen (≤ 1 passes).
// packed (bf16): through pack_bf16 and gemm_bf16 rather than gemm.
double check_product(tc::Operands p, const Case& cs, bool ta, bool tb, bool acc, bool aligned,
                     uint64_t seed, int splits = 0, bool packed = false) {
  const int m = cs.m, n = cs.n, k = cs.k;
  Rng rng(seed);
  const std::vector<float> a = random_floats(size_t(m) * k, rng);  // op(A)[i][l]
  const std::vector<float> b = random_floats(size_t(k) * n, rng);  // op(B)[l][j]
  const std::vector<float> c0 = random_floats(size_t(m) * n, rng);
  const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  const int lda = ld_for(a_cols, aligned), ldb = ld_for(b_cols, aligned), ldc = ld_for(n, aligned);
  std::vector<float> ha(size_t(a_rows) * lda, 5.f), hb(size_t(b_rows) * ldb, 5.f);
  for (int i = 0; i < m; ++i)
    for (int l = 0; l < k; ++l)
      (ta ? ha[size_t(l) * lda + i] : ha[size_t(i) * lda + l]) = a[size_t(i) * k + l];
  for (int l = 0; l < k; ++l)
    for (int j = 0; j < n; ++j)
      (tb ? hb[size_t(j) * ldb + l] : hb[size_t(l) * ldb + j]) = b[size_t(l) * n + j];
  std::vector<float> hc(size_t(m) * ldc, -3.f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      hc[size_t(i) * ldc + j] = acc ? c0[size_t(i) * n + j] : std::numeric_limits<float>::quiet_NaN();
  Tensor da = gpu_of(ha), db = gpu_of(hb), dc = gpu_of(hc);
  if (packed) {
    Tensor pa = packed_buffer(a_rows, a_cols), pb = packed_buffer(b_rows, b_cols);
    tc::pack_bf16(da.data<float>(), a_rows, a_cols, lda, pa.data<float>());
    tc::pack_bf16(db.data<float>(), b_rows, b_cols, ldb, pb.data<float>());
    tc::gemm_bf16(ta, tb, m, n, k, pa.data<float>(), pb.data<float>(), dc.data<float>(), ldc, acc,
                  splits);
  } else {
    tc::gemm(p, ta, tb, m, n, k, da.data<float>(), lda, db.data<float>(), ldb, dc.data<float>(),
             ldc, acc, splits);
  }
  gpu::check_after("tensor-core gemm");
  const std::vector<float> out = host_of(dc);

  const double u = unit_roundoff(p), u32 = std::ldexp(1.0, -24);
  double worst = 0, rounding_seen = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double exact = 0, rounded = 0, mag = 0, mag_r = 0;
      for (int l = 0; l < k; ++l) {
        const double x = a[size_t(i) * k + l], y = b[size_t(l) * n + j];
        const double xr = round_to(p, float(x)), yr = round_to(p, float(y));
        exact += x * y;
        rounded += xr * yr;
        mag += std::fabs(x * y);
        mag_r += std::fabs(xr * yr);
      }
      const double base = acc ? double(c0[size_t(i) * n + j]) : 0.0;
      const double got = out[size_t(i) * ldc + j];
      EXPECT_TRUE(std::isfinite(got)) << "C[" << i << "][" << j << "] not written";
      if (!std::isfinite(got)) return 1e9;
      // FP32 sums of exact products (+ the accumulate's one addition).
      const double tight = 2.0 * (k + 1) * u32 * (mag_r + std::fabs(base)) + 1e-30;
      const double loose = (2 * u + 2.0 * (k + 1) * u32) * (mag + std::fabs(base)) + 1e-30;
      worst = std::max(worst, std::fabs(got - (base + rounded)) / tight);
      EXPECT_LE(std::fabs(got - (base + exact)), loose)
          << "C[" << i << "][" << j << "] against the unrounded product";
      rounding_seen = std::max(rounding_seen, std::fabs(exact - rounded) / tight);
    }
  for (int i = 0; i < m; ++i)
    for (int j = n; j < ldc; ++j)
      EXPECT_EQ(out[size_t(i) * ldc + j], -3.f) << "padding C[" << i << "][" << j << "] written";
  // The data must make the operand rounding visible at the tight bound's scale
  // (else the tight check could not tell a kernel that skips it): for 8 ≤ k ≤ 128
  // random operands the rounded product is off by many tight bounds. (The
  // rounding error grows as √k and the bound as k: at k = 1000 they meet,
  // and the shapes with short k carry this check.)
  if (k >= 8 && k <= 128) EXPECT_GT(rounding_seen, 4.0) << "test data too tame to see the rounding";
  return worst;
}

class GpuGemmTc : public ::testing::TestWithParam<tc::Operands> {};

TEST_P(GpuGemmTc, EveryTransposeAndShapeMatchesTheRoundedDoubleProduct) {
  HPMC_REQUIRE_GPU();
  const tc::Operands p = GetParam();
  const Case cases[] = {{1, 1, 1},     {5, 7, 3},      {37, 23, 45},  {129, 130, 67},
                        {1, 257, 100}, {257, 1, 1000}, {130, 5, 2051}, {200, 300, 33}};
  uint64_t seed = 9000;
  for (const Case& cs : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int acc = 0; acc < 2; ++acc)
          for (int aligned = 0; aligned < 2; ++aligned) {
            SCOPED_TRACE(str(tc::operands_name(p), " m", cs.m, " n", cs.n, " k", cs.k,
                             ta ? " At" : "", tb ? " Bt" : "", acc ? " accumulate" : "",
                             aligned ? " aligned" : " unaligned"));
            const double worst = check_product(p, cs, ta, tb, acc, aligned, ++seed);
            EXPECT_LE(worst, 1.0) << "largest error over its FP32-sum bound";
          }
}

// Split-K: the slice count follows the shape (splits_for: 1 where the tiles
// fill the GPU, more where a few tiles have a long k), and every count —
// chosen, forced, uneven (the last slice shorter), more than the k-tiles —
// keeps each element within the FP32-sum bound, repeatably.
TEST_P(GpuGemmTc, SplitKSlicesStayWithinTheBound) {
  HPMC_REQUIRE_GPU();
  const tc::Operands p = GetParam();
  EXPECT_EQ(tc::splits_for(p, 2048, 2048, 4096), 1);  // 256 tiles: no split
  EXPECT_EQ(tc::splits_for(p, 512, 512, 64), 1);      // k too short to cut
  EXPECT_GT(tc::splits_for(p, 512, 512, 4096), 1);    // a linear layer's weight gradient
  EXPECT_LE(tc::splits_for(p, 1, 1, 1 << 20), 16);
  const Case cases[] = {{130, 5, 2051}, {64, 300, 1000}, {37, 129, 777}};
  uint64_t seed = 9500;
  for (const Case& cs : cases)
    for (int splits : {0, 2, 3, 7, 5000})
      for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2, acc = (t + splits) % 2 == 1;
        SCOPED_TRACE(str(tc::operands_name(p), " m", cs.m, " n", cs.n, " k", cs.k, " splits ",
                         splits, ta ? " At" : "", tb ? " Bt" : "", acc ? " accumulate" : ""));
        EXPECT_LE(check_product(p, cs, ta, tb, acc, t == 1, ++seed, splits), 1.0);
      }
  // The same slices, the same bits.
  Rng rng(32);
  const int m = 64, n = 300, k = 1000;
  Tensor da = gpu_of(random_floats(size_t(m) * k, rng));
  Tensor db = gpu_of(random_floats(size_t(k) * n, rng));
  std::vector<std::vector<float>> runs;
  for (int r = 0; r < 2; ++r) {
    Tensor dc = gpu_of(std::vector<float>(size_t(m) * n, 0.f));
    tc::gemm(p, false, false, m, n, k, da.data<float>(), k, db.data<float>(), n, dc.data<float>(),
             n, false, 5);
    runs.push_back(host_of(dc));
  }
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)), 0);
  EXPECT_THROW(tc::gemm(p, false, false, m, n, k, da.data<float>(), k, db.data<float>(), n,
                        da.data<float>(), n, false, -1),
               RuntimeError);
}

// The packed bf16 path (pack_bf16 + gemm_bf16, what gemm takes for large
// products and LinearGPU for its three): every transpose, odd sizes (rows
// padded to 8), split-K, against the same bounds; and bit for bit what the
// unpacked path gives for the same product (the same rounded operands
// through the same k-steps).
TEST_P(GpuGemmTc, PackedBf16OperandsGiveTheSameProducts) {
  HPMC_REQUIRE_GPU();
  if (GetParam() != tc::Operands::kBf16) GTEST_SKIP() << "packing is bf16's";
  const tc::Operands p = GetParam();
  EXPECT_FALSE(tc::packs(127, 5000, 5000));
  EXPECT_FALSE(tc::packs(512, 512, 64));
  EXPECT_TRUE(tc::packs(512, 512, 512));
  EXPECT_EQ(tc::packed_ld(1), 8);
  EXPECT_EQ(tc::packed_ld(17), 24);
  const Case cases[] = {{1, 1, 1}, {5, 7, 3}, {37, 23, 45}, {129, 130, 67}, {130, 5, 2051},
                        {200, 300, 33}, {257, 129, 300}};
  uint64_t seed = 9800;
  for (const Case& cs : cases)
    for (int t = 0; t < 8; ++t) {
      const bool ta = t & 1, tb = t & 2, acc = t & 4;
      SCOPED_TRACE(str("packed m", cs.m, " n", cs.n, " k", cs.k, ta ? " At" : "", tb ? " Bt" : "",
                       acc ? " accumulate" : ""));
      EXPECT_LE(check_product(p, cs, ta, tb, acc, t % 3 == 0, ++seed, 0, true), 1.0);
    }
  // The same bits: a product below the packing rule, both ways.
  Rng rng(33);
  const int m = 200, n = 300, k = 333;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    Tensor da = gpu_of(random_floats(size_t(ar) * ac, rng));
    Tensor db = gpu_of(random_floats(size_t(br) * bc, rng));
    Tensor c1 = gpu_of(std::vector<float>(size_t(m) * n, 0.f));
    Tensor c2 = gpu_of(std::vector<float>(size_t(m) * n, 0.f));
    ASSERT_FALSE(tc::packs(m, n, k));
    tc::gemm(p, ta, tb, m, n, k, da.data<float>(), ac, db.data<float>(), bc, c1.data<float>(), n,
             false);
    Tensor pa = packed_buffer(ar, ac), pb = packed_buffer(br, bc);
    tc::pack_bf16(da.data<float>(), ar, ac, ac, pa.data<float>());
    tc::pack_bf16(db.data<float>(), br, bc, bc, pb.data<float>());
    tc::gemm_bf16(ta, tb, m, n, k, pa.data<float>(), pb.data<float>(), c2.data<float>(), n, false);
    const auto h1 = host_of(c1), h2 = host_of(c2);
    EXPECT_EQ(std::memcmp(h1.data(), h2.data(), h1.size() * sizeof(float)), 0)
        << "ta=" << ta << " tb=" << tb;
  }
  // A bias in the epilogue (and, split, in the sum): the bits of writing it
  // first and accumulating; with accumulate it is refused.
  for (int splits : {1, 4}) {
    const int bm = 70, bn = 45, bk = 1500;
    Tensor da = gpu_of(random_floats(size_t(bm) * bk, rng));
    Tensor db = gpu_of(random_floats(size_t(bn) * bk, rng));
    const std::vector<float> bias = random_floats(bn, rng);
    std::vector<float> rows(size_t(bm) * bn);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = bias[i % bn];
    Tensor dbias = gpu_of(bias), c1 = gpu_of(rows);
    Tensor c2 = gpu_of(std::vector<float>(rows.size(), std::numeric_limits<float>::quiet_NaN()));
    Tensor pa = packed_buffer(bm, bk), pb = packed_buffer(bn, bk);
    tc::pack_bf16(da.data<float>(), bm, bk, bk, pa.data<float>());
    tc::pack_bf16(db.data<float>(), bn, bk, bk, pb.data<float>());
    tc::gemm_bf16(false, true, bm, bn, bk, pa.data<float>(), pb.data<float>(), c1.data<float>(),
                  bn, true, splits);
    tc::Epilogue ep;
    ep.bias = dbias.data<float>();
    tc::gemm_bf16(false, true, bm, bn, bk, pa.data<float>(), pb.data<float>(), c2.data<float>(),
                  bn, false, splits, ep);
    const auto h1 = host_of(c1), h2 = host_of(c2);
    EXPECT_EQ(std::memcmp(h1.data(), h2.data(), h1.size() * sizeof(float)), 0)
        << "bias, splits " << splits;
    EXPECT_THROW(tc::gemm_bf16(false, true, bm, bn, bk, pa.data<float>(), pb.data<float>(),
                               c2.data<float>(), bn, true, splits, ep),
                 RuntimeError);
  }
}

// The epilogue (gemm_tc.h's Epilogue: a bias, an activation, a ReLU mask),
// what the Linear layers fold into their products: bit for bit the separate
// passes — the product accumulated onto the broadcast bias (or written
// plain), then the activation layer's operation (relu, leaky_relu), then
// mask > 0 ? v : 0 — on every path:
// the staged loop, the packed bf16 operands (gemm_bf16, and gemm's own
// packing for a large product), unsplit and split (the sum applies it),
// every transpose, odd shapes, unaligned mask rows. Outputs start as NaN.
TEST_P(GpuGemmTc, EpilogueIsTheSeparatePasses) {
  HPMC_REQUIRE_GPU();
  const tc::Operands p = GetParam();
  struct EpCase {
    int m, n, k;
    bool packed;  // through pack_bf16 + gemm_bf16 (bf16 only)
  };
  std::vector<EpCase> cases = {{1, 1, 1, false}, {37, 23, 45, false}, {129, 130, 67, false},
                               {130, 5, 2051, false}, {512, 520, 512, false}};
  if (p == tc::Operands::kBf16) {
    ASSERT_TRUE(tc::packs(512, 520, 512));  // gemm packs this one itself
    cases.push_back({37, 23, 45, true});
    cases.push_back({257, 129, 300, true});
  }
  const std::vector<Activation> acts = {Activation::none(), Activation::relu(),
                                        Activation::leaky_relu(0.1f)};
  Rng rng(9900);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const EpCase& cs : cases)
    for (int t = 0; t < 4; ++t)
      for (int splits : {1, 3}) {
        const bool ta = t & 1, tb = t & 2;
        const int m = cs.m, n = cs.n, k = cs.k;
        const int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        Tensor da = gpu_of(random_floats(size_t(ar) * ac, rng));
        Tensor db = gpu_of(random_floats(size_t(br) * bc, rng));
        Tensor pa, pb;
        if (cs.packed) {
          pa = packed_buffer(ar, ac), pb = packed_buffer(br, bc);
          tc::pack_bf16(da.data<float>(), ar, ac, ac, pa.data<float>());
          tc::pack_bf16(db.data<float>(), br, bc, bc, pb.data<float>());
        }
        const auto product = [&](float* c, bool acc, const tc::Epilogue& ep) {
          if (cs.packed)
            tc::gemm_bf16(ta, tb, m, n, k, pa.data<float>(), pb.data<float>(), c, n, acc, splits,
                          ep);
          else
            tc::gemm(p, ta, tb, m, n, k, da.data<float>(), ac, db.data<float>(), bc, c, n, acc,
                     splits, ep);
        };
        const std::vector<float> bias = random_floats(size_t(n), rng);
        const int ldm = n + 1;  // odd: the mask's scalar loads
        std::vector<float> mask = random_floats(size_t(m) * ldm, rng);
        for (size_t i = 0; i < mask.size(); i += 3) mask[i] = 0.f;  // zero masks too
        Tensor dbias = gpu_of(bias), dmask = gpu_of(mask);
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          // The separate passes: the bias broadcast, the product accumulated on it.
          std::vector<float> rows(size_t(m) * n, 0.f);
          if (with_bias)
            for (size_t i = 0; i < rows.size(); ++i) rows[i] = bias[i % size_t(n)];
          Tensor plain = gpu_of(rows);
          product(plain.data<float>(), true, tc::Epilogue{});
          const std::vector<float> hp = host_of(plain);
          for (const Activation& a : acts)
            for (int masked = 0; masked < 2; ++masked) {
              SCOPED_TRACE(str(tc::operands_name(p), cs.packed ? " packed" : "", " m", m, " n", n,
                               " k", k, ta ? " At" : "", tb ? " Bt" : "", " splits ", splits,
                               with_bias ? " bias " : " ", testing::act_name(a),
                               masked ? " mask" : ""));
              tc::Epilogue ep;
              ep.bias = with_bias ? dbias.data<float>() : nullptr;
              ep.act = a;
              if (masked) ep.mask = dmask.data<float>(), ep.ldm = ldm;
              Tensor c = gpu_of(std::vector<float>(size_t(m) * n, nan));
              product(c.data<float>(), false, ep);
              gpu::check_after("tensor-core gemm with an epilogue");
              std::vector<float> got = host_of(c);
              if (masked) {  // the mask must zero what it covers, and leave the rest
                for (int i = 0; i < m; ++i)
                  for (int j = 0; j < n; ++j) {
                    const size_t e = size_t(i) * n + j;
                    if (!(mask[size_t(i) * ldm + j] > 0.f)) {
                      ASSERT_EQ(got[e], 0.f) << "masked element (" << i << ", " << j << ")";
                      got[e] = testing::act_ref(a, hp[e], 0.f);  // for act_of below
                    }
                  }
              }
              ASSERT_TRUE(testing::act_of(hp, got, a, {}, 1, 1, m * n > 64)) << "epilogue";
            }
        }
      }
  // Refused: a bias with accumulate, the activations other than relu and
  // leaky_relu, a mask narrower than n.
  Tensor d = gpu_of(std::vector<float>(64, 1.f));
  tc::Epilogue bad;
  bad.bias = d.data<float>();
  EXPECT_THROW(tc::gemm(p, false, false, 4, 4, 4, d.data<float>(), 4, d.data<float>(), 4,
                        d.data<float>(), 4, true, 0, bad),
               RuntimeError);
  for (const Activation& a :
       {Activation::prelu(d.data<float>()), Activation::sigmoid(), Activation::tanh()}) {
    bad = tc::Epilogue{};
    bad.act = a;
    EXPECT_THROW(tc::gemm(p, false, false, 4, 4, 4, d.data<float>(), 4, d.data<float>(), 4,
                          d.data<float>(), 4, false, 0, bad),
                 RuntimeError)
        << activation_text(a);
  }
  bad = tc::Epilogue{};
  bad.mask = d.data<float>(), bad.ldm = 3;
  EXPECT_THROW(tc::gemm(p, false, false, 4, 4, 4, d.data<float>(), 4, d.data<float>(), 4,
                        d.data<float>(), 4, false, 0, bad),
               RuntimeError);
}

TEST_P(GpuGemmTc, ZeroKWritesZerosOrLeavesC) {
  HPMC_REQUIRE_GPU();
  const tc::Operands p = GetParam();
  std::vector<float> c(6 * 9, std::numeric_limits<float>::quiet_NaN());
  Tensor da = gpu_of({1.f}), db = gpu_of({1.f}), dc = gpu_of(c);
  tc::gemm(p, false, false, 6, 9, 0, da.data<float>(), 1, db.data<float>(), 9, dc.data<float>(),
           9, false);
  for (float v : host_of(dc)) EXPECT_EQ(v, 0.f);
  std::vector<float> ones(6 * 9, 1.5f);
  Tensor d1 = gpu_of(ones);
  tc::gemm(p, false, false, 6, 9, 0, da.data<float>(), 1, db.data<float>(), 9, d1.data<float>(),
           9, true);
  for (float v : host_of(d1)) EXPECT_EQ(v, 1.5f);
}

TEST_P(GpuGemmTc, RepeatableAndRejectsBadSizes) {
  HPMC_REQUIRE_GPU();
  const tc::Operands p = GetParam();
  Rng rng(31);
  const int m = 300, n = 200, k = 500;
  Tensor da = gpu_of(random_floats(size_t(m) * k, rng)), db = gpu_of(random_floats(size_t(k) * n, rng));
  Tensor c1 = gpu_of(std::vector<float>(size_t(m) * n, 0.f)), c2 = gpu_of(std::vector<float>(size_t(m) * n, 0.f));
  tc::gemm(p, false, false, m, n, k, da.data<float>(), k, db.data<float>(), n, c1.data<float>(), n, false);
  tc::gemm(p, false, false, m, n, k, da.data<float>(), k, db.data<float>(), n, c2.data<float>(), n, false);
  const auto h1 = host_of(c1), h2 = host_of(c2);
  EXPECT_EQ(std::memcmp(h1.data(), h2.data(), h1.size() * sizeof(float)), 0);
  EXPECT_THROW(tc::gemm(p, false, false, -1, n, k, da.data<float>(), k, db.data<float>(), n,
                        c1.data<float>(), n, false),
               RuntimeError);
  EXPECT_THROW(tc::gemm(p, false, false, m, n, k, da.data<float>(), k - 1, db.data<float>(), n,
                        c1.data<float>(), n, false),
               RuntimeError);
}

INSTANTIATE_TEST_SUITE_P(Operands, GpuGemmTc,
                         ::testing::Values(tc::Operands::kTf32, tc::Operands::kBf16),
                         [](const ::testing::TestParamInfo<tc::Operands>& i) {
                           return std::string(tc::operands_name(i.param));
                         });

}  // namespace
}  // namespace hpmc
