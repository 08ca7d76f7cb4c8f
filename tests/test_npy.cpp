// .npy export: the header byte for byte, round trips, the streaming writer,
// failure paths that must leave no file, and (where numpy is installed) the
// real numpy.load.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "fifo_testing.h"
#include "io/npy.h"
#include "testing.h"

namespace hpmc {
namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

size_t files_in(const std::filesystem::path& d) {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator(d)) (void)e, ++n;
  return n;
}

std::vector<float> floats(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.5f * float(i) - 3.25f;
  return v;
}

TEST(Npy, HeaderFormat) {
  std::string h = npy_header(NpyDtype::kFloat32, {2, 3});
  EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t len = static_cast<unsigned char>(h[8]) | size_t(static_cast<unsigned char>(h[9])) << 8;
  EXPECT_EQ(len + 10, h.size());
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.back(), '\n');
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(h.substr(10, dict.size()), dict);
  EXPECT_EQ(h.find_first_not_of(' ', 10 + dict.size()), h.size() - 1) << "padding is spaces";

  EXPECT_NE(npy_header(NpyDtype::kInt32, {5}).find("'descr': '<i4'"), std::string::npos);
  EXPECT_NE(npy_header(NpyDtype::kInt32, {5}).find("'shape': (5,), }"), std::string::npos);
  EXPECT_NE(npy_header(NpyDtype::kFloat32, {}).find("'shape': (), }"), std::string::npos);
  for (size_t dims = 0; dims < 12; ++dims) {  // headers of many lengths
    std::vector<int64_t> shape(dims, 1);
    if (dims) shape[0] = int64_t(std::pow(10, dims));
    EXPECT_EQ(npy_header(NpyDtype::kFloat32, shape).size() % 64, 0u) << dims << " dimensions";
  }
  EXPECT_THROW(npy_header(NpyDtype::kFloat32, {2, -1}), RuntimeError);
}

TEST(Npy, RoundTripBothDtypes) {
  testing::TempDir t;
  std::vector<float> f = floats(24);
  write_npy(t.file("f.npy"), f.data(), {2, 3, 4});
  NpyArray a = read_npy(t.file("f.npy"));
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_FALSE(a.fortran_order);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(a.numel(), 24);
  ASSERT_EQ(a.data.size(), 24 * sizeof(float));
  EXPECT_EQ(std::memcmp(a.data.data(), f.data(), a.data.size()), 0);

  std::vector<int32_t> labels = {3, -1, 0, 2147483647, -2147483647 - 1};
  write_npy(t.file("i.npy"), labels.data(), {5});
  NpyArray b = read_npy(t.file("i.npy"));
  EXPECT_EQ(b.descr, "<i4");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{5}));
  ASSERT_EQ(b.data.size(), 20u);
  EXPECT_EQ(std::memcmp(b.data.data(), labels.data(), 20), 0);

  write_npy(t.file("empty.npy"), static_cast<const float*>(nullptr), {0, 7});
  EXPECT_EQ(read_npy(t.file("empty.npy")).numel(), 0);
  float scalar = 2.5f;
  write_npy(t.file("scalar.npy"), &scalar, {});
  EXPECT_EQ(read_npy(t.file("scalar.npy")).data.size(), 4u);
}

TEST(Npy, StreamingMatchesOneShot) {
  testing::TempDir t;
  std::vector<float> f = floats(1000);
  write_npy(t.file("once.npy"), f.data(), {100, 10});
  {
    NpyWriter w(t.file("stream.npy"), NpyDtype::kFloat32, {100, 10});
    for (size_t at = 0; at < f.size(); at += 170)
      w.append(f.data() + at, std::min<size_t>(170, f.size() - at));
    EXPECT_EQ(w.written(), 1000);
    EXPECT_EQ(w.expected(), 1000);
    EXPECT_FALSE(std::filesystem::exists(t.file("stream.npy"))) << "visible before commit()";
    w.commit();
    EXPECT_THROW(w.append(f.data(), 1), RuntimeError);
  }
  EXPECT_EQ(slurp(t.file("stream.npy")), slurp(t.file("once.npy")));

  std::vector<int32_t> ids = {4, 5, 6, 7};
  write_npy(t.file("ids_once.npy"), ids.data(), {2, 2});
  NpyWriter w(t.file("ids_stream.npy"), NpyDtype::kInt32, {2, 2});
  w.append(ids.data(), 1);
  w.append(ids.data() + 1, 0);
  w.append(ids.data() + 1, 3);
  w.commit();
  EXPECT_EQ(slurp(t.file("ids_stream.npy")), slurp(t.file("ids_once.npy")));
  EXPECT_EQ(files_in(t.path()), 4u);
}

