// Sizes and memory: every tensor's element count is checked against the
// 32-bit limit the kernels index with (shape.h) before anything is
// allocated, and a run's memory plan (model/memory.h) is printed and
// checked against what the machine has. A config that needs more is refused
// with one line, never a crash, an overflow or the OOM killer.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "cli_runner.h"
#include "core/device.h"
#include "model/memory.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "testing.h"

namespace hpmc {
namespace {

std::string error_of(const std::string& yaml, const Shape& sample, int num_classes = 10) {
  try {
    Config cfg = parse_config(yaml, "m.yaml");
    auto m = Model::build(cfg, Impl::kCpu, sample, num_classes);
    return "";
  } catch (const ConfigError& e) {
    return e.what();
  }
}

// The audit's config: a linear layer of 5,402,496 × 784 weights, whose count
// passed 2^31 and was truncated by int(): SIGSEGV in release, an overflow
// under ASan. Now refused before any allocation, naming the layer.
TEST(Sizes, LinearWeightPastTheLimitIsRefused) {
  const std::string e = error_of(R"(data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {type: flatten}
    - {type: linear, out_features: 5402496}
    - {type: relu}
    - {type: linear, out_features: 10}
)",
                                 Shape(1, 1, 28, 28));
  EXPECT_NE(e.find("m.yaml:6:7: layer 'linear2' (linear): its weight [5402496, 784] would hold "
                   "4235556864 values, more than 2147483647"),
            std::string::npos)
      << e;
}

TEST(Sizes, ConvWeightAndColumnPastTheLimitAreRefused) {
  std::string e = error_of(R"(data: {format: cifar10}
model:
  loss: mse
  layers:
    - {type: conv2d, out_channels: 65536, padding: 1}
    - {type: conv2d, out_channels: 65536, padding: 1}
    - {type: conv2d, out_channels: 3, padding: 1}
)",
                           Shape(1, 3, 32, 32));
  EXPECT_NE(e.find("layer 'conv2d2' (conv2d): its weight [65536, 65536, 3, 3] would hold "
                   "38654705664 values"),
            std::string::npos)
      << e;
  // A 3x3 kernel over 60,000 channels of 64x64: a column matrix of
  // 540,000 x 4,096 values per image.
  e = error_of(R"(data: {format: cifar10}
model:
  loss: mse
  layers:
    - {type: conv2d, out_channels: 60000, kernel: 1}
    - {type: upsample2d, scale: 2}
    - {type: conv2d, out_channels: 3, padding: 1}
    - {type: maxpool2d}
)",
               Shape(1, 3, 32, 32));
  EXPECT_NE(e.find("layer 'conv2d3' (conv2d): conv2d on input 60000x64x64 would need a column "
                   "matrix of 540000 x 4096 = 2211840000"),
            std::string::npos)
      << e;
}

TEST(Sizes, UpsamplePastTheLimitIsRefused) {
  const std::string e = error_of(R"(data: {format: mnist}
model:
  loss: mse
  layers:
    - {type: upsample2d, scale: 64}
    - {type: upsample2d, scale: 64}
)",
                                 Shape(1, 1, 28, 28));
  EXPECT_NE(e.find("layer 'upsample2d2' (upsample2d): upsample2d x64 of input 1x1792x1792 would "
                   "give 1x114688x114688"),
            std::string::npos)
      << e;
}

TEST(Sizes, BatchPastTheLimitIsRefused) {
  Config cfg = parse_config(R"(data: {format: cifar10}
model:
  loss: mse
  layers:
    - {type: conv2d, out_channels: 4096, padding: 1}
    - {type: relu}
    - {type: conv2d, out_channels: 3, padding: 1}
)",
                            "m.yaml");
  auto m = Model::build(cfg, Impl::kCpu, Shape(1, 3, 32, 32), 10);
  EXPECT_NO_THROW(m->check_batch(511, "training.batch_size"));
  try {
    m->check_batch(512, "training.batch_size");
    ADD_FAILURE() << "batch 512 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "training.batch_size 512: the output of layer 'conv2d1' (4194304 values per "
                  "sample) would hold 2147483648 values for the batch, more than 2147483647; use "
                  "a batch of at most 511"),
              std::string::npos)
        << e.what();
  }
}

