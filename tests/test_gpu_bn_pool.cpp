// The GPU kernels of batch normalization, dropout, average pooling and
// bilinear up-sampling (layers/gpu/batchnorm_kernels.h, dropout_kernels.h,
// resample_kernels.h), called directly (CUDA builds only), against the CPU
// ops on fresh random inputs over odd shapes: batch 1, 1/3/5 channels, odd
// and 1-pixel planes, sizes that give a thread many elements.
//
//   dropout, avgpool2d, bilinear: bit for bit (the same counters, the same
//     operations in the same order; see the kernel headers).
//   batchnorm2d eval forward and eval dx: bit for bit (no reduction).
//   batchnorm2d training, and the eval parameter gradients: the GPU sums in
//     double in a fixed tree, the CPU sequentially in double; the double
//     results differ by a few ulps (~1e-15 relative) and the float outputs by
//     at most an ulp or two: |gpu − cpu| ≤ 1e-6 · max(|cpu|, 1). A wrong
//     term or a wrong statistic errs by orders of magnitude more.
//   Every kernel: bit-identical on a second run, nothing written outside its
//   output (guard zones), every output element written (outputs start NaN).
//
// Every test starts with HPMC_REQUIRE_GPU(); every suite name starts with
// "GpuBnPool", so --gtest_filter='GpuBnPool*' selects exactly this file.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "dev_array.h"
#include "gpu_testing.h"
#include "layers/cpu/avgpool2d_ops.h"
#include "layers/cpu/batchnorm_ops.h"
#include "layers/cpu/dropout_ops.h"
#include "layers/cpu/upsample2d_ops.h"
#include "layers/gpu/batchnorm_kernels.h"
#include "layers/gpu/dropout_kernels.h"
#include "layers/gpu/resample_kernels.h"

