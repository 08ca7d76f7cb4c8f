// The features export: the text writer (CSV and LIBSVM values that read
// back bit for bit, files that do not depend on the chunk size), the
// progress display, `--impl auto`, and `hpmc features` end to end on a
// small synthetic model (formats that agree value for value, --format
// libsvm|all, --batch, the refusal to replace files).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "cli_runner.h"
#include "core/device.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/rng.h"
#include "core/threads.h"
#include "io/feature_text.h"
#include "io/npy.h"
#include "model/impl.h"

namespace hpmc {
namespace {

namespace fs = std::filesystem;
using testing::run_hpmc;
using testing::slurp;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The text's fields split on `sep`.
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string f; std::getline(ss, f, sep);) out.push_back(f);
  return out;
}

// strtof of the whole field: a field with anything after the number fails.
float parse_float(const std::string& s) {
  char* end = nullptr;
  float f = std::strtof(s.c_str(), &end);
  EXPECT_EQ(*end, '\0') << "'" << s << "'";
  return f;
}

// CSV rows (after the header) as labels and values.
void parse_csv(const std::string& text, size_t dim, std::vector<int32_t>& labels,
               std::vector<float>& values) {
  std::vector<std::string> lines = split(text, '\n');
  ASSERT_FALSE(lines.empty());
  for (size_t r = 1; r < lines.size(); ++r) {
    std::vector<std::string> f = split(lines[r], ',');
    ASSERT_EQ(f.size(), dim + 1) << "row " << r;
    labels.push_back(std::stoi(f[0]));
    for (size_t j = 1; j <= dim; ++j) values.push_back(parse_float(f[j]));
  }
}

// LIBSVM rows as labels and dense values (a missing index reads as +0).
void parse_libsvm(const std::string& text, size_t dim, std::vector<int32_t>& labels,
                  std::vector<float>& values) {
  for (const std::string& line : split(text, '\n')) {
    std::vector<std::string> f = split(line, ' ');
    ASSERT_FALSE(f.empty());
    labels.push_back(std::stoi(f[0]));
    std::vector<float> row(dim, 0.0f);
    size_t last = 0;
    for (size_t k = 1; k < f.size(); ++k) {
      const size_t colon = f[k].find(':');
      ASSERT_NE(colon, std::string::npos) << f[k];
      const size_t idx = std::stoul(f[k].substr(0, colon));
      ASSERT_GT(idx, last) << "indices are 1-based and increasing: " << line;
      ASSERT_LE(idx, dim);
      last = idx;
      row[idx - 1] = parse_float(f[k].substr(colon + 1));
    }
    values.insert(values.end(), row.begin(), row.end());
  }
}

// Floats that stress a formatter: both zeros, the extremes, subnormals,
// values that need all 9 digits, and random bit patterns of every exponent.
std::vector<float> hard_floats(size_t n) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 1e-5f, 123456789.0f,
                          3.4028235e38f, -3.4028235e38f, 1.17549435e-38f, 1.4e-45f, -1.4e-45f,
                          2.938736e-39f, 16777216.0f, 16777217.0f, 0.30000001f, 1.00000012f,
                          100.0f, 1e10f, 9.999999e-7f};
  Rng rng(17);
  while (v.size() < n) {
    uint32_t u = uint32_t(rng.next_u64());
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isfinite(f)) v.push_back(f);
    if (v.size() < n && v.size() % 3 == 0) v.push_back(0.0f);  // sparse rows too
  }
  v.resize(n);
  return v;
}

