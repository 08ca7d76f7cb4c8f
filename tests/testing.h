// testing.h — small helpers shared by the tests: random tensors, error
// metrics and scratch directories.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/precision.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace hpmc::testing {

// Where the sources and the hpmc binary are: fixed at build time, and
// overridable (HPMC_TEST_SOURCE_DIR, HPMC_TEST_BINARY) so the same test
// binary can run from a copy of the tree on another machine.
inline std::string source_dir() {
  const char* e = std::getenv("HPMC_TEST_SOURCE_DIR");
  return e && *e ? e : HPMC_SOURCE_DIR;
}
inline std::string hpmc_binary() {
  const char* e = std::getenv("HPMC_TEST_BINARY");
  return e && *e ? e : HPMC_BINARY;
}
// Fashion-MNIST: the Debian package's directory, or HPMC_TEST_FASHION_DIR
// (scripts/gpu-check points it at the slice its bundle carries).
inline std::string fashion_dir() {
  const char* e = std::getenv("HPMC_TEST_FASHION_DIR");
  return e && *e ? e : "/usr/share/datasets/fashion-mnist";
}

// The real MNIST test digits (t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte, raw or .gz) for the tests that use them. They are
// looked for in $HPMC_MNIST_DIR when it is set (and only there), else in the
// README's data/mnist in the source tree, else in ../shared/data/mnist beside
// the source tree (where the CI machine keeps its data). `images` is empty
// when none holds them; `looked` then lists where the test looked.
struct MnistTestFiles {
  std::string images, labels, looked;
};
inline MnistTestFiles mnist_test_files() {
  namespace fs = std::filesystem;
  std::vector<std::string> dirs;
  const char* e = std::getenv("HPMC_MNIST_DIR");
  if (e && *e)
    dirs = {e};
  else
    dirs = {source_dir() + "/data/mnist", source_dir() + "/../shared/data/mnist"};
  auto pick = [](const std::string& d, const std::string& name) {
    for (const std::string& p : {d + "/" + name, d + "/" + name + ".gz"})
      if (fs::is_regular_file(p)) return p;
    return std::string();
  };
  MnistTestFiles f;
  for (const auto& d : dirs) {
    std::string images = pick(d, "t10k-images-idx3-ubyte");
    std::string labels = pick(d, "t10k-labels-idx1-ubyte");
    if (!images.empty() && !labels.empty()) return {images, labels, ""};
    f.looked += (f.looked.empty() ? "" : " or ") + d;
  }
  f.looked = "no MNIST t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz] in " +
             f.looked + (e && *e ? " (HPMC_MNIST_DIR)" : "; put them in data/mnist or set "
                                                        "HPMC_MNIST_DIR to their directory");
  return f;
}

// The Debian python3 (which has numpy when python3-numpy is installed), or
// "" when no python3 with numpy is found.
inline std::string python_with_numpy() {
  for (const char* py : {"/usr/bin/python3", "python3"}) {
    std::string cmd = std::string(py) + " -c 'import numpy' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

// Fill a float32 CPU tensor with U(lo, hi) drawn from `rng`.
inline void fill_uniform(Tensor& t, Rng& rng, float lo = -1.f, float hi = 1.f) {
  float* p = t.data<float>();
  for (size_t i = 0; i < t.numel(); ++i) p[i] = rng.uniform(lo, hi);
}

inline Tensor random_tensor(const Shape& s, Rng& rng, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::empty(s);
  fill_uniform(t, rng, lo, hi);
  return t;
}

// max |a-b| / max(|a|, |b|, 1) over two equally long arrays.
template <typename A, typename B>
double max_rel_error(const A* a, const B* b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    double x = double(a[i]), y = double(b[i]);
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    double d = std::fabs(x - y) / std::max({std::fabs(x), std::fabs(y), 1.0});
    worst = std::max(worst, d);
  }
  return worst;
}

// A fresh, empty directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hpmc-test-XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    char* p = mkdtemp(buf.data());
    if (!p) throw std::runtime_error("mkdtemp failed");
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// x rounded to tf32 as the GPU's cvt.rna.tf32.f32 does it: 13 mantissa bits
// dropped, to nearest with ties away from zero; infinities and NaNs as they are.
inline float round_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & ~0x1fffu;
  std::memcpy(&x, &u, sizeof u);
  return x;
}

// x as a product operand of training.precision p reads it: itself in fp32,
// rounded to tf32 or (to nearest even, core/bf16.h) to bf16.
inline float round_operand(Precision p, float x) {
  switch (p) {
    case Precision::kTf32: return round_tf32(x);
    case Precision::kBf16: return round_bf16(x);
    case Precision::kFp32: break;
  }
  return x;
}

}  // namespace hpmc::testing

namespace hpmc::testing {

// Central finite differences of a scalar function L at `x`, in double:
// g[j] = (L(x + eps·e_j) - L(x - eps·e_j)) / (2·eps).
template <typename F>
std::vector<double> numerical_gradient(F&& L, std::vector<double> x, double eps = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    double keep = x[j];
    x[j] = keep + eps;
    double lp = L(x);
    x[j] = keep - eps;
    double lm = L(x);
    x[j] = keep;
    g[j] = (lp - lm) / (2 * eps);
  }
  return g;
}

// Every analytic gradient entry within `tol` of the numeric one, relative to
// max(|a|, |n|, 1); entries with skip[j] set (kinks) are not compared.
inline void expect_gradients_close(const std::vector<double>& analytic,
                                   const std::vector<double>& numeric, double tol,
                                   const std::string& what,
                                   const std::vector<bool>& skip = {}) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  size_t compared = 0;
  for (size_t j = 0; j < analytic.size(); ++j) {
    if (!skip.empty() && skip[j]) continue;
    ++compared;
    double a = analytic[j], n = numeric[j];
    double scale = std::max({std::fabs(a), std::fabs(n), 1.0});
    EXPECT_LE(std::fabs(a - n) / scale, tol)
        << what << "[" << j << "]: analytic " << a << " vs numeric " << n;
  }
  EXPECT_GT(compared, 0u) << what << ": every entry was skipped";
}

// How many floats lie between a and b (0 when equal, +0 and −0 included; 1
// for neighbours; across zero the subnormals count), or INT64_MAX when one is
// NaN and the other not. Two NaNs are 0 apart.
inline int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? int64_t(std::numeric_limits<int32_t>::min()) - int64_t(i) : int64_t(i);
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

// A vector of n doubles drawn from U(lo, hi).
inline std::vector<double> random_vector(size_t n, Rng& rng, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  for (auto& x : v) x = lo + (hi - lo) * double(rng.uniform01());
  return v;
}

// ‖a − ref‖∞ / max(‖ref‖∞, 1e-30): a GPU result against a double reference;
// infinity if a holds a NaN (an element never written) or the sizes differ.
inline double rel_inf_error(const std::vector<float>& a, const std::vector<double>& ref) {
  if (a.size() != ref.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return INFINITY;
    diff = std::max(diff, std::fabs(double(a[i]) - ref[i]));
    norm = std::max(norm, std::fabs(ref[i]));
  }
  return diff / std::max(norm, 1e-30);
}

// Runs fn, which must throw a DataError (exit code 4) whose message is one
// line holding every needle; returns the message ("" after a failure).
template <typename F>
std::string expect_data_error(F&& fn, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const DataError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.code(), ExitCode::kData);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "message lacks \"" << n << "\": " << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a DataError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a DataError, nothing was thrown";
  return "";
}

// Sets (value) or unsets (nullptr) an environment variable for one scope,
// then restores what was there.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvScope() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  std::string name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace hpmc::testing