// What allocate(n) allocates, counted by hand for a small model: each
// layer's output, two gradient buffers of the largest tensor, and the
// output gradient.
TEST(Memory, ActivationBytesCountWhatAllocateTakes) {
  Config cfg = parse_config(R"(data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {type: flatten}
    - {type: linear, out_features: 300}
    - {type: relu}
    - {type: linear, out_features: 10}
)",
                            "m.yaml");
  auto m = Model::build(cfg, Impl::kCpu, Shape(1, 1, 28, 28), 10);
  const size_t n = 5;
  const size_t acts = n * (784 + 300 + 300 + 10), biggest = n * 784, dout = n * 10;
  EXPECT_EQ(m->activation_bytes(int(n)), (acts + 2 * biggest + dout) * sizeof(float));
  EXPECT_EQ(m->workspace_bytes(int(n)), 0u);  // linear layers keep no scratch

  const DataFootprint data{1000, 100, 784};
  const MemoryPlan p = plan_memory(*m, int(n), data, optimizer_state_buffers(cfg.training.optimizer));
  EXPECT_TRUE(p.device.empty());
  const size_t params = m->params().padded() * sizeof(float);
  const size_t input = n * (784 * sizeof(float) + sizeof(int32_t));
  const size_t dataset = 1100 * (784 + sizeof(int32_t)) + 1000 * sizeof(int32_t);
  // Parameters and gradients (sgd without momentum keeps no state), two host copies.
  EXPECT_EQ(p.host_bytes(),
            2 * params + m->activation_bytes(int(n)) + input + 2 * params + dataset);
  // SGD with momentum keeps one more buffer of the parameters' size, Adam two.
  EXPECT_EQ(plan_memory(*m, int(n), data, 1).host_bytes(), p.host_bytes() + params);
  EXPECT_EQ(plan_memory(*m, int(n), data, 2).host_bytes(), p.host_bytes() + 2 * params);
  Config adam = parse_config(R"(data: {format: mnist}
model: {loss: mse, layers: [{type: flatten}]}
training: {optimizer: {type: adamw}}
)", "a.yaml");
  EXPECT_EQ(optimizer_state_buffers(adam.training.optimizer), 2);
}

TEST(Memory, ConvWorkspaceIsCounted) {
  Config cfg = parse_config(R"(data: {format: cifar10}
model:
  loss: mse
  layers:
    - {type: conv2d, out_channels: 8, padding: 1}
    - {type: conv2d, out_channels: 3, padding: 1}
)",
                            "m.yaml");
  auto m = Model::build(cfg, Impl::kCpu, Shape(1, 3, 32, 32), 10);
  // At least one thread's column matrix per layer: 3·9 x 1024 and 8·9 x 1024.
  EXPECT_GE(m->workspace_bytes(4), (27 + 72) * 1024 * sizeof(float));
}

TEST(Memory, FormatBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(100.0 * 1024 * 1024), "100.0 MiB");
  EXPECT_EQ(format_bytes(3.0 * 1024 * 1024 * 1024 * 1024), "3.00 TiB");
}

// The plan is printed under the model table, and a run that does not fit
// is refused before training with the bytes needed and available.
class MemoryCli : public ::testing::Test {
 protected:
  testing::TempDir tmp;
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(tmp.file(name)) << text;
    return tmp.file(name);
  }
  testing::CliResult run(const std::string& config, const std::string& args,
                         const std::string& env = "") {
    return testing::run_hpmc("run " + config + " " + args + " --out " + tmp.file("run") +
                                 " --weights-dir " + tmp.file("w") + " --progress quiet",
                             env);
  }
};

constexpr const char* kWideAe = R"(data: {format: cifar10, synthetic: true}
model:
  loss: mse
  layers:
    - {type: conv2d, out_channels: 4096, padding: 1}
    - {type: relu}
    - {type: conv2d, out_channels: 3, padding: 1}
training: {batch_size: 100}
)";