TEST(FeatureText, CsvAndLibsvmReadBackBitForBit) {
  const size_t dim = 37;
  const int n = 60;
  std::vector<float> v = hard_floats(size_t(n) * dim);
  std::vector<int32_t> lab(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) lab[size_t(i)] = i % 2 ? -i : i * 1000;
  std::string csv = feature_header(FeatureText::kCsv, dim, false), svm;
  EXPECT_EQ(csv.substr(0, 15), "label,f0,f1,f2,");
  EXPECT_EQ(csv.substr(csv.size() - 5), ",f36\n");
  EXPECT_EQ(feature_header(FeatureText::kLibsvm, dim, false), "");
  append_feature_rows(csv, FeatureText::kCsv, v.data(), dim, n, {lab.data(), nullptr});
  append_feature_rows(svm, FeatureText::kLibsvm, v.data(), dim, n, {lab.data(), nullptr});
  std::vector<int32_t> cl, sl;
  std::vector<float> cv, sv;
  parse_csv(csv, dim, cl, cv);
  parse_libsvm(svm, dim, sl, sv);
  EXPECT_EQ(cl, lab);
  EXPECT_EQ(sl, lab);
  ASSERT_EQ(cv.size(), v.size());
  ASSERT_EQ(sv.size(), v.size());
  for (size_t k = 0; k < v.size(); ++k) {
    ASSERT_EQ(bits(cv[k]), bits(v[k])) << k << ": " << v[k];
    ASSERT_EQ(bits(sv[k]), bits(v[k])) << k << ": " << v[k];
  }
  // The shortest form: no "%.9g" padding, +0 as "0", -0 kept in LIBSVM.
  std::string one;
  const float row[4] = {0.1f, 0.0f, -0.0f, 1e-5f};
  const int32_t l7 = 7;
  append_feature_rows(one, FeatureText::kCsv, row, 4, 1, {&l7, nullptr});
  EXPECT_EQ(one, "7,0.1,0,-0,1e-05\n");
  one.clear();
  append_feature_rows(one, FeatureText::kLibsvm, row, 4, 1, {&l7, nullptr});
  EXPECT_EQ(one, "7 1:0.1 3:-0 4:1e-05\n");
  // A row of zeros is its label alone.
  const float zeros[3] = {0, 0, 0};
  one.clear();
  append_feature_rows(one, FeatureText::kLibsvm, zeros, 3, 1, {&l7, nullptr});
  EXPECT_EQ(one, "7\n");
}

// Rows keyed by file name: the CSV's first column (quoted where RFC 4180
// says), LIBSVM keeps the label (0 without labels), and the names' list.
TEST(FeatureText, RowsKeyedByFileName) {
  const float v[4] = {1.5f, 0, 0, 2};
  const std::string names[2] = {"cat.png", "a,b \"c\".jpg"};
  const int32_t lab[2] = {3, 4};
  std::string csv = feature_header(FeatureText::kCsv, 2, true);
  append_feature_rows(csv, FeatureText::kCsv, v, 2, 2, {lab, names});
  EXPECT_EQ(csv, "file,f0,f1\ncat.png,1.5,0\n\"a,b \"\"c\"\".jpg\",0,2\n");
  std::string svm;
  append_feature_rows(svm, FeatureText::kLibsvm, v, 2, 2, {lab, names});
  EXPECT_EQ(svm, "3 1:1.5\n4 2:2\n");
  svm.clear();
  append_feature_rows(svm, FeatureText::kLibsvm, v, 2, 2, {nullptr, names});
  EXPECT_EQ(svm, "0 1:1.5\n0 2:2\n");
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("line\nbreak"), "\"line\nbreak\"");

  testing::TempDir t;
  write_name_list(t.file("names.txt"), {"cat.png", "a,b \"c\".jpg"});
  EXPECT_EQ(slurp(t.file("names.txt")), "cat.png\na,b \"c\".jpg\n");
  try {
    write_name_list(t.file("bad.txt"), {"ok.png", "two\nlines.png"});
    FAIL() << "a name with a line break was listed";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()),
              "the file name 'two\\x0alines.png' holds a line break, so " + t.file("bad.txt") +
                  " (one name a line) cannot list it; rename the file");
  }
  EXPECT_FALSE(fs::exists(t.file("bad.txt")));
}

// Whatever the chunk (1 row, a prime, exactly n, more than n) and however
// the rows arrive, the writer writes the bytes the one-thread formatter makes.
TEST(FeatureText, ChunkSizeDoesNotChangeTheFile) {
  const size_t dim = 11;
  const int n = 53;
  std::vector<float> v = hard_floats(size_t(n) * dim);
  std::vector<int32_t> lab(static_cast<size_t>(n));
  std::vector<std::string> names(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) lab[size_t(i)] = i % 10, names[size_t(i)] = str("img_", i, ".png");
  testing::TempDir t;
  for (FeatureText f : {FeatureText::kCsv, FeatureText::kLibsvm})
    for (bool named : {false, true}) {
      std::string want = feature_header(f, dim, named);
      append_feature_rows(want, f, v.data(), dim, n, {lab.data(), named ? names.data() : nullptr});
      for (int chunk : {1, 7, 13, n, n + 5, 1000})
        for (int batch : {1, 5, n}) {
          const std::string path =
              t.file(str(feature_text_extension(f), named, "_", chunk, "_", batch));
          FeatureTextWriter w(path, f, dim, named, chunk);
          for (int b = 0; b < n; b += batch) {
            const int m = std::min(batch, n - b);
            w.append(v.data() + size_t(b) * dim,
                     {lab.data() + b, named ? names.data() + b : nullptr}, m);
          }
          EXPECT_FALSE(fs::exists(path)) << "the file appears only at commit";
          w.commit();
          EXPECT_EQ(w.rows(), n);
          ASSERT_EQ(slurp(path), want) << feature_text_extension(f) << " named " << named
                                       << " chunk " << chunk << " batch " << batch;
        }
    }
}

