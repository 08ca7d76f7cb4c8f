// The `hpmc` binary as a user meets it: exit codes, one-line errors, and a
// short real run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "cli_runner.h"
#include "fifo_testing.h"

namespace hpmc {
namespace {

using Result = testing::CliResult;
Result hpmc(const std::string& args) { return testing::run_hpmc(args); }

// `hpmc run ...` with its outputs in a fresh temporary directory, so that
// tests neither see nor leave runs/ or weights/ in the source tree.
Result hpmc_run(const std::string& args) {
  static testing::TempDir scratch;
  static int n = 0;
  std::string d = scratch.file("r" + std::to_string(n++));
  return testing::run_hpmc("run " + args + " --out " + d + " --weights-dir " + d);
}

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

TEST(Cli, NoSubcommandIsAUsageError) {
  Result r = hpmc("");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("hpmc: error:"), std::string::npos) << r.err;
}

TEST(Cli, HelpAndVersionSucceed) {
  EXPECT_EQ(hpmc("--help").code, 0);
  Result v = hpmc("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find(HPMC_VERSION), std::string::npos);
  Result h = hpmc("run --help");
  EXPECT_EQ(h.code, 0);
  for (const char* flag : {"--impl", "--data", "--epochs", "--batch", "--lr", "--seed", "--out", "--set"})
    EXPECT_NE(h.out.find(flag), std::string::npos) << flag;
}

TEST(Cli, InfoDescribesTheBuild) {
  Result r = hpmc("info");
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* s : {"hpmc " HPMC_VERSION, "CUDA support", "CUDA devices", "CPU", "OpenBLAS", "conv2d"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

// libgomp prints its settings at start-up with OMP_DISPLAY_ENV=verbose; hpmc
// re-executes itself with short waits, so the last block printed is the one
// in effect.
std::string last_spincount(const std::string& err) {
  const std::string key = "GOMP_SPINCOUNT = '";
  size_t at = err.rfind(key);
  if (at == std::string::npos) return "";
  at += key.size();
  return err.substr(at, err.find('\'', at) - at);
}

TEST(Cli, ThreadsSpinBrieflyUnlessTheUserChose) {
  const std::string clean = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose";
  Result r = testing::run_hpmc("info", clean);
  ASSERT_EQ(r.code, 0) << r.err;
  if (last_spincount(r.err).empty())
    GTEST_SKIP() << "the OpenMP runtime is not libgomp (OMP_DISPLAY_ENV shows no GOMP_SPINCOUNT)";
  EXPECT_EQ(last_spincount(r.err), "1000") << r.err;
  EXPECT_NE(r.out.find("thread waits : GOMP_SPINCOUNT=1000"), std::string::npos) << r.out;

  // A policy or spin count the user set is left alone.
  r = testing::run_hpmc("info", clean + " OMP_WAIT_POLICY=active");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(last_spincount(r.err), "1000") << r.err;
  EXPECT_NE(r.out.find("thread waits : OMP_WAIT_POLICY=active"), std::string::npos) << r.out;
  r = testing::run_hpmc("info", clean + " GOMP_SPINCOUNT=1234");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(last_spincount(r.err), "1234") << r.err;
  EXPECT_NE(r.out.find("thread waits : GOMP_SPINCOUNT=1234"), std::string::npos) << r.out;
}

// Threads default to the cores hpmc may run on, not all the machine's.
TEST(Cli, ThreadsDefaultToTheCoresItMayRunOn) {
  if (std::system("taskset -c 0 true >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "taskset (util-linux) is not installed";
  Result r = testing::run_hpmc_via("env -u OMP_NUM_THREADS taskset -c 0", "info");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("CPU threads  : 1 "), std::string::npos) << r.out;
}

TEST(Cli, MissingConfigArgument) {
  Result r = hpmc("run");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("config"), std::string::npos) << r.err;
}

TEST(Cli, MissingConfigFile) {
  Result r = hpmc_run("configs/nope.yaml");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.err, "hpmc: error: configs/nope.yaml: no such config file; the configs shipped with "
                   "hpmc are in configs/\n");
}

// A FIFO as the config used to block forever, /dev/zero to be read forever,
// and a directory was called empty.
TEST(Cli, ConfigThatIsNotARegularFileIsNamed) {
  testing::TempDir t;
  testing::make_fifo(t.file("fifo.yaml"));
  const std::pair<std::string, std::string> cases[] = {{t.file("fifo.yaml"), "a FIFO"},
                                                       {"/dev/zero", "a character device"},
                                                       {t.path().string(), "a directory"}};
  for (const auto& [path, what] : cases) {
    Result r = testing::run_hpmc_within(60, "run " + path + " --out " + t.file("o"));
    EXPECT_EQ(r.code, 3) << path << ": " << r.err;
    EXPECT_EQ(r.err, "hpmc: error: " + path + ": is " + what + ", not a regular file; give a "
                     "YAML config file, e.g. configs/fashion_ae.yaml\n");
  }
}

TEST(Cli, GpuImplSuggestsCpu) {
  for (const char* impl : {"naive", "tiled", "im2col"}) {
    Result r = hpmc_run(std::string("configs/fashion_mlp.yaml --impl ") + impl);
    if (r.code == 0) continue;  // a GPU build on a GPU machine may run it
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("use --impl cpu"), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
  }
}

TEST(Cli, UnknownImpl) {
  Result r = hpmc_run("configs/fashion_mlp.yaml --impl fast");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown implementation 'fast'; choose one of: auto, cpu, naive, tiled, "
                       "im2col"),
            std::string::npos) << r.err;
}

TEST(Cli, FlagValuesAreValidatedLikeConfigKeys) {
  Result r = hpmc_run("configs/fashion_mlp.yaml --epochs 0");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.err, "hpmc: error: --epochs 0: training.epochs: must be between 1 and 1000000, got 0\n");
  r = hpmc_run("configs/fashion_mlp.yaml --set training.lr=.nan");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("--set training.lr=.nan: training.lr: must be a finite number"), std::string::npos)
      << r.err;
  r = hpmc_run("configs/fashion_mlp.yaml --set training.batch=3");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("did you mean 'batch_size'?"), std::string::npos) << r.err;
  r = hpmc_run("configs/fashion_mlp.yaml --epochs many");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("--epochs many: training.epochs: expected an integer"), std::string::npos) << r.err;
}

TEST(Cli, MissingDatasetNamesTheFilesAndExitsWithDataCode) {
  Result r = hpmc_run("configs/fashion_mlp.yaml --data /nonexistent/fashion");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/fashion"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("train-images-idx3-ubyte"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  // The model table was printed before any data was read.
  EXPECT_NE(r.out.find("fc1"), std::string::npos) << r.out;
}

TEST(Cli, ShortRealRunOnFashionMnist) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)";
  Result r = hpmc_run("configs/fashion_mlp.yaml --epochs 1 --set data.train_limit=3000 "
                      "--set data.test_limit=500 --progress lines");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"fc1", "total parameters: 304,170", "3000 train, 500 test", "epoch 1/1",
                        "test acc", "img/s"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

}  // namespace
}  // namespace hpmc