TEST(Npy, WrongCountThrowsAndLeavesNoFile) {
  testing::TempDir t;
  std::vector<float> f = floats(10);
  {  // too few at commit()
    NpyWriter w(t.file("a.npy"), NpyDtype::kFloat32, {10});
    w.append(f.data(), 9);
    EXPECT_THROW(w.commit(), RuntimeError);
    EXPECT_EQ(files_in(t.path()), 0u) << "the temporary file must go at once";
    EXPECT_THROW(w.commit(), RuntimeError);
  }
  {  // too many in append()
    NpyWriter w(t.file("a.npy"), NpyDtype::kFloat32, {10});
    w.append(f.data(), 6);
    EXPECT_THROW(w.append(f.data(), 5), RuntimeError);
    EXPECT_EQ(files_in(t.path()), 0u);
    EXPECT_THROW(w.append(f.data(), 4), RuntimeError) << "an abandoned writer stays abandoned";
  }
  {  // the wrong dtype
    NpyWriter w(t.file("a.npy"), NpyDtype::kInt32, {10});
    EXPECT_THROW(w.append(f.data(), 10), RuntimeError);
    EXPECT_EQ(files_in(t.path()), 0u);
  }
  // A previous file survives a failed rewrite untouched.
  write_npy(t.file("a.npy"), f.data(), {10});
  std::string good = slurp(t.file("a.npy"));
  {
    NpyWriter w(t.file("a.npy"), NpyDtype::kFloat32, {10});
    w.append(f.data(), 3);
    EXPECT_THROW(w.commit(), RuntimeError);
  }
  {
    NpyWriter w(t.file("a.npy"), NpyDtype::kFloat32, {10});
    w.append(f.data(), 3);
  }  // never committed
  EXPECT_EQ(slurp(t.file("a.npy")), good);
  EXPECT_EQ(files_in(t.path()), 1u);
  EXPECT_THROW(NpyWriter(t.file("b.npy"), NpyDtype::kFloat32, {-1}), RuntimeError);
  EXPECT_THROW(NpyWriter(t.file("no/such/dir.npy"), NpyDtype::kFloat32, {1}), RuntimeError);
  EXPECT_EQ(files_in(t.path()), 1u);
}

TEST(Npy, ReaderRejectsMalformedFiles) {
  testing::TempDir t;
  std::vector<float> f = floats(6);
  write_npy(t.file("good.npy"), f.data(), {2, 3});
  const std::string good = slurp(t.file("good.npy"));
  auto rejects = [&](const std::string& bytes, const std::string& why) {
    spit(t.file("bad.npy"), bytes);
    EXPECT_THROW(read_npy(t.file("bad.npy")), DataError) << why;
  };
  EXPECT_THROW(read_npy(t.file("missing.npy")), DataError);
  rejects("", "empty");
  rejects("PK\x03\x04 not numpy at all", "bad magic");
  rejects(good.substr(0, 40), "truncated header");
  rejects(good.substr(0, good.size() - 1), "truncated data");
  rejects(good + "x", "trailing bytes");
  std::string b = good;
  b[6] = 9;
  rejects(b, "unknown version");
  b = good;
  b.replace(b.find("(2, 3)"), 6, "(2, x)");
  rejects(b, "bad shape");
  b = good;
  b.replace(b.find("False"), 5, "Maybe");
  rejects(b, "bad fortran_order");
  b = good;
  b.replace(b.find("'descr'"), 7, "'dtype'");
  rejects(b, "unknown key");
  b = good;
  b.replace(b.find("<f4"), 3, "<f8");
  rejects(b, "size mismatch for f8");
  EXPECT_NO_THROW(read_npy(t.file("good.npy")));
}

// A FIFO used to block the reader; a directory is named for what it is.
TEST(Npy, ReaderRefusesWhatIsNotARegularFile) {
  testing::TempDir t;
  testing::make_fifo(t.file("pipe.npy"));
  std::string e = testing::returns_without_blocking(t.file("pipe.npy"), [&] {
    try {
      read_npy(t.file("pipe.npy"));
    } catch (const DataError& err) {
      return std::string(err.what());
    }
    return std::string("(no error)");
  });
  EXPECT_EQ(e, "cannot open " + t.file("pipe.npy") + ": it is a FIFO, not a regular file");
  try {
    read_npy(t.path().string());
    ADD_FAILURE() << "no error";
  } catch (const DataError& err) {
    EXPECT_NE(std::string(err.what()).find("is a directory, not a regular file"),
              std::string::npos) << err.what();
  }
}

// Header text echoed in an error is escaped: a key or dtype holding a line
// break (found by fuzz_npy) still gives one line.
TEST(Npy, ReaderErrorsStayOneLine) {
  testing::TempDir t;
  std::vector<float> f = floats(6);
  write_npy(t.file("good.npy"), f.data(), {2, 3});
  const std::string good = slurp(t.file("good.npy"));
  auto message = [&](const std::string& bytes) {
    spit(t.file("bad.npy"), bytes);
    try {
      read_npy(t.file("bad.npy"));
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string b = good;
  b.replace(b.find("'descr'"), 7, "'de\ns\x01'");
  std::string e = message(b);
  EXPECT_NE(e.find("unexpected header key 'de\\x0as\\x01'"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  b = good;
  b.replace(b.find("<f4"), 3, "<f\n4");
  e = message(b);
  EXPECT_NE(e.find("unsupported dtype '<f\\x0a4'"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

bool have_numpy() { return !testing::python_with_numpy().empty(); }

TEST(Npy, NumpyLoadsBothDtypes) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy is not installed; numpy.load not tried";
  testing::TempDir t;
  std::vector<float> f = floats(24);
  write_npy(t.file("f.npy"), f.data(), {2, 3, 4});
  NpyWriter w(t.file("i.npy"), NpyDtype::kInt32, {5});
  std::vector<int32_t> labels = {3, -1, 0, 2147483647, -2147483647 - 1};
  w.append(labels.data(), 5);
  w.commit();
  spit(t.file("check.py"),
       "import sys, numpy as np\n"
       "f = np.load(sys.argv[1]); i = np.load(sys.argv[2])\n"
       "assert f.dtype == np.float32 and f.shape == (2, 3, 4), (f.dtype, f.shape)\n"
       "assert (f.ravel() == np.arange(24, dtype=np.float32) * 0.5 - 3.25).all(), f\n"
       "assert i.dtype == np.int32 and i.shape == (5,), (i.dtype, i.shape)\n"
       "assert i.tolist() == [3, -1, 0, 2**31 - 1, -2**31], i\n");
  std::string cmd = testing::python_with_numpy() + " " + t.file("check.py") + " " + t.file("f.npy") + " " + t.file("i.npy");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace hpmc