TEST(FeatureText, AnAbandonedWriterLeavesNothing) {
  testing::TempDir t;
  const float v[2] = {1, 2};
  const int32_t l[1] = {0};
  {
    FeatureTextWriter w(t.file("x.csv"), FeatureText::kCsv, 2, false, 4);
    w.append(v, {l, nullptr}, 1);
  }
  EXPECT_TRUE(fs::is_empty(t.path()));
}

TEST(Progress, DurationsAndBars) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(65.4), "1:05");
  EXPECT_EQ(format_duration(7265), "2:01:05");
  EXPECT_EQ(format_duration(-1), "--:--");
  EXPECT_EQ(format_duration(NAN), "--:--");
  EXPECT_EQ(progress_bar(3, 10, 10), "[===       ]  30%");
  EXPECT_EQ(progress_bar(10, 10, 4), "[====] 100%");
  EXPECT_EQ(progress_bar(0, 0, 2), "[==] 100%");
  EXPECT_EQ(parse_progress_mode("lines"), ProgressMode::kLines);
  EXPECT_THROW(parse_progress_mode("loud"), UsageError);
}

TEST(Progress, MeterDrawsABarOrLinesOrNothing) {
  std::ostringstream bar, lines, quiet;
  {
    ProgressMeter m(bar, "features test", 200, ProgressMode::kBar);
    m.update(50);
    m.update(200);
  }
  const std::string b = bar.str();
  EXPECT_EQ(b.rfind("\r  features test [=======", 0), 0u) << b;
  EXPECT_NE(b.find(" 50/200 ETA "), std::string::npos) << b;
  EXPECT_NE(b.find("] 100% 200/200 ETA 0:00"), std::string::npos) << b;
  // Cleared at the end: the last thing written is a carriage return.
  EXPECT_EQ(b.back(), '\r');
  {
    ProgressMeter m(lines, "x", 100, ProgressMode::kLines);
    for (int i = 1; i <= 100; ++i) m.update(i);
  }
  std::string want;
  for (int i = 10; i < 100; i += 10) want += str("  x ", i, "/100 (", i, "%)\n");
  EXPECT_EQ(lines.str(), want);
  {
    ProgressMeter m(quiet, "x", 100, ProgressMode::kQuiet);
    m.update(50);
  }
  EXPECT_EQ(quiet.str(), "");
}

TEST(ImplChoice, AutoPicksIm2colWhereAGpuIsUsableElseCpu) {
  const bool gpu = gpu::compiled_with_cuda() && gpu::device_count() > 0;
  ImplChoice c = choose_impl("auto");
  EXPECT_TRUE(c.automatic);
  EXPECT_EQ(c.impl, gpu ? Impl::kIm2col : Impl::kCpu);
  if (!gpu::compiled_with_cuda())
    EXPECT_EQ(c.why, "this hpmc was built without CUDA");
  else if (!gpu)
    EXPECT_EQ(c.why.rfind("no usable GPU: ", 0), 0u) << c.why;
  else
    EXPECT_EQ(c.why.rfind("GPU 0: ", 0), 0u) << c.why;
  c = choose_impl("tiled");
  EXPECT_FALSE(c.automatic);
  EXPECT_EQ(c.impl, Impl::kTiled);
  try {
    choose_impl("fast");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown implementation 'fast'; choose one of: auto, cpu, naive, tiled, im2col");
  }
  // A config's per-layer impl names an implementation; auto is for the command line.
  EXPECT_THROW(parse_impl("auto"), UsageError);
}

// ---- hpmc features end to end ----------------------------------------------

const std::string kQuick = "configs/fashion_ae.yaml --set data.synthetic=true --set "
                           "data.train_limit=40 --set data.test_limit=23 ";

// One checkpoint of a one-step run, made once for the tests below.
const std::string& checkpoint() {
  static testing::TempDir dir;
  static const std::string path = [] {
    auto r = run_hpmc("run " + kQuick + "--epochs 1 --batch 40 --progress quiet --impl cpu --out " +
                      dir.file("run") + " --weights-dir " + dir.file("w"));
    EXPECT_EQ(r.code, 0) << r.err;
    return dir.file("w/fashion_ae.safetensors");
  }();
  return path;
}

std::string features(const std::string& args) {
  return "features " + kQuick + "--weights " + checkpoint() + " --impl cpu " + args;
}

