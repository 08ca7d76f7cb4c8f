// The shell scripts a newcomer runs first (scripts/setup, scripts/test), in
// the branches that can be exercised without installing or building:
// commands they call are replaced by stand-ins on a PATH of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "core/atomic_file.h"
#include "io/feature_text.h"
#include "io/json.h"
#include "io/npy.h"

namespace hpmc {
namespace {

namespace fs = std::filesystem;
using Result = testing::CliResult;

// A PATH directory holding links to the real tools a script needs and
// stand-in scripts for the rest.
struct FakePath {
  testing::TempDir dir;

  void link(const std::string& tool) {
    for (const char* d : {"/usr/bin/", "/bin/", "/usr/local/bin/"}) {
      if (fs::exists(d + tool)) {
        fs::create_symlink(d + tool, dir.file(tool));
        return;
      }
    }
    FAIL() << tool << " not found in /usr/bin or /bin";
  }
  void fake(const std::string& tool, const std::string& body) {
    std::ofstream(dir.file(tool)) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(dir.file(tool), fs::perms::owner_all);
  }
};

// Runs a command in the source tree; stdout and stderr apart.
testing::CliResult run_in_source(const std::string& command) {
  testing::TempDir tmp;
  std::string cmd = "cd '" + testing::source_dir() + "' && " + command + " >'" + tmp.file("out") +
                    "' 2>'" + tmp.file("err") + "' </dev/null";
  int status = std::system(cmd.c_str());
  testing::CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = testing::slurp(tmp.file("out"));
  r.err = testing::slurp(tmp.file("err"));
  return r;
}

// The same with PATH set to `path` only.
testing::CliResult run_with_path(const FakePath& path, const std::string& command) {
  return run_in_source("env PATH='" + path.dir.path().string() + "' " + command);
}

TEST(Setup, WithoutRootOrSudoSaysWhatToDo) {
  FakePath p;
  for (const char* t : {"bash", "dirname", "grep"}) p.link(t);
  p.fake("id", "echo 1000");                   // not root
  p.fake("dpkg-query", "exit 1");              // nothing installed
  p.fake("apt-get", "echo apt-get ran; exit 0");  // must not be reached
  Result r = run_with_path(p, "scripts/setup");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.err.find("setup: error: "), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const char* s : {"not root and sudo is not installed", "run scripts/setup as root",
                        "install sudo as root (apt-get install sudo)", "libyaml-cpp-dev",
                        "dataset-fashion-mnist"})
    EXPECT_NE(r.err.find(s), std::string::npos) << s << "\n" << r.err;
  EXPECT_EQ(r.out.find("apt-get ran"), std::string::npos) << r.out;
}

TEST(Setup, WithSudoSaysWhatItInstalls) {
  FakePath p;
  for (const char* t : {"bash", "dirname", "grep"}) p.link(t);
  p.fake("id", "echo 1000");
  // Everything but two packages is installed.
  p.fake("dpkg-query",
         "case \"$3\" in libcli11-dev|python3-sklearn) exit 1;; esac\n"
         "printf 'install ok installed'");
  // sudo runs apt-get update, then fails the install: setup stops there.
  p.fake("sudo", "echo \"sudo $*\"; [ \"$2\" = update ]");
  Result r = run_with_path(p, "scripts/setup");
  EXPECT_NE(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("setup: installing 2 packages with sudo: libcli11-dev python3-sklearn"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("sudo apt-get update -q\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sudo apt-get install -y -q --no-install-recommends libcli11-dev "
                       "python3-sklearn"),
            std::string::npos)
      << r.out;
}

// apt prints nothing while it unpacks a large package: setup says every
// HPMC_SETUP_TICK seconds (20 by default) that the install is still running.
TEST(Setup, SaysTheInstallIsStillRunning) {
  FakePath p;
  for (const char* t : {"bash", "dirname", "grep", "sleep"}) p.link(t);
  p.fake("id", "echo 0");  // root: no sudo
  p.fake("dpkg-query", "case \"$3\" in libcli11-dev) exit 1;; esac\nprintf 'install ok installed'");
  // update returns at once; install takes 2.5 s, then fails so that setup stops.
  p.fake("apt-get", "[ \"$1\" = update ] && exit 0\nsleep 2.5\nexit 1");
  Result r = run_with_path(p, "HPMC_SETUP_TICK=1 scripts/setup");
  EXPECT_NE(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("setup: apt-get install still running ("), std::string::npos) << r.out;
}

// One test's block of CTest's LastTest.log, as gtest_discover_tests writes it.
std::string ctest_block(int i, const std::string& name, const std::string& body) {
  std::string n = std::to_string(i) + "/3 ";
  return n + "Testing: " + name + "\n" + n + "Test: " + name + "\n" +
         "Command: \"hpmc_tests\" \"--gtest_filter=" + name + "\"\nOutput:\n" +
         "----------------------------------------------------------\n" + "[ RUN      ] " +
         name + "\n" + body + "<end of output>\nTest time =   0.01 sec\n" +
         "----------------------------------------------------------\n\n";
}

TEST(TestScript, ListsEachSkippedTestWithItsReason) {
  testing::TempDir tmp;
  std::ofstream(tmp.file("LastTest.log"))
      << ctest_block(1, "Gpu.A",
                     "tests/a.cpp:9: Skipped\nno CUDA device\n[  SKIPPED ] Gpu.A (0 ms)\n")
      << ctest_block(2, "Ok.B", "[       OK ] Ok.B (1 ms)\n")
      << ctest_block(3, "Real.C",
                     "tests/c.cpp:5: Skipped\nno MNIST in data/mnist;\nset HPMC_MNIST_DIR\n"
                     "[  SKIPPED ] Real.C (0 ms)\n");
  Result r = run_in_source("scripts/skipped-tests '" + tmp.file("LastTest.log") + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "2 tests skipped:\n"
            "* no CUDA device (1):\n    Gpu.A\n"
            "* no MNIST in data/mnist; set HPMC_MNIST_DIR (1):\n    Real.C\n")
      << r.out;
}

// tools/svm.py on two separable classes: a progress line per stage, each with
// its elapsed time, in order.
TEST(SvmScript, PrintsEachStageWithItsTime) {
  const std::string py = testing::python_with_numpy();
  if (py.empty() || std::system((py + " -c 'import sklearn' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "python3 with numpy and scikit-learn is not installed "
                    "(python3-numpy python3-sklearn)";
  testing::TempDir t;
  for (const char* split : {"train", "test"}) {
    std::vector<float> x(40 * 3);
    std::vector<int32_t> y(40);
    for (int i = 0; i < 40; ++i) {
      y[size_t(i)] = i % 2;
      for (int j = 0; j < 3; ++j) x[size_t(i * 3 + j)] = float(y[size_t(i)] * 4 + (i * j) % 3);
    }
    write_npy(t.file(std::string("features_") + split + ".npy"), x.data(), {40, 3});
    write_npy(t.file(std::string("labels_") + split + ".npy"), y.data(), {40});
  }
  Result r = run_in_source(py + " tools/svm.py '" + t.path().string() + "'");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  size_t at = 0;
  for (const char* stage : {"] loading ", "features_train.npy", "] loading ", "features_test.npy",
                            "] features: 40 train, 40 test, 3 values each", "] scaling ",
                            "] fitting a linear SVM", "] fitted in ", "test accuracy 100.00%"}) {
    size_t next = r.out.find(stage, at);
    ASSERT_NE(next, std::string::npos) << stage << " after offset " << at << ":\n" << r.out;
    at = next;
  }
  EXPECT_EQ(r.out.rfind("[", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" s] "), std::string::npos) << r.out;
}

// tools/svm.py reads the CSV and LIBSVM exports as well, and trains an RBF
// kernel on a --limit of the samples, with a note of what that costs.
TEST(SvmScript, ReadsEveryFormatAndTrainsAnRbfKernel) {
  const std::string py = testing::python_with_numpy();
  if (py.empty() || std::system((py + " -c 'import sklearn' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "python3 with numpy and scikit-learn is not installed "
                    "(python3-numpy python3-sklearn)";
  testing::TempDir t;
  for (const std::string split : {"train", "test"}) {
    std::vector<float> x(40 * 3);
    std::vector<int32_t> y(40);
    for (int i = 0; i < 40; ++i) {
      y[size_t(i)] = i % 2;
      for (int j = 0; j < 3; ++j) x[size_t(i * 3 + j)] = float(y[size_t(i)] * 4 + (i * j) % 3);
    }
    for (FeatureText f : {FeatureText::kCsv, FeatureText::kLibsvm}) {
      std::string text = feature_header(f, 3, false);
      append_feature_rows(text, f, x.data(), 3, 40, {y.data(), nullptr});
      write_file_atomic(t.file("features_" + split + "." + feature_text_extension(f)), text);
    }
  }
  const std::string dir = " '" + t.path().string() + "'";
  // No .npy here: the first format found is libsvm.
  Result r = run_in_source(py + " tools/svm.py" + dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("features_train.libsvm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test accuracy 100.00%"), std::string::npos) << r.out;
  r = run_in_source(py + " tools/svm.py --format csv --C 2" + dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("features_test.csv"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("] a linear SVM (C=2.0): test accuracy 100.00%"), std::string::npos) << r.out;
  r = run_in_source(py + " tools/svm.py --kernel rbf --limit 30 --C 5 --gamma 0.5" + dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  size_t at = 0;
  for (const char* stage : {"] features: 30 train, 40 test, 3 values each",
                            "] note: an RBF SVM's fit grows about quadratically with the samples",
                            "] fitting an RBF SVM (C=5.0, gamma=0.5) on 30 samples",
                            "] fitted in ", "test accuracy 100.00%", "] done in "}) {
    size_t next = r.out.find(stage, at);
    ASSERT_NE(next, std::string::npos) << stage << " after offset " << at << ":\n" << r.out;
    at = next;
  }
  r = run_in_source(py + " tools/svm.py --kernel rbf --gamma wide" + dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "svm.py: error: --gamma wide: give a positive number, 'scale' or 'auto'\n");
}

// The first python3 that can import `module` ("/usr/bin/python3" has
// Debian's python3-torch), or "" when none can.
std::string python_with(const std::string& module) {
  for (const char* py : {"/usr/bin/python3", "python3"}) {
    std::string cmd = std::string(py) + " -c 'import " + module + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

// A member of a JSON object; fails the test when it is missing.
const JsonValue& member(const JsonValue& v, const std::string& key) {
  static const JsonValue none;
  for (const JsonMember& m : v.members)
    if (m.key == key) return m.value;
  ADD_FAILURE() << "no member '" << key << "'";
  return none;
}
double number(const JsonValue& v, const std::string& key) {
  const JsonValue& n = member(v, key);
  EXPECT_TRUE(n.is_number()) << key;
  return n.is_number() ? std::stod(n.text) : std::nan("");
}
bool has(const JsonValue& v, const std::string& key) {
  return std::any_of(v.members.begin(), v.members.end(),
                     [&](const JsonMember& m) { return m.key == key; });
}

// bench/sweep.py without PyTorch or hpmc: the grid (--list: ids, work per
// step, memory estimate), --quick, --points as globs and as added ids, and a
// point that names nothing refused in one line.
TEST(SweepScript, ListsTheGridAndRefusesUnknownPoints) {
  const std::string py = python_with("json");
  if (py.empty()) GTEST_SKIP() << "no python3";
  Result r = run_in_source(py + " bench/sweep.py --list");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 6 * 3 * 5 + 5 * 4) << r.out;
  // A point's line: "ID  WORK GFLOP/step  ~MEMORY GB".
  auto work = [&](const std::string& id) {
    size_t at = ("\n" + r.out).find("\n" + id + " ");
    if (at == std::string::npos) return std::string("(no line)");
    std::istringstream line(r.out.substr(at, r.out.find('\n', at) - at));
    std::string name, gflop, unit;
    line >> name >> gflop >> unit;
    return unit == "GFLOP/step" ? gflop : "(no work)";
  };
  // 784-4096-4096-10 at 4096: 6 x 4096 x (784·4096 + 4096·4096 + 4096·10) less
  // the first layer's input gradient (2 x 4096 x 784 x 4096).
  EXPECT_EQ(work("mlp-4096x2-b4096"), "465.9");
  EXPECT_EQ(work("mlp-128x1-b16"), "0.006545");
  // configs/cifar_ae.yaml's model at batch 64 (hpmc bench's figure before the fold).
  EXPECT_EQ(work("ae-x1-k3-b64"), "66.14");
  EXPECT_EQ(work("ae-x1-k5-b512"), "1470");
  r = run_in_source(py + " bench/sweep.py --list --quick");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3) << r.out;
  r = run_in_source(py + " bench/sweep.py --list --points 'ae-x2-*,mlp-320x3-b64,ae-x2-k3-b16'");
  ASSERT_EQ(r.code, 0) << r.err;
  // The four ae-x2 points (ae-x2-k3-b16 once), then the added one.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5) << r.out;
  EXPECT_EQ(r.out.find("ae-x2-k3-b16 "), 0u) << r.out;
  EXPECT_NE(r.out.find("\nmlp-320x3-b64 "), std::string::npos) << r.out;
  r = run_in_source(py + " bench/sweep.py --list --points 'mlp-*,nonsense'");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "sweep.py: error: --points nonsense: matches no point of the grid and names none (ids "
            "look like mlp-1024x2-b256 or ae-x0.5-k3-b64; --list prints the grid)\n");
  EXPECT_EQ(r.out, "");
}

// bench/sweep.py's quick grid on the CPU beside PyTorch (hpmc --impl cpu,
// PyTorch FP32, one thread each), with a point too large for --memory-gb:
// the table has a row per measured point with both times and their ratio,
// the JSON the same numbers, hpmc's own count of the work, the plans, the
// configs and the machine; the large point is skipped with its reason.
TEST(SweepScript, QuickGridOnTheCpuBesidePyTorch) {
  const std::string py = python_with("torch");
  if (py.empty())
    GTEST_SKIP() << "python3 with PyTorch is not installed (python3-torch): bench/sweep.py's "
                    "timed run is not tested";
  testing::TempDir t;
  Result r = run_in_source(py + " bench/sweep.py --hpmc '" + testing::hpmc_binary() +
                           "' --device cpu --quick --threads 1 --repeats 3 --run-ms 10 "
                           "--points '*,mlp-8192x4-b4096' --memory-gb 2 --out '" +
                           t.path().string() + "'");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string md = testing::slurp(t.file("sweep.md"));
  for (const char* s :
       {", PyTorch ", ", 1 thread; hpmc `--impl cpu --precision fp32`; medians of 3 runs; `",
        "\n| point | GFLOP/step | hpmc ms | hpmc step | hpmc % peak | PyTorch FP32 ms | "
        "× PyTorch FP32 | targets |\n| --- | ---: | ---: | --- | ---: | ---: | ---: | --- |\n",
        "\n| mlp-128x1-b16 | 0.006545 | ", "\n| mlp-512x2-b64 | 0.2054 | ",
        "\n| ae-x0.25-k3-b16 | 1.246 | ", " | layer by layer | ",
        "**Not measured or incomplete (1):**\n* mlp-8192x4-b4096: skipped: needs about 7.4 GB, "
        "more than the 2.0 GB allowed (--memory-gb)\n"})
    EXPECT_NE(md.find(s), std::string::npos) << s << "\n" << md;
  EXPECT_EQ(md.find("| mlp-8192x4-b4096 |"), std::string::npos) << md;

  const JsonValue j = parse_json(testing::slurp(t.file("sweep.json")));
  EXPECT_EQ(member(member(j, "machine"), "device").text, "cpu");
  EXPECT_EQ(member(member(j, "settings"), "precision").text, "fp32");
  EXPECT_NE(member(j, "command").text.find("bench/sweep.py --hpmc"), std::string::npos);
  EXPECT_NE(member(member(j, "configs"), "mlp-512x2").text.find("out_features: 512"),
            std::string::npos);
  const JsonValue& points = member(j, "points");
  ASSERT_EQ(points.items.size(), 4u);
  int measured = 0;
  for (const JsonValue& p : points.items) {
    const std::string id = member(p, "id").text;
    SCOPED_TRACE(id);
    if (id == "mlp-8192x4-b4096") {
      EXPECT_NE(member(p, "skipped").text.find("needs about 7.4 GB"), std::string::npos);
      EXPECT_FALSE(has(p, "hpmc"));
      EXPECT_FALSE(has(p, "pytorch"));
      continue;
    }
    ++measured;
    const JsonValue& h = member(p, "hpmc");
    const double hms = number(h, "ms_per_step"), pms = number(member(member(p, "pytorch"), "fp32"), "ms");
    EXPECT_GT(hms, 0);
    EXPECT_GT(pms, 0);
    EXPECT_EQ(member(h, "impl").text, "cpu");
    EXPECT_EQ(member(h, "precision").text, "fp32");
    EXPECT_NE(member(h, "command").text.find(" --precision fp32 "), std::string::npos);
    EXPECT_EQ(number(h, "batch"), number(p, "batch"));
    EXPECT_NEAR(number(member(p, "ratios"), "fp32"), hms / pms, 1e-9 * hms / pms);
    // The sweep's own count of the work is hpmc's (printed to 4 digits).
    EXPECT_NEAR(number(p, "work_flops") / 1e9, number(h, "gflop_per_step"),
                1e-3 * number(h, "gflop_per_step"));
    EXPECT_GE(number(member(h, "plan"), "steps"), 1);
    EXPECT_NE(member(h, "command").text.find(" bench "), std::string::npos);
    EXPECT_NE(member(h, "path").text.find("layer by layer"), std::string::npos);
  }
  EXPECT_EQ(measured, 3);
  // The chart where matplotlib is, else a note of how to make it.
  if (!python_with("matplotlib").empty())
    EXPECT_TRUE(fs::exists(t.file("sweep.png"))) << r.err;
  else
    EXPECT_NE(r.err.find("no chart"), std::string::npos) << r.err;
}

// The precisions are checked before anything runs (no PyTorch or hpmc needed):
// tf32 on the CPU, a precision with an FP32-only impl, --precision beside
// --precisions, a precision twice and a CUDA-graph mode on the CPU are each
// refused in one line, exit 2.
TEST(SweepScript, RefusesWhatAPrecisionCannotRun) {
  const std::string py = python_with("json");
  if (py.empty()) GTEST_SKIP() << "no python3";
  const std::string sweep = py + " bench/sweep.py --hpmc /nonexistent --quick --out /nonexistent ";
  const std::pair<const char*, const char*> cases[] = {
      {"--device cpu --precision tf32",
       "sweep.py: error: --precision tf32: tf32 is a tensor-core format: it needs --device cuda "
       "(hpmc refuses it on the CPU)\n"},
      {"--device cpu --precisions fp32,tf32",
       "sweep.py: error: --precisions tf32: tf32 is a tensor-core format: it needs --device cuda "
       "(hpmc refuses it on the CPU)\n"},
      {"--precision bf16 --impl tiled",
       "sweep.py: error: --precision bf16: --impl tiled runs fp32 only (the FP32 reference "
       "kernels); time bf16 with --impl im2col\n"},
      {"--precision bf16 --precisions fp32,bf16",
       "sweep.py: error: give --precision or --precisions, not both\n"},
      {"--precisions bf16,bf16",
       "sweep.py: error: --precisions bf16,bf16: give each precision once, e.g. fp32,bf16\n"},
      {"--precisions fp32,fp16",
       "sweep.py: error: --precisions fp16: unknown precision 'fp16' (known: fp32, tf32, bf16)\n"},
      {"--device cpu --precision bf16 --modes fp32,bf16clg",
       "sweep.py: error: --modes bf16clg needs --device cuda (a CUDA graph)\n"},
  };
  for (const auto& [flags, message] : cases) {
    Result r = run_in_source(sweep + flags);
    EXPECT_EQ(r.code, 2) << flags;
    EXPECT_EQ(r.err, message) << flags;
    EXPECT_EQ(r.out, "") << flags;
  }
}

// bench/sweep.py --precisions fp32,bf16 on the CPU: one sweep per precision
// into its folder, hpmc run in each (`--precision` on its command line, the
// precision of its report), PyTorch's bf16 autocast mode beside it in bf16,
// the bf16 target (PyTorch's bf16 CUDA-graph step) named and said not judged
// where that mode was not timed, and one sweep.md with a section for each.
TEST(SweepScript, OneSweepPerPrecision) {
  const std::string py = python_with("torch");
  if (py.empty())
    GTEST_SKIP() << "python3 with PyTorch is not installed (python3-torch): bench/sweep.py's "
                    "timed run is not tested";
  testing::TempDir t;
  Result r = run_in_source(py + " bench/sweep.py --hpmc '" + testing::hpmc_binary() +
                           "' --device cpu --points mlp-128x1-b16 --threads 1 --repeats 2 "
                           "--run-ms 5 --precisions fp32,bf16 --out '" + t.path().string() + "'");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const char* p : {"fp32", "bf16"}) {
    SCOPED_TRACE(p);
    const std::string dir = t.file(p);
    const JsonValue j = parse_json(testing::slurp(dir + "/sweep.json"));
    const JsonValue& settings = member(j, "settings");
    EXPECT_EQ(member(settings, "precision").text, p);
    const JsonValue& modes = member(settings, "modes");
    ASSERT_EQ(modes.items.size(), std::string(p) == "bf16" ? 2u : 1u);
    EXPECT_EQ(modes.items[0].text, "fp32");
    if (std::string(p) == "bf16") EXPECT_EQ(modes.items[1].text, "bf16cl");
    const JsonValue& targets = member(settings, "targets");
    ASSERT_FALSE(targets.items.empty());
    EXPECT_EQ(member(targets.items[0], "mode").text, std::string(p) == "bf16" ? "bf16clg" : "fp32");
    const JsonValue& points = member(j, "points");
    ASSERT_EQ(points.items.size(), 1u);
    const JsonValue& h = member(points.items[0], "hpmc");
    EXPECT_EQ(member(h, "precision").text, p);
    EXPECT_NE(member(h, "command").text.find(std::string(" --precision ") + p + " "),
              std::string::npos);
    EXPECT_GT(number(h, "ms_per_step"), 0);
    const std::string md = testing::slurp(dir + "/sweep.md");
    EXPECT_NE(md.find(std::string("hpmc `--impl cpu --precision ") + p + "`"), std::string::npos)
        << md;
  }
  const std::string bf16 = testing::slurp(t.file("bf16/sweep.md"));
  for (const char* s :
       {" | PyTorch FP32 ms | PyTorch bf16 + channels-last ms | × PyTorch FP32 | "
        "× PyTorch bf16 + channels-last | targets |",
        " | - |\n",  // no target judged: the targets cell is empty
        "Targets (bf16): hpmc at most 0.8× PyTorch bf16 + channels-last + graph everywhere.",
        "**No target is judged: its PyTorch mode (bf16clg) was not timed.**"})
    EXPECT_NE(bf16.find(s), std::string::npos) << s << "\n" << bf16;
  const std::string fp32 = testing::slurp(t.file("fp32/sweep.md"));
  EXPECT_NE(fp32.find("Targets (fp32): hpmc at most 1.0× PyTorch FP32 everywhere"),
            std::string::npos)
      << fp32;
  // One sweep.md with both tables, fp32's first.
  const std::string all = testing::slurp(t.file("sweep.md"));
  const size_t a = all.find("\n## fp32 (fp32/sweep.md, sweep.json)\n"),
               b = all.find("\n## bf16 (bf16/sweep.md, sweep.json)\n");
  ASSERT_NE(a, std::string::npos) << all;
  ASSERT_NE(b, std::string::npos) << all;
  EXPECT_LT(a, b);
  EXPECT_NE(all.find(fp32.substr(0, fp32.find('\n')), a), std::string::npos) << all;
  EXPECT_NE(all.find(bf16.substr(0, bf16.find('\n')), b), std::string::npos) << all;
}

// Stand-ins for hpmc and for the python that runs bench/pytorch_reference.py,
// for bench/compare.py and bench/precision.py (--hpmc, --python): each logs
// its arguments and prints a report with fixed times. hpmc: 3, 2 and 1 ms in
// fp32, tf32 and bf16 (epoch 30, 20, 10 s), and tf32 at batch 256 fails
// (exit 2, one line); PyTorch: 8, 6, 5, 4 and 2 ms in fp32, default, graph,
// bf16cl and bf16clg (epoch 10x those).
struct FakeBench {
  testing::TempDir dir;
  FakeBench() {
    write("hpmc",
          "echo \"$@\" >>\"$(dirname \"$0\")/hpmc-args\"\n"
          "cfg=$2; prec=fp32; batch=64; impl=cpu\n"
          "while [ $# -gt 0 ]; do case $1 in --precision) prec=$2;; --batch) batch=$2;; "
          "--impl) impl=$2;; esac; shift; done\n"
          "if [ $prec = tf32 ] && [ $batch = 256 ]; then\n"
          "  echo \"error: --impl $impl cannot run tf32 here\" >&2; exit 2; fi\n"
          "case $prec in fp32) ms=3;; tf32) ms=2;; bf16) ms=1;; esac\n"
          "echo \"step: layer by layer\"\n"
          "echo \"bench: $cfg impl=$impl precision=$prec batch=$batch ms/step=$ms img/s=1000 "
          "epoch_s=${ms}0 tflops=1 peak_frac=0.25\"");
    write("python",
          "echo \"$@\" >>\"$(dirname \"$0\")/python-args\"\n"
          "model=; modes=; batch=64\n"
          "while [ $# -gt 0 ]; do case $1 in --model) model=$2;; --modes) modes=$2;; "
          "--batch) batch=$2;; esac; shift; done\n"
          "for m in $(echo $modes | tr , ' '); do\n"
          "  case $m in fp32) ms=8;; default) ms=6;; graph) ms=5;; bf16cl) ms=4;; bf16clg) ms=2;; esac\n"
          "  echo \"pytorch $model $m batch $batch:    $ms.000 ms/step        1000 img/s  "
          "epoch-equivalent   ${ms}0.000 s  (median of 5 x 10 steps, torch fake)\"\n"
          "done");
  }
  void write(const std::string& name, const std::string& body) {
    std::ofstream(dir.file(name)) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(dir.file(name), fs::perms::owner_all);
  }
  std::string flags() const {
    return " --hpmc '" + dir.file("hpmc") + "' --python '" + dir.file("python") + "'";
  }
  std::string log(const std::string& who) const { return testing::slurp(dir.file(who + "-args")); }
};

// bench/compare.py --precision bf16 on the GPU (stand-ins: no GPU needed):
// every hpmc bench gets --precision bf16 and is named so, PyTorch's modes
// gain bf16clg, whose column the table has; the JSON records the precision.
TEST(CompareScript, PassesThePrecisionAndAddsPyTorchsBf16GraphMode) {
  const std::string py = python_with("json");
  if (py.empty()) GTEST_SKIP() << "no python3";
  FakeBench f;
  testing::TempDir t;
  Result r = run_in_source(py + " bench/compare.py" + f.flags() +
                           " --device cuda --precision bf16 --json '" + t.file("c.json") + "'");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string hpmc = f.log("hpmc"), python = f.log("python");
  EXPECT_EQ(std::count(hpmc.begin(), hpmc.end(), '\n'), 2) << hpmc;
  EXPECT_NE(hpmc.find("bench configs/cifar_ae.yaml --impl im2col --precision bf16 "),
            std::string::npos)
      << hpmc;
  EXPECT_NE(hpmc.find("bench configs/mnist_mlp.yaml --impl im2col --precision bf16 "),
            std::string::npos)
      << hpmc;
  EXPECT_NE(python.find("--model cifar_ae --device cuda --modes fp32,default,graph,bf16cl,bf16clg "),
            std::string::npos)
      << python;
  EXPECT_NE(python.find("--model mnist_mlp --device cuda --modes fp32,graph,bf16clg "),
            std::string::npos)
      << python;
  for (const char* s : {"### cifar_ae (cuda, hpmc in bf16)",
                        " | × PyTorch bf16 autocast, channels-last, CUDA graph |",
                        // hpmc's 10 s epoch over PyTorch's 80, 60, 50, 40 and 20 s.
                        "| hpmc --impl im2col --precision bf16 | - | 1 | 1,000 | 10 | 0.12 | 0.17 | "
                        "0.20 | 0.25 | 0.50 |"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  const JsonValue j = parse_json(testing::slurp(t.file("c.json")));
  EXPECT_EQ(member(j, "precision").text, "bf16");
  const JsonValue& rows = member(member(j, "results"), "cifar_ae");
  ASSERT_EQ(rows.items.size(), 6u);
  EXPECT_EQ(member(rows.items[0], "precision").text, "bf16");
  EXPECT_EQ(member(rows.items[5], "mode").text, "bf16clg");
}

// compare.py refuses a precision that an impl or the device cannot run, in one
// line, before anything runs; in fp32 it runs the modes it always did.
TEST(CompareScript, RefusesWhatAPrecisionCannotRun) {
  const std::string py = python_with("json");
  if (py.empty()) GTEST_SKIP() << "no python3";
  FakeBench f;
  Result r = run_in_source(py + " bench/compare.py" + f.flags() + " --device cpu --precision tf32");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "compare.py: error: --precision tf32: tf32 is a tensor-core format: it needs --device "
            "cuda (hpmc refuses it on the CPU)\n");
  r = run_in_source(py + " bench/compare.py" + f.flags() +
                    " --device cuda --impls naive,tiled,im2col --precision bf16");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "compare.py: error: --precision bf16: --impl naive,tiled runs fp32 only (the FP32 "
            "reference kernels); time bf16 with --impl im2col\n");
  EXPECT_FALSE(fs::exists(f.dir.file("hpmc-args")));
  r = run_in_source(py + " bench/compare.py" + f.flags() + " --device cuda --models cifar_ae");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(f.log("hpmc").find("--impl im2col --precision fp32 "), std::string::npos);
  EXPECT_NE(f.log("python").find("--modes fp32,default,graph,bf16cl "), std::string::npos);
  EXPECT_NE(r.out.find("| hpmc --impl im2col | - | 3 |"), std::string::npos) << r.out;
}

// bench/precision.py with its GPU defaults (stand-ins: no GPU needed): hpmc in
// fp32, tf32 and bf16 and PyTorch's four modes at cifar_ae 64 and 256 and
// mnist_mlp 64, one table with the ratios to PyTorch's bf16 graph step; a
// run that fails leaves "failed" and its reason; the JSON and every hpmc
// report are written beside the table.
TEST(PrecisionScript, OneTableOfPrecisionsBesidePyTorchsModes) {
  const std::string py = python_with("json");
  if (py.empty()) GTEST_SKIP() << "no python3";
  FakeBench f;
  testing::TempDir t;
  Result r = run_in_source(py + " bench/precision.py" + f.flags() + " --out '" +
                           t.path().string() + "'");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string hpmc = f.log("hpmc");
  EXPECT_EQ(std::count(hpmc.begin(), hpmc.end(), '\n'), 9) << hpmc;
  EXPECT_NE(hpmc.find("bench configs/cifar_ae.yaml --impl im2col --precision tf32 --batch 256 "),
            std::string::npos)
      << hpmc;
  EXPECT_NE(f.log("python").find("--model mnist_mlp --device cuda --modes "
                                 "fp32,default,graph,bf16clg --batch 64 "),
            std::string::npos);
  const std::string md = testing::slurp(t.file("precision.md"));
  for (const char* s :
       {"| model | batch | hpmc fp32 ms | hpmc tf32 ms | hpmc bf16 ms | PyTorch FP32 ms | "
        "PyTorch defaults ms | PyTorch CUDA graph ms | PyTorch bf16 + channels-last + graph ms | "
        "hpmc fp32 × bf16clg | hpmc tf32 × bf16clg | hpmc bf16 × bf16clg |\n",
        "\n| cifar_ae | 64 | 3 | 2 | 1 | 8 | 6 | 5 | 2 | 1.50 | 1.00 | 0.50 |\n",
        "\n| cifar_ae | 256 | 3 | failed | 1 | 8 | 6 | 5 | 2 | 1.50 | - | 0.50 |\n",
        "\n| mnist_mlp | 64 | 3 | 2 | 1 | 8 | 6 | 5 | 2 | 1.50 | 1.00 | 0.50 |\n",
        "* cifar_ae batch 64 bf16: 25.0% of the peak; step: layer by layer\n",
        "**Failed (1):**\n* cifar_ae batch 256 hpmc tf32: exit 2: ",
        "; last line: error: --impl im2col cannot run tf32 here\n"})
    EXPECT_NE(md.find(s), std::string::npos) << s << "\n" << md;
  const JsonValue j = parse_json(testing::slurp(t.file("precision.json")));
  const JsonValue& points = member(j, "points");
  ASSERT_EQ(points.items.size(), 3u);
  EXPECT_EQ(number(member(member(points.items[2], "hpmc"), "bf16"), "ms_per_step"), 1);
  EXPECT_EQ(number(member(member(points.items[2], "pytorch"), "bf16clg"), "ms_per_step"), 2);
  const std::string reports = testing::slurp(t.file("hpmc-reports.log"));
  EXPECT_NE(reports.find("=== mnist_mlp batch 64 bf16: "), std::string::npos) << reports;
}

// precision.py checks its arguments before anything runs, one line each.
TEST(PrecisionScript, RefusesBadArguments) {
  const std::string py = python_with("json");
  if (py.empty()) GTEST_SKIP() << "no python3";
  FakeBench f;
  const std::string cmd = py + " bench/precision.py" + f.flags() + " --out /nonexistent ";
  const std::pair<const char*, const char*> cases[] = {
      {"--device cpu --precisions fp32,tf32",
       "precision.py: error: --precisions tf32: tf32 is a tensor-core format: it needs --device "
       "cuda (hpmc refuses it on the CPU)\n"},
      {"--device cpu --modes fp32,graph --versus fp32",
       "precision.py: error: --modes graph: CUDA graphs need --device cuda\n"},
      {"--points cifar_ae:64,resnet:8",
       "precision.py: error: --points resnet:8: expected MODEL:BATCH with MODEL one of "
       "cifar_ae, mnist_mlp and a positive batch, e.g. cifar_ae:64\n"},
      {"--modes fp32,default",
       "precision.py: error: --versus bf16clg: not among --modes fp32,default\n"},
      {"--impl tiled",
       "precision.py: error: --precisions tf32: --impl tiled runs fp32 only (the FP32 reference "
       "kernels); time tf32 with --impl im2col\n"},
  };
  for (const auto& [flags, message] : cases) {
    Result r = run_in_source(cmd + flags);
    EXPECT_EQ(r.code, 2) << flags;
    EXPECT_EQ(r.err, message) << flags;
  }
  EXPECT_FALSE(fs::exists(f.dir.file("hpmc-args")));
}

// bench/pytorch_reference.py on the CPU: bf16cl runs; the CUDA-graph modes
// and an unknown mode are refused in one line before anything is timed.
TEST(PyTorchReference, RunsBf16OnTheCpuAndRefusesGraphModesThere) {
  const std::string py = python_with("torch");
  if (py.empty()) GTEST_SKIP() << "python3 with PyTorch is not installed (python3-torch)";
  const std::string ref = py + " bench/pytorch_reference.py --device cpu --model mnist_mlp "
                               "--batch 8 --steps 2 --warmup 1 --repeats 1 --threads 1 --modes ";
  Result r = run_in_source(ref + "fp32,bf16cl");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("pytorch mnist_mlp fp32     batch 8: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\npytorch mnist_mlp bf16cl   batch 8: "), std::string::npos) << r.out;
  for (const char* mode : {"graph", "bf16clg"}) {
    r = run_in_source(ref + "fp32," + mode);
    EXPECT_EQ(r.code, 2) << mode;
    EXPECT_EQ(r.err, std::string("pytorch_reference.py: error: --modes ") + mode +
                         ": CUDA graphs need --device cuda (on --device cpu, time fp32 or bf16cl)\n");
    EXPECT_EQ(r.out, "") << mode;  // refused before the fp32 mode ran
  }
  r = run_in_source(ref + "bf16");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "pytorch_reference.py: error: --modes bf16: unknown mode (known: fp32, "
                   "default, bf16cl, graph, bf16clg)\n");
}

// bench/accuracy.py on the CPU (the real hpmc, synthetic data): each config
// in each precision over the seeds, the table per config with the paired
// differences from fp32 (accuracy for a classifier only), every run in the
// JSON; a binary that cannot run leaves each run "failed" with its reason,
// exit 1; what a precision cannot run is refused before anything runs.
TEST(AccuracyScript, PrecisionsBesideFp32SeedBySeed) {
  const std::string py = python_with("json");
  if (py.empty()) GTEST_SKIP() << "no python3";
  testing::TempDir t;
  const std::string data =
      " --hpmc-args '--set data.synthetic=true --set data.train_limit=128 --set "
      "data.test_limit=32 --batch 32'";
  Result r = run_in_source(py + " bench/accuracy.py --hpmc '" + testing::hpmc_binary() +
                           "' --impl cpu --precisions bf16 --seeds 3,4 --runs "
                           "fashion_mlp:1,fashion_ae:1" + data + " --out '" + t.path().string() +
                           "'");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string md = testing::slurp(t.file("accuracy.md"));
  for (const char* s :
       {"### fashion_mlp, 1 epoch\n\n| precision | runs | test accuracy (mean) | − fp32, mean "
        "(points) | − fp32, largest (points) | test loss (mean) | − fp32, mean | − fp32, largest |",
        "\n| fp32 | 2 | ", "\n| bf16 | 2 | ",
        "### fashion_ae, 1 epoch\n\n| precision | runs | test loss (mean) | − fp32, mean | − fp32, "
        "largest |\n"})
    EXPECT_NE(md.find(s), std::string::npos) << s << "\n" << md;
  EXPECT_EQ(md.find("Failed"), std::string::npos) << md;
  const JsonValue j = parse_json(testing::slurp(t.file("accuracy.json")));
  const JsonValue& runs = member(j, "runs");
  ASSERT_EQ(runs.items.size(), 8u);  // 2 configs × 2 precisions × 2 seeds
  for (const JsonValue& run : runs.items) {
    EXPECT_GT(number(run, "test_loss"), 0);
    EXPECT_NE(member(run, "command").text.find("--set training.seed="), std::string::npos);
  }

  r = run_in_source(py + " bench/accuracy.py --hpmc /nonexistent/hpmc --impl cpu --precisions "
                         "bf16 --seeds 1 --runs fashion_mlp:1 --out '" + t.path().string() + "'");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const std::string failed = testing::slurp(t.file("accuracy.md"));
  EXPECT_NE(failed.find("**Failed (2):**\n* fashion_mlp fp32 seed 1: could not start "
                        "/nonexistent/hpmc"),
            std::string::npos)
      << failed;

  const std::string acc = py + " bench/accuracy.py --hpmc /nonexistent --out /nonexistent ";
  const std::pair<const char*, const char*> cases[] = {
      {"--impl cpu",
       "accuracy.py: error: --precisions tf32: tf32 is a tensor-core format: it needs --device "
       "cuda (hpmc refuses it on the CPU)\n"},
      {"--impl tiled --precisions bf16",
       "accuracy.py: error: --precisions bf16: --impl tiled runs fp32 only (the FP32 reference "
       "kernels); time bf16 with --impl im2col\n"},
      {"--runs fashion_mlp:0",
       "accuracy.py: error: --runs fashion_mlp:0: expected CONFIG:EPOCHS with EPOCHS >= 1, e.g. "
       "fashion_mlp:3\n"},
      {"--runs nope:3", "accuracy.py: error: --runs nope:3: there is no configs/nope.yaml\n"},
      {"--seeds 1,x", "accuracy.py: error: --seeds 1,x: expected integers, e.g. 1,2,3\n"},
  };
  for (const auto& [flags, message] : cases) {
    Result e = run_in_source(acc + flags);
    EXPECT_EQ(e.code, 2) << flags;
    EXPECT_EQ(e.err, message) << flags;
    EXPECT_EQ(e.out, "") << flags;
  }
}

}  // namespace
}  // namespace hpmc
