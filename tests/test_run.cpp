// A run directory end to end on a slice of Fashion-MNIST: outputs, refusal
// to clobber, exact resume after SIGTERM, determinism, --init, eval, recon
// and features; and the checks on a checkpoint's metadata before a resume.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "cli_runner.h"
#include "fifo_testing.h"
#include "core/error.h"
#include "data/dataset.h"
#include "io/grid.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/model.h"
#include "model/trainer.h"

namespace hpmc {
namespace {

namespace fs = std::filesystem;
using testing::run_hpmc;
using testing::slurp;

// A small, quick autoencoder run on the real Fashion-MNIST.
const std::string kSmall =
    "configs/fashion_ae.yaml --set data.train_limit=640 --set data.test_limit=96 --epochs 2 "
    "--batch 32 --progress lines ";

#define NEED_FASHION()                                                              \
  if (!fs::exists(std::string(testing::kFashionDir) + "/train-images-idx3-ubyte.gz")) \
  GTEST_SKIP() << "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)"

std::string dirs(const testing::TempDir& t, const std::string& name) {
  return " --out " + t.file(name) + " --weights-dir " + t.file(name + "_w") + " ";
}

// The loss columns of metrics.csv (times differ between runs).
std::string loss_columns(const std::string& csv) {
  std::string out, line;
  std::stringstream ss(csv);
  while (std::getline(ss, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    f.resize(5);
    out += f[0] + "," + f[1] + "," + f[2] + "," + f[3] + "," + f[4] + "\n";
  }
  return out;
}

uint32_t be32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) |
         (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
}

TEST(Run, WritesTheRunDirectoryAndRefusesToClobberIt) {
  NEED_FASHION();
  testing::TempDir t;
  auto r = run_hpmc("run " + kSmall + dirs(t, "a"));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  for (const char* f : {"config.yaml", "metrics.csv", "loss.png", "recon.png"})
    EXPECT_TRUE(fs::exists(t.file(std::string("a/") + f))) << f;
  EXPECT_TRUE(fs::exists(t.file("a_w/fashion_ae.safetensors")));
  std::string csv = slurp(t.file("a/metrics.csv"));
  EXPECT_EQ(csv.rfind("epoch,step,train_loss,test_loss,test_accuracy,images_per_s,seconds\n", 0), 0u);
  EXPECT_NE(csv.find("\n1,20,"), std::string::npos) << csv;  // 640/32 = 20 steps per epoch
  EXPECT_NE(csv.find("\n2,40,"), std::string::npos) << csv;
  std::string png = slurp(t.file("a/loss.png"));
  ASSERT_GT(png.size(), 24u);
  EXPECT_EQ(png.substr(1, 3), "PNG");

  // A second run into the same place is refused, with remedies that work.
  auto again = run_hpmc("run " + kSmall + dirs(t, "a"));
  EXPECT_EQ(again.code, 2);
  EXPECT_EQ(again.err, "hpmc: error: " + t.file("a") + " already holds a run (and " +
                           t.file("a_w/fashion_ae.safetensors") + " its checkpoint); continue it "
                           "with --resume, replace it with --overwrite, or keep it and start "
                           "another with a new --out and --weights-dir\n");
  auto over = run_hpmc("run " + kSmall + "--epochs 1 --overwrite" + dirs(t, "a"));
  EXPECT_EQ(over.code, 0) << over.err;
  EXPECT_EQ(slurp(t.file("a/metrics.csv")).find("\n2,"), std::string::npos);
  // Resuming a finished run has nothing left to do but succeeds.
  auto res = run_hpmc("run " + kSmall + "--epochs 1 --resume" + dirs(t, "a"));
  EXPECT_EQ(res.code, 0) << res.err;
}

// The README's command run a second time, from a directory of its own, with
// the default runs/<name> and weights/: the error gives a run name whose
// directory and checkpoint are both free, and that name works.
TEST(Run, ASecondRunOfTheSameConfigIsToldHowToStartAnother) {
  testing::TempDir t;
  const std::string run = "run " + testing::source_dir() + "/configs/fashion_mlp.yaml --set "
                          "data.synthetic=true --set data.train_limit=64 --set "
                          "data.test_limit=64 --progress quiet";
  const std::string here = "cd '" + t.path().string() + "' &&";
  ASSERT_EQ(testing::run_hpmc_via(here, run).code, 0);
  auto again = testing::run_hpmc_via(here, run);
  EXPECT_EQ(again.code, 2);
  EXPECT_EQ(again.err, "hpmc: error: runs/fashion_mlp already holds a run (and "
                       "weights/fashion_mlp.safetensors its checkpoint); continue it with "
                       "--resume, replace it with --overwrite, or keep it and start another "
                       "with --set name=fashion_mlp-2 (a new runs/fashion_mlp-2 and "
                       "weights/fashion_mlp-2.safetensors)\n");
  auto second = testing::run_hpmc_via(here, run + " --set name=fashion_mlp-2");
  EXPECT_EQ(second.code, 0) << second.err;
  EXPECT_TRUE(fs::exists(t.file("weights/fashion_mlp-2.safetensors")));
  // Only the checkpoint left behind: the next free name is offered.
  fs::remove_all(t.file("runs/fashion_mlp"));
  auto third = testing::run_hpmc_via(here, run);
  EXPECT_EQ(third.code, 2);
  EXPECT_EQ(third.err, "hpmc: error: weights/fashion_mlp.safetensors holds the checkpoint of an "
                       "earlier run; continue it with --resume, replace it with --overwrite, or "
                       "keep it and start another with --set name=fashion_mlp-3 (a new "
                       "runs/fashion_mlp-3 and weights/fashion_mlp-3.safetensors)\n");
}

TEST(Run, ResolvedConfigRunsAgain) {
  NEED_FASHION();
  testing::TempDir t;
  ASSERT_EQ(run_hpmc("run " + kSmall + "--epochs 1" + dirs(t, "a")).code, 0);
  std::string cfg = slurp(t.file("a/config.yaml"));
  for (const char* k : {"batch_size: 32", "train_limit: 640", "momentum: 0.9", "kernel: 3",
                        "stride: 1", "bias: true", "weights_dir:"})
    EXPECT_NE(cfg.find(k), std::string::npos) << k << "\n" << cfg;
  auto r = run_hpmc("run " + t.file("a/config.yaml") + " --progress quiet" + dirs(t, "b"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(loss_columns(slurp(t.file("a/metrics.csv"))), loss_columns(slurp(t.file("b/metrics.csv"))));
}

TEST(Run, SameSeedSameCheckpointBytes) {
  NEED_FASHION();
  testing::TempDir t;
  ASSERT_EQ(run_hpmc("run " + kSmall + "--epochs 1" + dirs(t, "a")).code, 0);
  ASSERT_EQ(run_hpmc("run " + kSmall + "--epochs 1" + dirs(t, "b")).code, 0);
  std::string a = slurp(t.file("a_w/fashion_ae.safetensors"));
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == slurp(t.file("b_w/fashion_ae.safetensors")));
}

TEST(Run, SigtermThenResumeEqualsAnUninterruptedRun) {
  NEED_FASHION();
  testing::TempDir t;
  // Three epochs of 40 steps; the reference runs straight through.
  const std::string args = "configs/fashion_ae.yaml --set data.train_limit=1280 --set "
                           "data.test_limit=64 --epochs 3 --batch 32 --progress quiet --log-every 1 ";
  ASSERT_EQ(run_hpmc("run " + args + dirs(t, "ref")).code, 0);

  // The same run, stopped by SIGTERM part way through.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string cmd = testing::hpmc_binary() + " run " + args + dirs(t, "cut") + " >" +
                      t.file("cut.log") + " 2>&1";
    if (chdir(testing::source_dir().c_str()) != 0) _exit(99);
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), (char*)nullptr);
    _exit(98);
  }
  // Wait until it has logged a few steps of the second epoch, then stop it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (slurp(t.file("cut/metrics.csv")).find("\n2,45,") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 130) << "the run was not interrupted mid-way:\n" << slurp(t.file("cut.log"));
  EXPECT_NE(slurp(t.file("cut.log")).find("--resume"), std::string::npos);