TEST(Features, CsvNpyAndLibsvmAgreeValueForValue) {
  testing::TempDir t;
  auto r = run_hpmc(features("--format all --out " + t.file("f")));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string split : {"train", "test"}) {
    const int n = split == "train" ? 40 : 23;
    const size_t dim = 16 * 7 * 7;
    auto at = [&](const std::string& prefix, const std::string& ext) {
      return t.file("f/" + prefix + "_" + split + "." + ext);
    };
    // The last line names every file, in this order.
    EXPECT_NE(r.out.find(split + ": " + std::to_string(n) + " samples x 784 features (pool2, "
                         "16x7x7) -> " + at("features", "csv") + ", " + at("features", "npy") +
                         ", " + at("labels", "npy") + ", " + at("features", "libsvm") + "\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("features_" + split + ".libsvm will take about "), std::string::npos);
    EXPECT_NE(r.out.find(split + ": " + std::to_string(n) + " x 784 values in "), std::string::npos)
        << r.out;
    NpyArray f = read_npy(at("features", "npy")), l = read_npy(at("labels", "npy"));
    ASSERT_EQ(f.shape, (std::vector<int64_t>{n, int64_t(dim)}));
    const float* fv = reinterpret_cast<const float*>(f.data.data());
    const int32_t* lv = reinterpret_cast<const int32_t*>(l.data.data());
    std::vector<int32_t> cl, sl;
    std::vector<float> cv, sv;
    parse_csv(slurp(at("features", "csv")), dim, cl, cv);
    parse_libsvm(slurp(at("features", "libsvm")), dim, sl, sv);
    ASSERT_EQ(cv.size(), size_t(n) * dim);
    ASSERT_EQ(sv.size(), size_t(n) * dim);
    size_t zeros = 0;
    for (size_t k = 0; k < cv.size(); ++k) {
      ASSERT_EQ(bits(cv[k]), bits(fv[k])) << split << " value " << k;
      ASSERT_EQ(bits(sv[k]), bits(fv[k])) << split << " value " << k;
      zeros += fv[k] == 0;
    }
    EXPECT_GT(zeros, 0u) << "the ReLU features have zeros, which LIBSVM leaves out";
    EXPECT_EQ(cl, std::vector<int32_t>(lv, lv + n));
    EXPECT_EQ(sl, cl);
  }
}

// HPMC_FEATURES_CHUNK_ROWS (the test hook for the chunk) changes no byte.
TEST(Features, ChunkSizeGivesTheSameFiles) {
  testing::TempDir t;
  auto r = run_hpmc(features("--format all --batch 8 --out " + t.file("d")));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* chunk : {"1", "7", "41", "1000"}) {
    const std::string out = t.file(std::string("c") + chunk);
    r = run_hpmc(features("--format all --batch 8 --out " + out),
                 std::string("HPMC_FEATURES_CHUNK_ROWS=") + chunk);
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* f : {"features_train.csv", "features_test.csv", "features_train.libsvm",
                          "features_test.libsvm", "features_test.npy"})
      EXPECT_EQ(slurp(out + "/" + f), slurp(t.file("d/") + f)) << f << " chunk " << chunk;
  }
  r = run_hpmc(features("--format csv --out " + t.file("e")), "HPMC_FEATURES_CHUNK_ROWS=0");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "hpmc: error: HPMC_FEATURES_CHUNK_ROWS=0: must be a whole number of rows from "
                   "1 to 1048576; unset it for the default\n");
  EXPECT_FALSE(fs::exists(t.file("e/features_train.csv")));
}

TEST(Features, BatchIsValidatedAndDoesNotChangeTheFeatures) {
  testing::TempDir t;
  auto r = run_hpmc(features("--split test --format npy --batch 0 --out " + t.file("a")));
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.err, "hpmc: error: --batch 0: training.batch_size: must be between 1 and 1048576, "
                   "got 0\n");
  r = run_hpmc(features("--split test --format npy --batch x --out " + t.file("a")));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.err.rfind("hpmc: error: --batch x: training.batch_size: ", 0), 0u) << r.err;
  EXPECT_FALSE(fs::exists(t.file("a")));
  // Batches of 5 (the last one short) and of the whole split.
  ASSERT_EQ(run_hpmc(features("--split test --format npy --batch 5 --out " + t.file("b"))).code, 0);
  ASSERT_EQ(run_hpmc(features("--split test --format npy --batch 64 --out " + t.file("c"))).code, 0);
  NpyArray b = read_npy(t.file("b/features_test.npy")), c = read_npy(t.file("c/features_test.npy"));
  ASSERT_EQ(b.shape, c.shape);
  const float* bv = reinterpret_cast<const float*>(b.data.data());
  const float* cv = reinterpret_cast<const float*>(c.data.data());
  for (int64_t k = 0; k < b.numel(); ++k)
    ASSERT_NEAR(bv[k], cv[k], 1e-6f * std::max(1.0f, std::fabs(cv[k]))) << k;
}

