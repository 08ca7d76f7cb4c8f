// `hpmc bench`: the FLOP counts it divides by (against the figures the
// project quotes), the CPU peak estimate, and the command as a user runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>

#include "cli/bench.h"
#include "cli_runner.h"
#include "core/device.h"
#include "data/dataset.h"
#include "layers/conv2d_spec.h"
#include "layers/linear_spec.h"
#include "model/config.h"
#include "model/model.h"

namespace hpmc {
namespace {

std::unique_ptr<Model> build_shipped(const std::string& config) {
  Config c = load_config(testing::source_dir() + "/" + config);
  DataFormat f = parse_data_format(c.data.format);
  return Model::build(c, Impl::kCpu, sample_shape(f), num_classes(f));
}

TEST(Bench, ConvAndLinearFlops) {
  Conv2dConfig c;
  c.in_channels = 3;
  c.out_channels = 8;
  c.kernel = 3;
  c.padding = 1;
  const Shape in(2, 3, 5, 5);  // P = Q = 5
  const double fwd = 2.0 * 2 * 8 * 5 * 5 * 3 * 3 * 3;
  EXPECT_EQ(conv2d_forward_flops(c, in), fwd);
  EXPECT_EQ(conv2d_backward_flops(c, in, true), 2 * fwd);
  EXPECT_EQ(conv2d_backward_flops(c, in, false), fwd);
  c.stride = 2;  // P = Q = 3
  EXPECT_EQ(conv2d_forward_flops(c, in), 2.0 * 2 * 8 * 3 * 3 * 3 * 3 * 3);

  LinearConfig l{784, 320, true};
  const Shape x(64, 784, 1, 1);
  EXPECT_EQ(linear_forward_flops(l, x), 2.0 * 64 * 784 * 320);
  EXPECT_EQ(linear_backward_flops(l, x, true), 4.0 * 64 * 784 * 320);
  EXPECT_EQ(linear_backward_flops(l, x, false), 2.0 * 64 * 784 * 320);
}

TEST(Bench, CifarAutoencoderIs1033MflopPerImage) {
  auto m = build_shipped("configs/cifar_ae.yaml");
  // Forward 349.2 MFLOP; backward the weight gradients of all five convs and
  // the input gradients of conv2..conv5 (conv1's input needs none).
  const double per_image = m->train_flops(1);
  EXPECT_EQ(per_image, 1033371648.0);
  EXPECT_NEAR(per_image / 1e9, 1.033, 0.0005);
  EXPECT_EQ(m->train_flops(64), 64 * per_image);
  EXPECT_TRUE(m->runs_backward(0));
  EXPECT_FALSE(m->needs_input_grad(0));
  EXPECT_TRUE(m->needs_input_grad(1));
  // The element-wise layers count nothing.
  const auto lf = m->layer_flops(1);
  ASSERT_EQ(lf.size(), m->layers().size());
  for (size_t i = 0; i < lf.size(); ++i)
    if (std::string(m->layers()[i]->type()) != "conv2d")
      EXPECT_EQ(lf[i].forward + lf[i].backward, 0) << m->layers()[i]->name();
}

TEST(Bench, MnistMlpIs132MflopPerSample) {
  auto m = build_shipped("configs/mnist_mlp.yaml");
  // 2·(784·320 + 320·160 + 160·10) forward, twice that backward, less fc1's
  // input gradient: the leading flatten needs no gradient, so neither does fc1.
  const double per_sample = m->train_flops(1);
  EXPECT_EQ(per_sample, 1320320.0);
  EXPECT_NEAR(per_sample / 1e6, 1.32, 0.005);
  EXPECT_FALSE(m->runs_backward(0));      // flatten
  EXPECT_TRUE(m->runs_backward(1));       // fc1 ...
  EXPECT_FALSE(m->needs_input_grad(1));   // ... without dx
  EXPECT_TRUE(m->needs_input_grad(2));
  EXPECT_EQ(build_shipped("configs/fashion_mlp.yaml")->train_flops(1), per_sample);
}

TEST(Bench, MeasuredCpuPeakIsPlausible) {
  const MeasuredPeak one = measure_cpu_fma_peak(1);
  EXPECT_TRUE(one.width == 16 || one.width == 8 || one.width == 1) << one.width;
  EXPECT_FALSE(one.isa.empty());
  // Any CPU this runs on does well over 100 MFLOP/s of FMAs on one thread,
  // and none does a teraflop.
  EXPECT_GT(one.flops, 1e8);
  EXPECT_LT(one.flops, 1e12);
}

TEST(Bench, CpuPeakEstimate) {
  const std::string intel =
      "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\ncpu MHz\t\t: 2199.998\n"
      "flags\t\t: fpu sse sse2 avx avx2 fma\n\nprocessor\t: 1\n";
  CpuPeak p = estimate_cpu_peak(intel, 2);
  EXPECT_EQ(p.model, "Intel(R) Xeon(R) CPU @ 2.20GHz");
  EXPECT_EQ(p.simd_floats, 8);
  EXPECT_DOUBLE_EQ(p.ghz, 2.2);
  EXPECT_NEAR(p.flops, 2 * 2 * 8 * 2 * 2.2e9, 1);

  const std::string amd =
      "model name\t: AMD EPYC\ncpu MHz\t\t: 2599.998\nflags\t\t: avx avx2 fma avx512f avx512bw\n";
  p = estimate_cpu_peak(amd, 4);
  EXPECT_EQ(p.simd_floats, 16);
  EXPECT_NEAR(p.ghz, 2.6, 1e-5);
  EXPECT_NEAR(p.flops, 4 * 2 * 16 * 2 * 2.599998e9, 1);

  p = estimate_cpu_peak("", 1);
  EXPECT_EQ(p.model, "unknown CPU");
  EXPECT_EQ(p.flops, 0);
}

TEST(Bench, Spread) {
  Spread s = spread({3, 1, 2});
  EXPECT_EQ(s.median, 2);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 3);
  EXPECT_EQ(spread({4, 1, 3, 2}).median, 2.5);
}

// The last line that starts with "bench: ".
std::string summary_line(const std::string& out) {
  std::istringstream in(out);
  std::string line, last;
  while (std::getline(in, line))
    if (line.rfind("bench: ", 0) == 0) last = line;
  return last;
}

TEST(Bench, CliRunsAndPrintsTheTableAndSummary) {
  auto r = testing::run_hpmc("bench configs/fashion_mlp.yaml --steps 3 --warmup 1 --repeats 2");
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_EQ(r.err, "");
  for (const char* s : {"benchmark: device CPU", "impl cpu, precision fp32, batch 64", "threads ",
                        "data synthetic", "FP32 peak (measured: ",
                        "1.32 MFLOP per training sample", "run 2/2",
                        "ms/step", "images/s", "epoch-equivalent s", "GFLOP/s", "of FP32 peak",
                        "per region", "fc1 fwd", "fc1 bwd", "fc3 bwd", "sgd", "step (sum)"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  EXPECT_EQ(r.out.find("flatten bwd"), std::string::npos) << r.out;  // not run (see Model::backward)
  const std::string sum = summary_line(r.out);
  EXPECT_TRUE(std::regex_match(
      sum, std::regex("bench: configs/fashion_mlp\\.yaml impl=cpu precision=fp32 batch=64 "
                      "ms/step=[0-9.]+ "
                      "img/s=[0-9]+ epoch_s=[0-9.]+ tflops=[0-9.e+-]+ peak_frac=([0-9.]+|na)")))
      << sum;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n') > 20, true);
}

TEST(Bench, BatchAndSetOverridesApply) {
  auto r = testing::run_hpmc(
      "bench configs/fashion_ae.yaml --batch 8 --steps 2 --warmup 0 --repeats 1 "
      "--set training.threads=1");
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("batch 8, threads 1, data synthetic"), std::string::npos) << r.out;
  EXPECT_NE(summary_line(r.out).find("impl=cpu precision=fp32 batch=8 "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("conv1 bwd"), std::string::npos) << r.out;
}

TEST(Bench, BadValuesGiveOneClearLine) {
  struct Case {
    const char* args;
    int code;
    const char* msg;
  } cases[] = {
      {"--steps 0", 2, "hpmc: error: --steps 0: must be between 1 and 1000000\n"},
      {"--repeats 0", 2, "hpmc: error: --repeats 0: must be between 1 and 1000\n"},
      {"--warmup -1", 2, "hpmc: error: --warmup -1: must be between 0 and 1000000\n"},
      {"--batch 0", 3, "training.batch_size"},
      {"--steps x", 2, "--steps"},
      {"--impl fast", 2, "unknown implementation 'fast'"},
  };
  for (const Case& c : cases) {
    auto r = testing::run_hpmc(std::string("bench configs/fashion_mlp.yaml ") + c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("hpmc: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.msg), std::string::npos) << c.args << "\n" << r.err;
  }
}

TEST(Bench, GpuImplWithoutAGpuIsRefused) {
  if (gpu::device_count() > 0) GTEST_SKIP() << "a CUDA device is present, so GPU impls run";
  auto r = testing::run_hpmc("bench configs/fashion_mlp.yaml --impl im2col --steps 1");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("use --impl cpu"), std::string::npos) << r.err;
}

TEST(Bench, HelpListsTheFlags) {
  auto r = testing::run_hpmc("bench --help");
  EXPECT_EQ(r.code, 0);
  for (const char* f : {"--impl", "--batch", "--steps", "--warmup", "--repeats", "--set", "--data",
                        "--real-data"})
    EXPECT_NE(r.out.find(f), std::string::npos) << f << "\n" << r.out;
}

}  // namespace
}  // namespace hpmc