  auto r = run_hpmc("run " + args + "--resume" + dirs(t, "cut"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("resuming from"), std::string::npos);
  EXPECT_EQ(loss_columns(slurp(t.file("ref/metrics.csv"))), loss_columns(slurp(t.file("cut/metrics.csv"))));
  EXPECT_TRUE(slurp(t.file("ref_w/fashion_ae.safetensors")) == slurp(t.file("cut_w/fashion_ae.safetensors")))
      << "final weights differ after resume";
}

// The resume command printed after SIGTERM used to be "hpmc run CONFIG
// --resume", dropping --out, --weights-dir, --epochs, --set, ...: now it is
// the command typed, quoted for the shell, with --resume in place of
// --overwrite and --init, and running it finishes the run.
TEST(Run, InterruptedRunPrintsTheCommandThatContinuesIt) {
  testing::TempDir t;
  const std::string quick = "configs/fashion_mlp.yaml --set data.synthetic=true --set "
                            "data.test_limit=64 --progress quiet ";
  ASSERT_EQ(run_hpmc("run " + quick + "--set data.train_limit=64" + dirs(t, "w0")).code, 0);
  const std::string out = t.file("out dir"), weights = t.file("w dir");
  // Far from the end when the signal comes, however fast the steps are.
  const std::string args = quick + "--set data.train_limit=256 --batch 32 --epochs 30 "
                           "--set 'name=my run' --overwrite --init " +
                           t.file("w0_w/fashion_mlp.safetensors") + " --out '" + out +
                           "' --weights-dir '" + weights + "'";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string cmd = "'" + testing::hpmc_binary() + "' run " + args + " >" + t.file("cut.log") +
                      " 2>&1";
    if (chdir(testing::source_dir().c_str()) != 0) _exit(99);
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), (char*)nullptr);
    _exit(98);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(weights + "/my run.safetensors")) break;  // after the first epoch
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = slurp(t.file("cut.log"));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << log;
  const std::string marker = "continue with: ";
  ASSERT_NE(log.find(marker), std::string::npos) << log;
  std::string cmd = log.substr(log.find(marker) + marker.size());
  cmd = cmd.substr(0, cmd.find('\n'));
  EXPECT_EQ(cmd, testing::hpmc_binary() + " run configs/fashion_mlp.yaml --set data.synthetic=true "
                 "--set data.test_limit=64 --progress quiet --set data.train_limit=256 --batch "
                 "32 --epochs 30 --set 'name=my run' --out '" + out +
                 "' --weights-dir '" + weights + "' --resume");

  std::string again = "cd '" + testing::source_dir() + "' && " + cmd + " >" +
                      t.file("resume.log") + " 2>&1";
  EXPECT_EQ(std::system(again.c_str()), 0) << slurp(t.file("resume.log"));
  EXPECT_NE(slurp(t.file("resume.log")).find("resuming from " + weights + "/my run.safetensors"),
            std::string::npos) << slurp(t.file("resume.log"));
  EXPECT_NE(slurp(out + "/metrics.csv").find("\n30,240,"), std::string::npos);
}