namespace hpmc {
namespace {

using testing::DevArray;
using testing::finish;
using testing::input;
using testing::kGuard;
using testing::kNaN;
using testing::random_floats;
using testing::same_bits;

// An output array: payload NaN (an unwritten element fails), guards kGuard.
std::unique_ptr<DevArray> output(size_t n, float fill = kNaN) {
  auto d = std::make_unique<DevArray>(n);
  d->upload(std::vector<float>(n, fill), kGuard);
  return d;
}
std::unique_ptr<DevArray> output(const std::vector<float>& v) {
  auto d = std::make_unique<DevArray>(v.size());
  d->upload(v, kGuard);
  return d;
}

// Bit-for-bit equality, naming the first differing element.
::testing::AssertionResult same(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  if (gpu.size() != cpu.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < gpu.size(); ++i)
    if (!same_bits(gpu[i], cpu[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": gpu " << gpu[i] << " vs cpu " << cpu[i];
  return ::testing::AssertionSuccess();
}

// |gpu − cpu| ≤ tol · max(|cpu|, 1) everywhere (and no NaN).
::testing::AssertionResult close(const std::vector<float>& gpu, const std::vector<float>& cpu,
                                 double tol = 1e-6) {
  if (gpu.size() != cpu.size()) return ::testing::AssertionFailure() << "sizes differ";
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const double d = std::fabs(double(gpu[i]) - double(cpu[i])) /
                     std::max(std::fabs(double(cpu[i])), 1.0);
    if (!(d <= tol))
      return ::testing::AssertionFailure()
             << "element " << i << ": gpu " << gpu[i] << " vs cpu " << cpu[i];
    if (d > worst) worst = d, at = i;
  }
  return ::testing::AssertionSuccess() << "max relative difference " << worst << " at " << at;
}

// ---- dropout -------------------------------------------------------------------------------

TEST(GpuBnPoolDropout, MatchesTheCpuBitForBit) {
  HPMC_REQUIRE_GPU();
  Rng rng(31);
  struct Case {
    size_t n;
    double p;
    uint64_t seed, stream, step;
  };
  const Case cases[] = {{1, 0.5, 1, 0, 0},           {3, 0.5, 1, 0, 1},
                        {5, 0.1, 2, 3, 7},           {4 * 33 + 1, 0.9, 7, 1, 1000},
                        {1 * 3 * 5 * 7, 0.5, 9, 2, 3}, {5 * 17 * 19 * 3 + 2, 0.25, 11, 4, 123456789},
                        {1000003, 0.5, 42, 0, uint64_t(1) << 33}, {77, 0.0, 1, 1, 1},
                        {77, 1.0, 1, 1, 1}};
  for (const Case& c : cases) {
    const std::string what = "n " + std::to_string(c.n) + " p " + std::to_string(c.p) +
                             " step " + std::to_string(c.step);
    const std::vector<float> x = random_floats(c.n, rng);
    std::vector<float> ref(c.n);
    dropout_forward(x.data(), ref.data(), c.n, c.p, c.seed, c.stream, c.step);
    auto dx = input(x);
    auto y = output(c.n);
    gpu::dropout_apply(dx->ptr(), y->ptr(), c.n, make_dropout_mask(c.p, c.seed, c.stream, c.step),
                       dropout_scale<float>(c.p));
    finish("dropout_apply");
    EXPECT_TRUE(same(y->payload(), ref)) << what;
    EXPECT_TRUE(y->guards_intact(kGuard)) << what;
  }
}

TEST(GpuBnPoolDropout, MisalignedArraysAndASecondRunGiveTheSameBits) {
  HPMC_REQUIRE_GPU();
  Rng rng(32);
  const size_t n = 4099;
  const std::vector<float> x = random_floats(n, rng);
  std::vector<float> ref(n);
  dropout_backward(x.data(), ref.data(), n, 0.3, 5, 6, 7);
  auto in = input(x, /*misalign=*/1);
  for (int run = 0; run < 2; ++run) {
    auto out = std::make_unique<DevArray>(n, 1);
    out->upload(std::vector<float>(n, kNaN), kGuard);
    gpu::dropout_apply(in->ptr(), out->ptr(), n, make_dropout_mask(0.3, 5, 6, 7),
                       dropout_scale<float>(0.3));
    finish("dropout_apply");
    EXPECT_TRUE(same(out->payload(), ref)) << "run " << run;
    EXPECT_TRUE(out->guards_intact(kGuard));
  }
}

// ---- avgpool2d -----------------------------------------------------------------------------

TEST(GpuBnPoolAvgPool, MatchesTheCpuBitForBit) {
  HPMC_REQUIRE_GPU();
  struct Case {
    int n, c, h, w, k, s;
  };
  const Case cases[] = {{1, 1, 4, 4, 2, 2},  {1, 3, 7, 9, 3, 2},   {2, 5, 5, 6, 2, 1},
                        {1, 5, 5, 7, 2, 3},  {3, 1, 1, 1, 1, 1},   {1, 3, 13, 11, 3, 1},
                        {4, 3, 32, 32, 2, 2}, {1, 1, 9, 9, 5, 2},  {2, 3, 31, 17, 4, 3}};
  Rng rng(33);
  for (const Case& c : cases) {
    const std::string what = std::to_string(c.n) + "x" + std::to_string(c.c) + "x" +
                             std::to_string(c.h) + "x" + std::to_string(c.w) + " k" +
                             std::to_string(c.k) + " s" + std::to_string(c.s);
    const int64_t planes = int64_t(c.n) * c.c;
    const int oh = pool_out_size(c.h, c.k, c.s), ow = pool_out_size(c.w, c.k, c.s);
    const size_t in_n = size_t(planes) * c.h * c.w, out_n = size_t(planes) * oh * ow;
    const std::vector<float> x = random_floats(in_n, rng), dy = random_floats(out_n, rng);
    std::vector<float> y_ref(out_n), dx_ref(in_n);
    avgpool2d_forward(x.data(), y_ref.data(), planes, c.h, c.w, c.k, c.s);
    avgpool2d_backward(dy.data(), dx_ref.data(), planes, c.h, c.w, c.k, c.s);
    auto xd = input(x), dyd = input(dy);
    for (int run = 0; run < 2; ++run) {
      auto y = output(out_n), dx = output(in_n);
      gpu::avgpool2d_forward(xd->ptr(), y->ptr(), planes, c.h, c.w, c.k, c.s);
      gpu::avgpool2d_backward(dyd->ptr(), dx->ptr(), planes, c.h, c.w, c.k, c.s);
      finish("avgpool2d");
      EXPECT_TRUE(same(y->payload(), y_ref)) << what << " forward, run " << run;
      EXPECT_TRUE(same(dx->payload(), dx_ref)) << what << " backward, run " << run;
      EXPECT_TRUE(y->guards_intact(kGuard)) << what;
      EXPECT_TRUE(dx->guards_intact(kGuard)) << what;
    }
  }
}

// ---- bilinear up-sampling --------------------------------------------------------------------

TEST(GpuBnPoolBilinear, MatchesTheCpuBitForBit) {
  HPMC_REQUIRE_GPU();
  struct Case {
    int n, c, h, w, s;
  };
  const Case cases[] = {{1, 1, 1, 1, 2},  {1, 3, 3, 5, 2},  {2, 5, 4, 3, 3},  {1, 1, 1, 2, 4},
                        {3, 3, 7, 1, 2},  {1, 5, 9, 11, 3}, {4, 3, 16, 16, 2}, {1, 3, 5, 5, 1},
                        {2, 1, 13, 7, 4}};
  Rng rng(34);
  for (const Case& c : cases) {
    const std::string what = std::to_string(c.n) + "x" + std::to_string(c.c) + "x" +
                             std::to_string(c.h) + "x" + std::to_string(c.w) + " x" +
                             std::to_string(c.s);
    const int64_t planes = int64_t(c.n) * c.c;
    const size_t in_n = size_t(planes) * c.h * c.w, out_n = in_n * size_t(c.s) * size_t(c.s);
    const std::vector<float> x = random_floats(in_n, rng), dy = random_floats(out_n, rng);
    std::vector<float> y_ref(out_n), dx_ref(in_n);
    upsample2d_bilinear_forward(x.data(), y_ref.data(), planes, c.h, c.w, c.s);
    upsample2d_bilinear_backward(dy.data(), dx_ref.data(), planes, c.h, c.w, c.s);
    auto xd = input(x), dyd = input(dy);
    for (int run = 0; run < 2; ++run) {
      auto y = output(out_n), dx = output(in_n);
      gpu::upsample2d_bilinear_forward(xd->ptr(), y->ptr(), planes, c.h, c.w, c.s);
      gpu::upsample2d_bilinear_backward(dyd->ptr(), dx->ptr(), planes, c.h, c.w, c.s);
      finish("upsample2d bilinear");
      EXPECT_TRUE(same(y->payload(), y_ref)) << what << " forward, run " << run;
      EXPECT_TRUE(same(dx->payload(), dx_ref)) << what << " backward, run " << run;
      EXPECT_TRUE(y->guards_intact(kGuard)) << what;
      EXPECT_TRUE(dx->guards_intact(kGuard)) << what;
    }
  }
}

// ---- batchnorm2d ---------------------------------------------------------------------------

// C doubles on the device.
struct DevDoubles {
  explicit DevDoubles(size_t n) : n(n), mem(gpu::allocate_shared(n * sizeof(double))) {}
  double* ptr() { return static_cast<double*>(mem.get()); }
  std::vector<double> download() const {
    std::vector<double> v(n);
    gpu::copy(v.data(), Device::kCPU, mem.get(), Device::kGPU, n * sizeof(double));
    return v;
  }
  size_t n;
  std::shared_ptr<void> mem;
};

struct BnCase {
  int n, c, h, w;
  std::string name() const {
    return std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" +
           std::to_string(w);
  }
};
// Training needs N·H·W > 1 per channel.
const BnCase kBnCases[] = {{1, 1, 1, 5}, {1, 3, 7, 5},  {2, 5, 9, 11}, {3, 1, 1, 1},
                           {5, 3, 17, 1}, {1, 5, 3, 3}, {64, 3, 32, 32}, {7, 5, 4, 4}};

TEST(GpuBnPoolBatchNorm, TrainingMatchesTheCpu) {
  HPMC_REQUIRE_GPU();
  Rng rng(35);
  for (const BnCase& c : kBnCases) {
    const BatchNormDims d{c.n, c.c, size_t(c.h) * c.w};
    const size_t n = size_t(c.n) * c.c * c.h * c.w, C = size_t(c.c);
    std::vector<float> x = random_floats(n, rng), dy = random_floats(n, rng);
    for (float& v : x) v = 3.f * v + 0.5f;  // a mean away from 0
    std::vector<float> gamma = random_floats(C, rng), beta = random_floats(C, rng);
    std::vector<float> rm0 = random_floats(C, rng), rv0(C), dg0 = random_floats(C, rng),
                       db0 = random_floats(C, rng);
    for (float& v : rv0) v = rng.uniform(0.5f, 2.f);
    // CPU reference (float ops, double statistics).
    std::vector<float> y_ref(n), dx_ref(n), rm_ref = rm0, rv_ref = rv0, dg_ref = dg0,
                                            db_ref = db0;
    std::vector<double> sm_ref(C), si_ref(C);
    batchnorm_forward_train(d, x.data(), gamma.data(), beta.data(), kBatchNormEps,
                            kBatchNormMomentum, y_ref.data(), rm_ref.data(), rv_ref.data(),
                            sm_ref.data(), si_ref.data());
    batchnorm_backward_train(d, x.data(), dy.data(), gamma.data(), sm_ref.data(), si_ref.data(),
                             dx_ref.data(), dg_ref.data(), db_ref.data());
    auto xd = input(x), dyd = input(dy), gd = input(gamma), bd = input(beta);
    std::vector<float> first_y, first_dx;
    for (int run = 0; run < 2; ++run) {
      const std::string what = c.name() + " run " + std::to_string(run);
      auto y = output(n), dx = output(n), rm = output(rm0), rv = output(rv0), dg = output(dg0),
           db = output(db0);
      DevDoubles sm(C), si(C);
      gpu::batchnorm_forward_train(d, xd->ptr(), gd->ptr(), bd->ptr(), kBatchNormEps,
                                   kBatchNormMomentum, y->ptr(), rm->ptr(), rv->ptr(), sm.ptr(),
                                   si.ptr());
      gpu::batchnorm_backward_train(d, xd->ptr(), dyd->ptr(), gd->ptr(), sm.ptr(), si.ptr(),
                                    dx->ptr(), dg->ptr(), db->ptr());
      finish("batchnorm training");
      EXPECT_TRUE(close(y->payload(), y_ref)) << what << " y";
      EXPECT_TRUE(close(dx->payload(), dx_ref)) << what << " dx";
      EXPECT_TRUE(close(rm->payload(), rm_ref)) << what << " running_mean";
      EXPECT_TRUE(close(rv->payload(), rv_ref)) << what << " running_var";
      EXPECT_TRUE(close(dg->payload(), dg_ref)) << what << " dgamma (accumulated)";
      EXPECT_TRUE(close(db->payload(), db_ref)) << what << " dbeta (accumulated)";
      const std::vector<double> smg = sm.download(), sig = si.download();
      for (size_t k = 0; k < C; ++k) {
        EXPECT_NEAR(smg[k], sm_ref[k], 1e-13 * std::max(1.0, std::fabs(sm_ref[k]))) << what;
        EXPECT_NEAR(sig[k], si_ref[k], 1e-13 * std::max(1.0, std::fabs(si_ref[k]))) << what;
      }
      for (DevArray* a : {y.get(), dx.get(), rm.get(), rv.get(), dg.get(), db.get()})
        EXPECT_TRUE(a->guards_intact(kGuard)) << what;
      if (run == 0) {
        first_y = y->payload();
        first_dx = dx->payload();
      } else {
        EXPECT_TRUE(same(y->payload(), first_y)) << what << ": y differs between runs";
        EXPECT_TRUE(same(dx->payload(), first_dx)) << what << ": dx differs between runs";
      }
    }
  }
}

TEST(GpuBnPoolBatchNorm, WithoutAffineParametersOrRunningStatistics) {
  HPMC_REQUIRE_GPU();
  Rng rng(36);
  const BatchNormDims d{3, 5, 7 * 3};
  const size_t n = 3 * 5 * 21;
  const std::vector<float> x = random_floats(n, rng), dy = random_floats(n, rng);
  std::vector<float> y_ref(n), dx_ref(n);
  std::vector<double> sm_ref(5), si_ref(5);
  batchnorm_forward_train(d, x.data(), (const float*)nullptr, (const float*)nullptr, 1e-3, 0.5,
                          y_ref.data(), (float*)nullptr, (float*)nullptr, sm_ref.data(),
                          si_ref.data());
  batchnorm_backward_train(d, x.data(), dy.data(), (const float*)nullptr, sm_ref.data(),
                           si_ref.data(), dx_ref.data(), (float*)nullptr, (float*)nullptr);
  auto xd = input(x), dyd = input(dy);
  auto y = output(n), dx = output(n);
  DevDoubles sm(5), si(5);
  gpu::batchnorm_forward_train(d, xd->ptr(), nullptr, nullptr, 1e-3, 0.5, y->ptr(), nullptr,
                               nullptr, sm.ptr(), si.ptr());
  gpu::batchnorm_backward_train(d, xd->ptr(), dyd->ptr(), nullptr, sm.ptr(), si.ptr(), dx->ptr(),
                                nullptr, nullptr);
  finish("batchnorm training, no affine");
  EXPECT_TRUE(close(y->payload(), y_ref));
  EXPECT_TRUE(close(dx->payload(), dx_ref));
}

TEST(GpuBnPoolBatchNorm, EvalMatchesTheCpu) {
  HPMC_REQUIRE_GPU();
  Rng rng(37);
  const BnCase eval_cases[] = {{1, 1, 1, 1}, {1, 3, 7, 5}, {2, 5, 9, 11}, {64, 3, 32, 32}};
  for (const BnCase& c : eval_cases) {
    const BatchNormDims d{c.n, c.c, size_t(c.h) * c.w};
    const size_t n = size_t(c.n) * c.c * c.h * c.w, C = size_t(c.c);
    const std::vector<float> x = random_floats(n, rng), dy = random_floats(n, rng);
    const std::vector<float> gamma = random_floats(C, rng), beta = random_floats(C, rng),
                             rm = random_floats(C, rng);
    std::vector<float> rv(C);
    for (float& v : rv) v = rng.uniform(0.1f, 3.f);
    std::vector<float> y_ref(n), dx_ref(n), dg_ref(C, 0.f), db_ref(C, 0.f);
    batchnorm_forward_eval(d, x.data(), gamma.data(), beta.data(), rm.data(), rv.data(),
                           kBatchNormEps, y_ref.data());
    batchnorm_backward_eval(d, x.data(), dy.data(), gamma.data(), rm.data(), rv.data(),
                            kBatchNormEps, dx_ref.data(), dg_ref.data(), db_ref.data());
    auto xd = input(x), dyd = input(dy), gd = input(gamma), bd = input(beta), rmd = input(rm),
         rvd = input(rv);
    auto y = output(n), dx = output(n), dg = output(C, 0.f), db = output(C, 0.f);
    gpu::batchnorm_forward_eval(d, xd->ptr(), gd->ptr(), bd->ptr(), rmd->ptr(), rvd->ptr(),
                                kBatchNormEps, y->ptr());
    gpu::batchnorm_backward_eval(d, xd->ptr(), dyd->ptr(), gd->ptr(), rmd->ptr(), rvd->ptr(),
                                 kBatchNormEps, dx->ptr(), dg->ptr(), db->ptr());
    finish("batchnorm eval");
    EXPECT_TRUE(same(y->payload(), y_ref)) << c.name() << " y";
    EXPECT_TRUE(same(dx->payload(), dx_ref)) << c.name() << " dx";
    EXPECT_TRUE(close(dg->payload(), dg_ref)) << c.name() << " dgamma";
    EXPECT_TRUE(close(db->payload(), db_ref)) << c.name() << " dbeta";
    for (DevArray* a : {y.get(), dx.get(), dg.get(), db.get()})
      EXPECT_TRUE(a->guards_intact(kGuard)) << c.name();
  }
}

}  // namespace
}  // namespace hpmc