TEST_F(MemoryCli, RunTooLargeForTheLimitIsRefused) {
  const std::string cfg = write("wide.yaml", kWideAe);
  testing::CliResult r = run(cfg, "", "HPMC_MEMORY_LIMIT=4G");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("memory: host "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("hpmc: error: this run needs "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("activations and their gradients at batch 100 6.25 GiB"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("but 4.00 GiB are available (HPMC_MEMORY_LIMIT); lower "
                       "training.batch_size (now 100, --batch N)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.out.find("epoch 1"), std::string::npos) << "it trained:\n" << r.out;
}

TEST_F(MemoryCli, ParametersTooLargeAreRefusedBeforeAllocation) {
  // 784 x 1,000,000 weights: 3.1 GB a buffer, 15.7 GB with gradients,
  // momentum and the host copies; refused under a 1 GiB limit before any
  // of it is allocated.
  const std::string cfg = write("wide_mlp.yaml", R"(data: {format: mnist, synthetic: true}
training: {momentum: 0.9}
model:
  loss: softmax_cross_entropy
  layers:
    - {type: flatten}
    - {type: linear, out_features: 1000000}
    - {type: relu}
    - {type: linear, out_features: 10}
)");
  testing::CliResult r = run(cfg, "", "HPMC_MEMORY_LIMIT=1G");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("hpmc: error: the model's parameters take 14.8 GiB of host memory"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("1.00 GiB are available (HPMC_MEMORY_LIMIT)"), std::string::npos) << r.err;
}

TEST_F(MemoryCli, BadLimitIsAUsageError) {
  const std::string cfg = write("wide.yaml", kWideAe);
  testing::CliResult r = run(cfg, "", "HPMC_MEMORY_LIMIT=lots");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("HPMC_MEMORY_LIMIT=lots: expected a size in bytes, or a number with K, M, "
                       "G or T (e.g. 8G)"),
            std::string::npos)
      << r.err;
}

TEST_F(MemoryCli, BatchPastTheElementLimitIsAConfigError) {
  const std::string cfg = write("wide.yaml", kWideAe);
  testing::CliResult r = run(cfg, "--batch 600");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("training.batch_size 600: the output of layer 'conv2d1'"),
            std::string::npos)
      << r.err;
}

// On the GPU the plan is checked against the device's free memory: twenty
// 2048-channel 32x32 layers at batch 1000 need about 170 GB of activations,
// more than an H100 or H200 has.
TEST(GpuMemory, RunTooLargeForTheGpuIsRefused) {
  if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device: the GPU plan is not checked";
  testing::TempDir tmp;
  std::string layers;
  for (int i = 0; i < 20; ++i) layers += "    - {type: conv2d, out_channels: 2048, padding: 1}\n";
  std::ofstream(tmp.file("deep.yaml"))
      << "data: {format: cifar10, synthetic: true}\nmodel:\n  loss: mse\n  layers:\n"
      << layers << "    - {type: conv2d, out_channels: 3, padding: 1}\n"
      << "training: {batch_size: 1000}\n";
  testing::CliResult r =
      testing::run_hpmc("run " + tmp.file("deep.yaml") + " --impl im2col --out " +
                        tmp.file("run") + " --weights-dir " + tmp.file("w") + " --progress quiet");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("; GPU "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("of GPU memory (activations and their gradients at batch 1000"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("are free on the GPU; lower training.batch_size (now 1000"),
            std::string::npos)
      << r.err;
}

// The plan counts the splits a command loads: recon and eval read only the
// test set (10,000 MNIST images of 784 bytes and a 4-byte label: 7.51 MiB),
// a run both (with the epoch order: 52.8 MiB). The plan is printed before the
// weights are read, so a missing file still shows it.
TEST(MemoryRecon, PlanCountsOnlyTheSplitsLoaded) {
  testing::CliResult r =
      testing::run_hpmc("recon configs/fashion_ae.yaml --weights /nonexistent.safetensors");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("dataset 7.51 MiB"), std::string::npos) << r.out;
  testing::TempDir tmp;
  r = testing::run_hpmc("run configs/fashion_ae.yaml --data /nonexistent --out " +
                        tmp.file("r") + " --weights-dir " + tmp.file("w"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("dataset 52.8 MiB"), std::string::npos) << r.out;
}

TEST(MemoryRecon, CountHasAnUpperBound) {
  testing::CliResult r = testing::run_hpmc(
      "recon configs/fashion_ae.yaml --weights /nonexistent.safetensors --count 5000");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--count must be between 1 and 1024"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hpmc