TEST(Features, RefusesToReplaceLibsvmFiles) {
  testing::TempDir t;
  const std::string out = " --out " + t.file("f");
  ASSERT_EQ(run_hpmc(features("--split test --format libsvm" + out)).code, 0);
  const std::string svm = t.file("f/features_test.libsvm");
  std::ofstream(svm, std::ios::app) << "mark";
  const std::string before = slurp(svm);
  auto r = run_hpmc(features("--split test --format libsvm" + out));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "hpmc: error: " + svm + " already exists; replace it with --overwrite, or write "
                   "elsewhere with --out\n");
  // --format all names only the file that is there.
  r = run_hpmc(features("--split all --format all" + out));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "hpmc: error: " + svm + " already exists; replace it with --overwrite, or write "
                   "elsewhere with --out\n");
  EXPECT_FALSE(fs::exists(t.file("f/features_train.csv")));
  EXPECT_EQ(slurp(svm), before);
  r = run_hpmc(features("--split test --format all --overwrite" + out));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(svm), before);
  for (const char* f : {"features_test.csv", "features_test.npy", "labels_test.npy"})
    EXPECT_TRUE(fs::exists(t.file("f/") + f)) << f;
  // Unknown formats are refused by name.
  r = run_hpmc(features("--format parquet" + out));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--format: parquet not in {csv,npy,libsvm,both,all}"), std::string::npos)
      << r.err;
}

// A write that fails (here a file-size limit, which fails writes with EFBIG
// as a full disk fails them with ENOSPC) in the writer's own thread stops
// the export with one line; neither the file nor its temporary is left.
TEST(Features, AFailedWriteStopsTheExportAndLeavesNothing) {
  testing::TempDir t;
  fs::create_directories(t.file("f"));
  auto r = testing::run_hpmc_via("trap '' XFSZ; ulimit -f 64; HPMC_FEATURES_CHUNK_ROWS=4",
                                 features("--split test --format csv --out " + t.file("f")) +
                                     " --progress quiet");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("hpmc: error: cannot write " + t.file("f/features_test.csv") + ": File too "
                        "large; the previous file (if any) is unchanged\n", 0), 0u) << r.err;
  EXPECT_TRUE(fs::is_empty(t.file("f")));
}

// Off a terminal there is no bar unless asked for; --progress bar draws one.
TEST(Features, ProgressOnlyWhenAskedOffATerminal) {
  testing::TempDir t;
  auto r = run_hpmc(features("--split test --format npy --batch 4 --out " + t.file("a")));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ETA"), std::string::npos) << r.out;
  r = run_hpmc(features("--split test --format npy --batch 4 --progress bar --out " + t.file("b")));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\r  features test ["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("23/23 ETA 0:00"), std::string::npos) << r.out;
}

// Without a usable GPU (CI), auto picks the CPU and says why; `run` takes
// auto too. test_gpu_features.cpp has the GPU side.
TEST(Features, ImplAutoIsTheCpuWithoutAGpu) {
  if (gpu::compiled_with_cuda() && gpu::device_count() > 0)
    GTEST_SKIP() << "a CUDA device is present, so auto picks the GPU (test_gpu_features.cpp)";
  testing::TempDir t;
  auto r = run_hpmc("features " + kQuick + "--weights " + checkpoint() +
                    " --split test --format npy --out " + t.file("a"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("impl auto: cpu (", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(", impl cpu, "), std::string::npos) << r.out;
  for (const std::string cmd : {"eval " + kQuick, "recon " + kQuick + "--out " + t.file("rc") + " "}) {
    r = run_hpmc(cmd + "--weights " + checkpoint());
    ASSERT_EQ(r.code, 0) << cmd << r.err;
    EXPECT_EQ(r.out.rfind("impl auto: cpu (", 0), 0u) << cmd << r.out;
  }
  r = run_hpmc("run " + kQuick + "--epochs 1 --impl auto --progress quiet --out " + t.file("r") +
               " --weights-dir " + t.file("w"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("impl auto: cpu (", 0), 0u) << r.out;
  // run keeps its default: the CPU, said nothing about.
  r = run_hpmc("run " + kQuick + "--epochs 1 --progress quiet --out " + t.file("r2") +
               " --weights-dir " + t.file("w2"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("impl auto"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", impl cpu, "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hpmc