TEST(Run, ResumeRefusesAChangedSetup) {
  NEED_FASHION();
  testing::TempDir t;
  ASSERT_EQ(run_hpmc("run " + kSmall + "--epochs 1" + dirs(t, "a")).code, 0);
  auto r = run_hpmc("run " + kSmall + "--epochs 2 --batch 16 --resume" + dirs(t, "a"));
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("its steps took 32 samples (1 rank x training.batch_size 32 x "
                      "training.grad_accumulation 1) but this run's take 16 (1 rank x "
                      "training.batch_size 16 x training.grad_accumulation 1); keep the product"),
            std::string::npos) << r.err;
  auto none = run_hpmc("run " + kSmall + "--resume" + dirs(t, "nothing"));
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("there is no checkpoint"), std::string::npos) << none.err;
}

TEST(Run, InitEvalReconAndFeatures) {
  NEED_FASHION();
  testing::TempDir t;
  ASSERT_EQ(run_hpmc("run " + kSmall + "--epochs 1" + dirs(t, "a")).code, 0);
  const std::string w = t.file("a_w/fashion_ae.safetensors");
  const std::string limits = " --set data.train_limit=640 --set data.test_limit=96 ";

  // eval reproduces the run's own test loss from the checkpoint.
  auto e = run_hpmc("eval configs/fashion_ae.yaml --weights " + w + limits);
  ASSERT_EQ(e.code, 0) << e.err;
  // Only the test set is read.
  EXPECT_NE(e.out.find(": 96 test samples\n"), std::string::npos) << e.out;
  EXPECT_EQ(e.out.find(" train"), std::string::npos) << e.out;
  std::string csv = slurp(t.file("a/metrics.csv"));
  std::string row = csv.substr(csv.find("\n1,20,") + 1);
  std::vector<std::string> f;
  std::stringstream ls(row.substr(0, row.find('\n')));
  for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
  double run_test_loss = std::stod(f[3]);
  double eval_loss = std::stod(e.out.substr(e.out.find("test loss ") + 10));
  EXPECT_NEAR(eval_loss, run_test_loss, 1e-5 * run_test_loss) << e.out;

  // --init starts a new run from those weights: its first epoch starts lower.
  auto i = run_hpmc("run " + kSmall + "--epochs 1 --init " + w + dirs(t, "b"));
  ASSERT_EQ(i.code, 0) << i.err;
  EXPECT_NE(i.out.find("optimizer state fresh"), std::string::npos);

  // recon: a grid of --count images.
  auto rc = run_hpmc("recon configs/fashion_ae.yaml --weights " + w + " --count 8 --out " +
                     t.file("rc") + limits);
  ASSERT_EQ(rc.code, 0) << rc.err;
  std::string png = slurp(t.file("rc/recon.png"));
  ASSERT_GT(png.size(), 24u);
  // Documented size: 8 images in one row, 4x upscaled 28-pixel images (see io/grid.h).
  const int cell = 28 * 4, cols = 8, rows = 1;
  EXPECT_EQ(be32(png, 16), uint32_t(cols * cell + (cols + 1) * kGridPad));
  EXPECT_EQ(be32(png, 20), uint32_t(rows * (2 * cell + kGridPad) + (rows - 1) * kGridPairGap + 2 * kGridPad));

  // features: CSV and .npy agree; labels in dataset order.
  auto fe = run_hpmc("features configs/fashion_ae.yaml --weights " + w + " --split test --format both --out " +
                     t.file("f") + limits);
  ASSERT_EQ(fe.code, 0) << fe.err;
  EXPECT_NE(fe.out.find(": 96 test samples\n"), std::string::npos) << fe.out;
  // Every file written is named with its directory.
  EXPECT_NE(fe.out.find("-> " + t.file("f/features_test.csv") + ", " +
                        t.file("f/features_test.npy") + ", " + t.file("f/labels_test.npy") + "\n"),
            std::string::npos)
      << fe.out;
  // The CSV's size, estimated on the first batch (32 rows), is within 10%.
  const std::string about = "features_test.csv will take about ";
  ASSERT_NE(fe.out.find(about), std::string::npos) << fe.out;
  std::string est = fe.out.substr(fe.out.find(about) + about.size());
  double est_bytes = std::stod(est) * (est.find(" KB") < est.find('\n') ? 1e3 : 1e6);
  double real_bytes = double(fs::file_size(t.file("f/features_test.csv")));
  EXPECT_NEAR(est_bytes, real_bytes, 0.1 * real_bytes) << fe.out;
  NpyArray feats = read_npy(t.file("f/features_test.npy"));
  NpyArray labels = read_npy(t.file("f/labels_test.npy"));
  ASSERT_EQ(feats.shape, (std::vector<int64_t>{96, 784}));
  ASSERT_EQ(labels.shape, (std::vector<int64_t>{96}));
  std::string fcsv = slurp(t.file("f/features_test.csv"));
  std::stringstream cs(fcsv);
  std::string header;
  std::getline(cs, header);
  EXPECT_EQ(header.substr(0, 12), "label,f0,f1,");
  const float* fv = reinterpret_cast<const float*>(feats.data.data());
  const int32_t* lv = reinterpret_cast<const int32_t*>(labels.data.data());
  // Fashion-MNIST's first test labels: ankle boot, pullover, trouser, trouser.
  EXPECT_EQ(lv[0], 9);
  EXPECT_EQ(lv[1], 2);
  for (int r = 0; r < 96; ++r) {
    std::string line;
    ASSERT_TRUE(std::getline(cs, line)) << r;
    std::stringstream fl(line);
    std::string x;
    std::getline(fl, x, ',');
    ASSERT_EQ(std::stoi(x), lv[r]) << r;
    for (int j = 0; j < 784; ++j) {
      std::getline(fl, x, ',');
      ASSERT_EQ(std::stof(x), fv[r * 784 + j]) << r << "," << j;
    }
  }
  std::string py = testing::python_with_numpy();
  if (!py.empty()) {
    std::string cmd = py + " -c \"import numpy as n; f=n.load('" + t.file("f/features_test.npy") +
                      "'); l=n.load('" + t.file("f/labels_test.npy") +
                      "'); assert f.shape==(96,784) and f.dtype==n.float32 and l.shape==(96,) and "
                      "l[0]==9, (f.shape, l[:3])\"";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

TEST(Run, BadCheckpointsAreClearErrors) {
  NEED_FASHION();
  testing::TempDir t;
  std::string bad = t.file("bad.safetensors");
  std::ofstream(bad) << "not a checkpoint at all";
  auto r = run_hpmc("eval configs/fashion_ae.yaml --weights " + bad);
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  // Another architecture: the MLP's checkpoint into the autoencoder.
  ASSERT_EQ(run_hpmc("run configs/fashion_mlp.yaml --epochs 1 --set data.train_limit=64 --set "
                     "data.test_limit=64 --progress quiet" + dirs(t, "m")).code, 0);
  auto a = run_hpmc("eval configs/fashion_ae.yaml --weights " + t.file("m_w/fashion_mlp.safetensors"));
  EXPECT_EQ(a.code, 4);
  EXPECT_NE(a.err.find("no tensor 'conv1.weight'"), std::string::npos) << a.err;
  EXPECT_EQ(std::count(a.err.begin(), a.err.end(), '\n'), 1) << a.err;
}

// What takes the place of a checkpoint (or of metrics.csv on --resume) is
// named: a FIFO used to block hpmc forever, a directory was called "the
// checkpoint of an earlier run". Synthetic data, so no dataset is needed.
TEST(Run, BadCheckpointsThatAreNotFilesAreNamed) {
  testing::TempDir t;
  const std::string quick = "configs/fashion_mlp.yaml --set data.synthetic=true --set "
                            "data.train_limit=64 --set data.test_limit=64 --progress quiet ";
  const std::string fifo = t.file("w.safetensors");
  testing::make_fifo(fifo);
  auto e = testing::run_hpmc_within(60, "eval configs/fashion_mlp.yaml --weights " + fifo);
  EXPECT_EQ(e.code, 4) << e.err;
  EXPECT_EQ(e.err, "hpmc: error: " + fifo + ": is a FIFO, not a regular file\n");
  auto i = testing::run_hpmc_within(60, "run " + quick + "--init " + fifo + dirs(t, "i"));
  EXPECT_EQ(i.code, 4) << i.err;
  EXPECT_NE(i.err.find(fifo + ": is a FIFO, not a regular file"), std::string::npos) << i.err;

  // The run's own checkpoint path, taken by a directory or a FIFO.
  const std::string in_dir = t.file("d_w/fashion_mlp.safetensors");
  fs::create_directories(in_dir);
  for (const char* flag : {"", "--resume", "--overwrite"}) {
    auto r = testing::run_hpmc_within(60, "run " + quick + flag + dirs(t, "d"));
    EXPECT_EQ(r.code, 2) << flag << ": " << r.err;
    EXPECT_EQ(r.err, "hpmc: error: " + in_dir + " is a directory, not a regular file, but this "
                     "run's checkpoint goes there; move it away, or write the checkpoint "
                     "elsewhere with --weights-dir\n") << flag;
  }
  fs::create_directories(t.file("p_w"));
  testing::make_fifo(t.file("p_w/fashion_mlp.safetensors"));
  auto p = testing::run_hpmc_within(60, "run " + quick + "--resume" + dirs(t, "p"));
  EXPECT_EQ(p.code, 2) << p.err;
  EXPECT_NE(p.err.find("fashion_mlp.safetensors is a FIFO, not a regular file"), std::string::npos)
      << p.err;

  // metrics.csv, read back on --resume.
  ASSERT_EQ(testing::run_hpmc_within(120, "run " + quick + "--epochs 1" + dirs(t, "m")).code, 0);
  fs::remove(t.file("m/metrics.csv"));
  testing::make_fifo(t.file("m/metrics.csv"));
  auto m = testing::run_hpmc_within(60, "run " + quick + "--epochs 2 --resume" + dirs(t, "m"));
  EXPECT_EQ(m.code, 4) << m.err;
  EXPECT_NE(m.err.find(t.file("m/metrics.csv") + ": is a FIFO, not a regular file"),
            std::string::npos) << m.err;
}

// Overwrites float `index` of tensor `name` in a safetensors file with `v`.
void poke_float(const std::string& path, const std::string& name, size_t index, float v) {
  std::string f = slurp(path);
  uint64_t header = 0;
  std::memcpy(&header, f.data(), 8);
  size_t at = f.find("\"" + name + "\":");
  ASSERT_NE(at, std::string::npos) << name;
  at = f.find("\"data_offsets\":[", at);
  ASSERT_NE(at, std::string::npos) << name;
  size_t begin = std::stoull(f.substr(at + 16));
  std::memcpy(&f[8 + header + begin + index * 4], &v, 4);
  std::ofstream(path, std::ios::binary) << f;
}

// eval printed "test loss nan" and exited 0 for weights of a run that
// diverged; recon and --init took them too. All refuse them, naming the tensor.
TEST(Run, BadCheckpointsWithNonFiniteWeightsAreRefused) {
  testing::TempDir t;
  const std::string quick = "configs/fashion_ae.yaml --set data.synthetic=true --set "
                            "data.train_limit=64 --set data.test_limit=16 ";
  ASSERT_EQ(run_hpmc("run " + quick + "--epochs 1 --progress quiet" + dirs(t, "a")).code, 0);
  const std::string good = t.file("a_w/fashion_ae.safetensors");
  const std::string nan = t.file("nan.safetensors"), inf = t.file("inf.safetensors");
  fs::copy_file(good, nan);
  fs::copy_file(good, inf);
  poke_float(nan, "conv1.weight", 0, NAN);
  poke_float(inf, "conv5.bias", 0, -INFINITY);
  for (const std::string cmd : {"eval " + quick, "recon " + quick + "--out " + t.file("rc") + " ",
                                "features " + quick + "--out " + t.file("f") + " "}) {
    auto r = run_hpmc(cmd + "--weights " + nan);
    EXPECT_EQ(r.code, 5) << cmd << r.err << r.out;
    EXPECT_EQ(r.err, "hpmc: error: " + nan + ": tensor 'conv1.weight' holds nan at index 0: the "
                     "weights are broken (did the training diverge?); use a checkpoint from "
                     "before that, or train again with a lower --lr\n") << cmd;
    EXPECT_EQ(r.out.find("test loss"), std::string::npos) << r.out;
    r = run_hpmc(cmd + "--weights " + inf);
    EXPECT_EQ(r.code, 5) << cmd << r.err;
    EXPECT_NE(r.err.find(inf + ": tensor 'conv5.bias' holds -inf at index 0"), std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(fs::exists(t.file("rc/recon.png")));
  EXPECT_FALSE(fs::exists(t.file("f/features_test.npy")));
  auto i = run_hpmc("run " + quick + "--init " + nan + dirs(t, "b"));
  EXPECT_EQ(i.code, 5) << i.err;
  EXPECT_NE(i.err.find("tensor 'conv1.weight' holds nan"), std::string::npos) << i.err;
  // The good checkpoint still evaluates.
  auto e = run_hpmc("eval " + quick + "--weights " + good);
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("test loss"), std::string::npos) << e.out;
}

// A kill during a checkpoint write leaves ".<name>.safetensors.tmp-XXXXXX";
// the next run of that checkpoint removes it, and nothing else, and says so.
TEST(Run, StaleCheckpointTempFilesAreRemoved) {
  testing::TempDir t;
  const std::string w = t.file("a_w");
  fs::create_directories(w);
  const std::string stale = w + "/.fashion_mlp.safetensors.tmp-Ab12Cd";
  for (const std::string& f : {stale, w + "/.other.safetensors.tmp-Ab12Cd",
                               w + "/.fashion_mlp.safetensors.tmp-notes", w + "/notes.txt"})
    std::ofstream(f) << "x";
  auto r = run_hpmc("run configs/fashion_mlp.yaml --set data.synthetic=true --set "
                    "data.train_limit=64 --set data.test_limit=64 --progress quiet" +
                    dirs(t, "a"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("removed 1 temporary checkpoint file left by an interrupted write: " +
                       stale + "\n"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(stale));
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(w)) (void)e, ++left;
  EXPECT_EQ(left, 4u);  // the checkpoint and the three files that are not its temporaries
}

// hpmc features replaced earlier feature files without being asked to.
TEST(Run, FeaturesRefuseToReplaceFilesWithoutOverwrite) {
  testing::TempDir t;
  const std::string quick = "configs/fashion_ae.yaml --set data.synthetic=true --set "
                            "data.train_limit=64 --set data.test_limit=16 ";
  ASSERT_EQ(run_hpmc("run " + quick + "--epochs 1 --progress quiet" + dirs(t, "a")).code, 0);
  const std::string features = "features " + quick + "--weights " +
                               t.file("a_w/fashion_ae.safetensors") + " --out " + t.file("f") +
                               " ";
  ASSERT_EQ(run_hpmc(features + "--split test --format npy").code, 0);
  const std::string npy = t.file("f/features_test.npy"), labels = t.file("f/labels_test.npy");
  std::ofstream(npy, std::ios::app) << "mark";  // to see whether it is rewritten
  const std::string before = slurp(npy);

  auto r = run_hpmc(features + "--split test --format npy");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err, "hpmc: error: " + npy + ", " + labels + " already exist; replace them with "
                   "--overwrite, or write elsewhere with --out\n");
  EXPECT_EQ(slurp(npy), before);
  // Any file of the export counts: the CSV is new, but the .npy files are not.
  r = run_hpmc(features + "--split all --format both");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(npy + ", " + labels + " already exist"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(t.file("f/features_train.npy")));
  // Nothing of this export is there yet.
  EXPECT_EQ(run_hpmc(features + "--split test --format csv").code, 0);
  r = run_hpmc(features + "--split test --format csv");
  EXPECT_EQ(r.err, "hpmc: error: " + t.file("f/features_test.csv") + " already exists; replace "
                   "it with --overwrite, or write elsewhere with --out\n");
  r = run_hpmc(features + "--split test --format npy --overwrite");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(npy), before);
}

// Rewrites a checkpoint with some metadata changed (kErase removes the key).
const char* const kErase = "\x01erase";
void edit_metadata(const std::string& from, const std::string& to,
                   const std::map<std::string, std::string>& edits) {
  SafetensorsFile f = SafetensorsFile::read(from);
  std::vector<SafetensorsEntry> entries;
  for (const SafetensorsTensor& t : f.tensors())
    entries.push_back({t.name, t.dtype, t.shape, f.data(t), t.end - t.begin});
  std::map<std::string, std::string> meta = f.metadata();
  for (const auto& [key, value] : edits) {
    if (value == kErase) meta.erase(key);
    else meta[key] = value;
  }
  write_safetensors(to, entries, meta);
}

// A small classifier with momentum (so the checkpoint holds momentum buffers),
// checkpointed in epoch 2 of 3 after 2 of its 4 steps (100 samples, batch 32).
struct MetaFixture {
  Config cfg = parse_config("name: meta\n"
                            "data: {format: mnist}\n"
                            "model:\n"
                            "  loss: softmax_cross_entropy\n"
                            "  layers: [{type: flatten}, {type: linear, out_features: 10}]\n"
                            "training: {epochs: 3, batch_size: 32, momentum: 0.9}\n",
                            "meta.yaml");
  static constexpr int kTrainSize = 100;
  std::unique_ptr<Model> build() const {
    return Model::build(cfg, Impl::kCpu, sample_shape(DataFormat::kMnist), 10);
  }
  void save(const std::string& path) const {
    auto m = build();
    m->params().init(7);
    TrainState st;
    st.epoch = 1;
    st.step = 2;
    st.global_step = 6;
    st.loss_sum = 3.5;
    st.correct = 40;
    Trainer t(*m, cfg.training);
    t.optimizer().set_steps(st.global_step);
    save_checkpoint(path, *m, t.optimizer(), cfg, st, kTrainSize);
  }
  // Loads `path` to resume, into a fresh optimizer.
  void resume(const std::string& path, Model& m, TrainState& st) const {
    Trainer t(m, cfg.training);
    load_checkpoint(path, m, t.optimizer(), cfg, st, kTrainSize);
  }
};

TEST(Run, BadCheckpointsMetadataIsCheckedFieldByField) {
  testing::TempDir t;
  MetaFixture fx;
  const std::string good = t.file("good.safetensors");
  fx.save(good);
  {  // The untouched checkpoint resumes where it was written.
    auto m = fx.build();
    TrainState st;
    fx.resume(good, *m, st);
    EXPECT_EQ(st.epoch, 1);
    EXPECT_EQ(st.step, 2);
    EXPECT_EQ(st.global_step, 6);
    EXPECT_EQ(st.loss_sum, 3.5);
    EXPECT_EQ(st.correct, 40);
  }
  struct Case {
    std::map<std::string, std::string> edits;
    std::string field, message;
  };
  const std::vector<Case> cases = {
      {{{"epoch", "-3"}}, "epoch", "is -3, outside 0..3 (the run that wrote it had 3 epochs)"},
      {{{"epoch", "4"}}, "epoch", "is 4, outside 0..3"},
      {{{"epoch", "1x"}}, "epoch", "is '1x', not a decimal integer"},
      {{{"epoch", " 1"}}, "epoch", "not a decimal integer"},
      {{{"epoch", "+1"}}, "epoch", "not a decimal integer"},
      {{{"epoch", ""}}, "epoch", "is '', not a decimal integer"},
      {{{"epoch", kErase}}, "epoch", "is missing"},
      {{{"step", "-1"}}, "step",
       "is -1, outside 0..4 (100 samples in batches of 32 make 4 steps an epoch)"},
      {{{"step", "5"}}, "step", "is 5, outside 0..4"},
      {{{"epoch", "3"}, {"step", "1"}, {"global_step", "13"}}, "step",
       "is 1 in epoch 4, after the last of the 3 epochs"},
      {{{"global_step", "1180591620717411303424"}}, "global_step",
       "is '1180591620717411303424', too large for a 64-bit integer"},
      {{{"global_step", "9223372036854775807"}}, "global_step",
       "is 9223372036854775807 but epoch 1 and step 2 make 6"},
      {{{"global_step", "-6"}}, "global_step", "is -6, outside 0.."},
      {{{"global_step", "7"}}, "global_step", "is 7 but epoch 1 and step 2 make 6"},
      {{{"batch_size", "0"}}, "batch_size", "is 0, outside 1..2147483647"},
      {{{"ranks", "2"}}, "batch_size",
       "is 32 but 2 ranks x training.batch_size 32 x training.grad_accumulation 1 make 64"},
      {{{"ranks", "0"}}, "ranks", "is 0, outside 1..1048576"},
      {{{"grad_accumulation", "x"}}, "grad_accumulation", "is 'x', not a decimal integer"},
      {{{"rank_batch_size", kErase}}, "rank_batch_size", "is missing"},
      {{{"epoch_samples", "60"}}, "epoch_samples",
       "is 60 but step 2 makes 64 (100 samples in batches of 32 make 4 steps an epoch)"},
      {{{"epoch_samples", "101"}}, "epoch_samples", "is 101, outside 0..100"},
      {{{"train_size", "-100"}}, "train_size", "is -100, outside 1..2147483647"},
      {{{"epochs", "0"}}, "epochs", "is 0, outside 1..1000000"},
      {{{"seed", "-1"}}, "seed", "is '-1', not an integer from 0 to 18446744073709551615"},
      {{{"seed", "18446744073709551616"}}, "seed", "not an integer from 0"},
      {{{"shuffle", "yes"}}, "shuffle", "is 'yes', not true or false"},
      {{{"momentum", "1"}}, "momentum", "is '1', not true or false"},
      {{{"shuffle", std::string(500, 'x')}}, "shuffle",
       "is '" + std::string(80, 'x') + "...', not true or false"},
      {{{"epoch_loss_sum", "nan"}}, "epoch_loss_sum", "is 'nan', not a finite hex float"},
      {{{"epoch_loss_sum", "0x1p+1024"}}, "epoch_loss_sum", "not a finite hex float"},
      {{{"epoch_loss_sum", "3.5"}}, "epoch_loss_sum", "is '3.5', not a finite hex float"},
      {{{"epoch_loss_sum", "0x1.cp+1 "}}, "epoch_loss_sum", "not a finite hex float"},
      {{{"step", "0"}, {"global_step", "4"}}, "epoch_loss_sum",
       "at step 0, where the epoch has summed nothing yet"},
      {{{"epoch_correct", "0x1.8p+0"}}, "epoch_correct", "not a whole number from 0 to the 64"},
      {{{"epoch_correct", "0x1.04p+6"}}, "epoch_correct", "(65), not a whole number"},
      {{{"epoch_correct", "-0x1p+0"}}, "epoch_correct", "not a whole number"},
  };
  for (const Case& c : cases) {
    std::string label;
    for (const auto& [k, v] : c.edits) label += k + "=" + (v == kErase ? "(erased)" : v) + " ";
    SCOPED_TRACE(label);
    const std::string bad = t.file("bad.safetensors");
    edit_metadata(good, bad, c.edits);
    auto m = fx.build();
    m->params().init(11);
    std::vector<float> before(m->params().params().data<float>(),
                              m->params().params().data<float>() + m->params().padded());
    TrainState st;
    try {
      fx.resume(bad, *m, st);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(e.code(), ExitCode::kData) << msg;
      EXPECT_EQ(msg.rfind(bad + ": checkpoint metadata '" + c.field + "' ", 0), 0u) << msg;
      EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
      EXPECT_NE(msg.find("--init " + bad), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    // Nothing was restored from the rejected file.
    EXPECT_TRUE(std::equal(before.begin(), before.end(), m->params().params().data<float>()));
    EXPECT_EQ(st.epoch, 0);
    EXPECT_EQ(st.global_step, 0);
  }
  {  // Another format is not resumed (--init still takes its weights).
    const std::string other = t.file("other.safetensors");
    edit_metadata(good, other, {{"format", "hpmc-checkpoint-2"}});
    auto m = fx.build();
    TrainState st;
    try {
      fx.resume(other, *m, st);
      ADD_FAILURE() << "loaded";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("not an hpmc training checkpoint (format "
                                           "'hpmc-checkpoint-2', expected 'hpmc-checkpoint-1')"),
                std::string::npos) << e.what();
    }
    load_checkpoint(other, *m);
  }
}

// The same checks through the command line: one line, exit code 4, before
// any training; a finished run says so and leaves its directory untouched.
TEST(Run, BadCheckpointsMetadataStopsAResume) {
  NEED_FASHION();
  testing::TempDir t;
  const std::string args = "run configs/fashion_mlp.yaml --set data.train_limit=64 --set "
                           "data.test_limit=64 --batch 32 --progress lines" + dirs(t, "m");
  ASSERT_EQ(run_hpmc(args + "--epochs 1").code, 0);
  const std::string ckpt = t.file("m_w/fashion_mlp.safetensors");
  const std::string kept = t.file("kept.safetensors");
  fs::copy_file(ckpt, kept);
  const std::string metrics = slurp(t.file("m/metrics.csv"));

  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"epoch", "-3"}, {"global_step", "1180591620717411303424"}, {"step", "-1"}}) {
    SCOPED_TRACE(key + "=" + value);
    edit_metadata(kept, ckpt, {{key, value}});
    auto r = run_hpmc(args + "--epochs 3 --resume");
    EXPECT_EQ(r.code, 4) << r.err;
    EXPECT_EQ(r.err.rfind("hpmc: error: " + ckpt + ": checkpoint metadata '" + key + "' is ", 0),
              0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.find("check `"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("epoch 1/3"), std::string::npos) << r.out;
    EXPECT_EQ(slurp(t.file("m/metrics.csv")), metrics);
  }

  // The run asked for 1 epoch and has it: nothing to train, and it says so.
  fs::copy_file(kept, ckpt, fs::copy_options::overwrite_existing);
  auto done = run_hpmc(args + "--epochs 1 --resume");
  EXPECT_EQ(done.code, 0) << done.err;
  EXPECT_NE(done.out.find("run is complete: 1 of 1 epoch in " + ckpt +
                          "; raise --epochs to train further\n"),
            std::string::npos) << done.out;
  EXPECT_EQ(done.out.find("training:"), std::string::npos) << done.out;
  EXPECT_EQ(done.err, "");
  EXPECT_EQ(slurp(t.file("m/metrics.csv")), metrics);
  EXPECT_TRUE(slurp(ckpt) == slurp(kept));
  // Raising --epochs trains the second epoch from there.
  auto more = run_hpmc(args + "--epochs 2 --resume");
  EXPECT_EQ(more.code, 0) << more.err;
  EXPECT_NE(more.out.find("resuming from " + ckpt + " at epoch 2, step 0 (global step 2)"),
            std::string::npos) << more.out;
  EXPECT_NE(slurp(t.file("m/metrics.csv")).find("\n2,4,"), std::string::npos);
}

}  // namespace
}  // namespace hpmc
