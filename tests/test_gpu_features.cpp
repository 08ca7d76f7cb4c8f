// `--impl auto` where a GPU is usable: eval, recon and features pick
// im2col and say so, and the GPU's exported features (CSV, LIBSVM and .npy
// from one run) agree with each other bit for bit and with the CPU's to
// float32 rounding. test_features.cpp has the CPU side.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "cli_runner.h"
#include "gpu_testing.h"
#include "io/npy.h"

namespace hpmc {
namespace {

using testing::run_hpmc;

const std::string kQuick = "configs/fashion_ae.yaml --set data.synthetic=true --set "
                           "data.train_limit=40 --set data.test_limit=23 ";

TEST(GpuFeatures, ImplAutoPicksTheGpu) {
  HPMC_REQUIRE_GPU();
  testing::TempDir t;
  // A checkpoint of one step on the CPU.
  auto r = run_hpmc("run " + kQuick + "--epochs 1 --batch 40 --progress quiet --out " +
                    t.file("run") + " --weights-dir " + t.file("w"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string w = " --weights " + t.file("w/fashion_ae.safetensors") + " ";

  for (const std::string cmd : {"eval " + kQuick, "recon " + kQuick + "--out " + t.file("rc") + " ",
                                "features " + kQuick + "--format all --out " + t.file("gpu") + " "}) {
    r = run_hpmc(cmd + w);
    ASSERT_EQ(r.code, 0) << cmd << r.err;
    EXPECT_EQ(r.out.rfind("impl auto: im2col (GPU 0: ", 0), 0u) << cmd << r.out;
    EXPECT_NE(r.out.find(", impl im2col, "), std::string::npos) << cmd << r.out;
  }
  r = run_hpmc("features " + kQuick + "--format npy --impl cpu --out " + t.file("cpu") + w);
  ASSERT_EQ(r.code, 0) << r.err;

  for (const char* split : {"train", "test"}) {
    NpyArray g = read_npy(t.file("gpu/features_") + split + ".npy");
    NpyArray c = read_npy(t.file("cpu/features_") + split + ".npy");
    ASSERT_EQ(g.shape, c.shape);
    const float* gv = reinterpret_cast<const float*>(g.data.data());
    const float* cv = reinterpret_cast<const float*>(c.data.data());
    double worst = 0;
    for (int64_t k = 0; k < g.numel(); ++k)
      worst = std::max(worst, std::fabs(double(gv[k]) - cv[k]) / std::max(1.0, std::fabs(double(cv[k]))));
    EXPECT_LE(worst, 1e-5) << split;
    // The GPU run's CSV holds the .npy's values exactly (first row checked).
    const std::string csv = testing::slurp(t.file("gpu/features_") + split + ".csv");
    const size_t row = csv.find('\n') + 1;
    const char* p = csv.c_str() + csv.find(',', row) + 1;
    for (int j = 0; j < 784; ++j) {
      char* end = nullptr;
      const float f = std::strtof(p, &end);
      ASSERT_EQ(std::memcmp(&f, &gv[j], 4), 0) << split << " value " << j;
      p = end + 1;
    }
  }
}

}  // namespace
}  // namespace hpmc
