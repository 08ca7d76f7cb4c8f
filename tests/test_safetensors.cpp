// safetensors checkpoints: bit-exact round trips, agreement with an
// independent Python reader and writer, a one-line DataError for every kind
// of corrupt file, and crash-safe writes.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/rng.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "testing.h"

namespace hpmc {
namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A plain, fast overwrite for tests that rewrite a file thousands of times
// (AtomicFile's fsyncs would dominate their run time).
void overwrite(const std::string& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

size_t files_in(const std::filesystem::path& d) {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator(d)) (void)e, ++n;
  return n;
}

template <typename T>
SafetensorsEntry entry(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                       const std::vector<T>& v) {
  return {name, dtype, std::move(shape), v.data(), v.size() * sizeof(T)};
}

uint64_t header_length(const std::string& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[i]);
  return n;
}

// A file made by hand: the length prefix, `header` verbatim, then `data`.
std::string raw_file(const std::string& header, const std::string& data, uint64_t claimed_length) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(claimed_length >> (8 * i));
  return s + header + data;
}
std::string raw_file(const std::string& header, const std::string& data) {
  return raw_file(header, data, header.size());
}

// The DataError that reading `path` gives, checked to be one line naming the
// file and containing each of `needles`.
std::string expect_data_error(const std::string& path, std::initializer_list<std::string> needles) {
  try {
    SafetensorsFile::read(path);
  } catch (const DataError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.code(), ExitCode::kData);
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "the message should start with the file: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "no '" << n << "' in: " << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a DataError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << path << " was read without error";
  return "";
}

// Writes the raw bytes to `name` in `dir` and expects a DataError.
std::string expect_corrupt(const testing::TempDir& dir, const std::string& bytes,
                           std::initializer_list<std::string> needles) {
  std::string path = dir.file("corrupt.safetensors");
  write_file_atomic(path, bytes);
  return expect_data_error(path, needles);
}

// A valid two-tensor header and its 12 data bytes, the base for corruptions.
const char* const kGoodHeader =
    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})";
const std::string kGoodData = "0123456789ab";

std::string tensor_json(const std::string& name, const std::string& dtype, const std::string& shape,
                        const std::string& offsets) {
  return str("\"", name, "\":{\"dtype\":\"", dtype, "\",\"shape\":", shape, ",\"data_offsets\":", offsets, "}");
}

// ---- round trips -------------------------------------------------------------

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Safetensors, RoundTripIsBitExact) {
  testing::TempDir dir;
  // F32 bit patterns that a float copy could alter: NaNs with payloads and
  // sign, signalling NaN, infinities, denormals, -0.
  std::vector<uint32_t> f32 = {0x7fc00000, 0x7fa12345, 0xffc00001, 0x7f800001, 0x7f800000, 0xff800000,
                               0x00000001, 0x007fffff, 0x80000001, 0x80000000, f32_bits(1.f),
                               f32_bits(std::numeric_limits<float>::max())};
  std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), -1, 0,
                              42, int64_t(1) << 40};
  std::vector<uint8_t> u8(256);
  for (int i = 0; i < 256; ++i) u8[i] = static_cast<uint8_t>(255 - i);
  std::vector<double> scalar = {0.1};
  std::vector<float> none;
  std::map<std::string, std::string> meta = {
      {"quote", "say \"hi\""},
      {"backslash", "C:\\path\\to\\"},
      {"unicode", "h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9F\x98\x80"},
      {"control", "line1\nline2\ttab\x01\x1f end"},
      {"empty", ""},
      {"key with \"quotes\" and \xC3\xA9", "v"}};
  std::string path = dir.file("ckpt.safetensors");
  write_safetensors(path,
                    {entry("weights", "F32", {3, 4}, f32), entry("steps", "I64", {2, 3}, i64),
                     entry("bytes", "U8", {256}, u8), entry("scalar", "F64", {}, scalar),
                     entry("none", "F32", {0, 4}, none)},
                    meta);

  SafetensorsFile f = SafetensorsFile::read(path);
  EXPECT_EQ(f.metadata(), meta);
  ASSERT_EQ(f.tensors().size(), 5u);
  const SafetensorsTensor* w = f.find("weights");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, "F32");
  EXPECT_EQ(w->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(std::memcmp(f.data(*w), f32.data(), f32.size() * 4), 0);

  std::vector<uint32_t> f32_back(f32.size());
  f.copy_to("weights", "F32", {3, 4}, f32_back.data());
  EXPECT_EQ(f32_back, f32);
  std::vector<int64_t> i64_back(i64.size());
  f.copy_to("steps", "I64", {2, 3}, i64_back.data());
  EXPECT_EQ(i64_back, i64);
  std::vector<uint8_t> u8_back(256);
  f.copy_to("bytes", "U8", {256}, u8_back.data());
  EXPECT_EQ(u8_back, u8);
  double s = 0;
  f.copy_to("scalar", "F64", {}, &s);
  EXPECT_EQ(s, 0.1);
  EXPECT_EQ(f.find("scalar")->shape.size(), 0u);
  EXPECT_EQ(f.find("none")->begin, f.find("none")->end);
  f.copy_to("none", "F32", {0, 4}, nullptr);
}

TEST(Safetensors, TensorOrderIsPreserved) {
  testing::TempDir dir;
  std::vector<float> a(3, 1.f), b(5, 2.f), c(1, 3.f);
  std::string path = dir.file("order.safetensors");
  write_safetensors(path, {entry("zeta", "F32", {3}, a), entry("alpha", "F32", {5}, b), entry("mid", "F32", {1}, c)},
                    {});
  SafetensorsFile f = SafetensorsFile::read(path);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[0].name, "zeta");
  EXPECT_EQ(f.tensors()[1].name, "alpha");
  EXPECT_EQ(f.tensors()[2].name, "mid");
  EXPECT_EQ(f.tensors()[0].begin, 0u);
  EXPECT_EQ(f.tensors()[1].begin, 12u);
  EXPECT_EQ(f.tensors()[2].begin, 32u);
  // The header's key order is the given order too, for readers that list it.
  std::string text = slurp(path);
  EXPECT_LT(text.find("\"zeta\""), text.find("\"alpha\""));
  EXPECT_LT(text.find("\"alpha\""), text.find("\"mid\""));
  EXPECT_EQ(text.find("__metadata__"), std::string::npos) << "no metadata, no key";
}

TEST(Safetensors, HeaderPaddingAlignsTheData) {
  testing::TempDir dir;
  std::vector<double> v = {1.5, -2.5};
  for (size_t len = 1; len <= 17; ++len) {
    std::string path = dir.file("pad.safetensors");
    write_safetensors(path, {entry(std::string(len, 'n'), "F64", {2}, v)}, {{"k", std::string(len % 5, 'v')}});
    std::string text = slurp(path);
    uint64_t n = header_length(text);
    EXPECT_EQ((8 + n) % 8, 0u) << "name length " << len;
    EXPECT_EQ(text.size(), 8 + n + 16);
    std::string header = text.substr(8, n);
    size_t close = header.rfind('}');
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << "padding must be spaces";
    EXPECT_LT(header.size() - close - 1, 8u) << "no more padding than needed";
    EXPECT_EQ(std::memcmp(text.data() + 8 + n, v.data(), 16), 0);
    SafetensorsFile f = SafetensorsFile::read(path);
    EXPECT_EQ(f.tensors().at(0).name, std::string(len, 'n'));
  }
}

TEST(Safetensors, EmptyCheckpoint) {
  testing::TempDir dir;
  std::string path = dir.file("empty.safetensors");
  write_safetensors(path, {}, {});
  EXPECT_EQ(slurp(path).size(), 16u);  // 8 + "{}" padded to 8
  SafetensorsFile f = SafetensorsFile::read(path);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_TRUE(f.metadata().empty());
}

TEST(Safetensors, CopyToChecksNameDtypeAndCount) {
  testing::TempDir dir;
  std::string path = dir.file("c.safetensors");
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  write_safetensors(path, {entry("layer.w", "F32", {2, 3}, v)}, {});
  SafetensorsFile f = SafetensorsFile::read(path);
  EXPECT_EQ(f.find("nope"), nullptr);
  std::vector<float> out(6);
  f.copy_to("layer.w", "F32", {6}, out.data());  // same count, other shape: allowed
  EXPECT_EQ(out, v);

  auto message = [&](const std::string& name, const std::string& dtype, std::vector<int64_t> shape) {
    try {
      f.copy_to(name, dtype, shape, out.data());
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error for " << name << " " << dtype;
    return std::string();
  };
  std::string m = message("layer.w", "F64", {2, 3});
  for (const char* n : {path.c_str(), "\"layer.w\"", "expected F64 [2, 3]", "found F32 [2, 3]"})
    EXPECT_NE(m.find(n), std::string::npos) << m;
  m = message("layer.w", "F32", {3, 3});
  for (const char* n : {"expected F32 [3, 3] (9 elements)", "found F32 [2, 3] (6 elements)"})
    EXPECT_NE(m.find(n), std::string::npos) << m;
  m = message("layer.b", "F32", {3});
  EXPECT_NE(m.find("no tensor \"layer.b\""), std::string::npos) << m;
  EXPECT_EQ(out, v) << "a failed copy must not write";
}

TEST(Safetensors, WriterRefusesInconsistentEntries) {
  testing::TempDir dir;
  std::string path = dir.file("w.safetensors");
  std::vector<float> v(6);
  auto refuses = [&](std::vector<SafetensorsEntry> e, std::map<std::string, std::string> meta = {}) {
    EXPECT_THROW(write_safetensors(path, e, meta), RuntimeError);
    EXPECT_FALSE(std::filesystem::exists(path));
  };
  refuses({entry("w", "F33", {6}, v)});
  refuses({entry("w", "F32", {7}, v)});
  refuses({entry("w", "F64", {6}, v)});
  refuses({entry("w", "F32", {-6}, v)});
  refuses({entry("w", "F32", {6}, v), entry("w", "F32", {6}, v)});
  refuses({entry("__metadata__", "F32", {6}, v)});
  refuses({entry("bad\xFF", "F32", {6}, v)});
  refuses({entry("w", "F32", {6}, v)}, {{"k", "\xC0\xAF"}});
  refuses({{"w", "F32", {6}, nullptr, 24}});
  EXPECT_EQ(files_in(dir.path()), 0u);
}

TEST(Safetensors, DtypeSizes) {
  EXPECT_EQ(safetensors_dtype_size("F64"), 8u);
  EXPECT_EQ(safetensors_dtype_size("F32"), 4u);
  EXPECT_EQ(safetensors_dtype_size("F16"), 2u);
  EXPECT_EQ(safetensors_dtype_size("BF16"), 2u);
  EXPECT_EQ(safetensors_dtype_size("I64"), 8u);
  EXPECT_EQ(safetensors_dtype_size("I32"), 4u);
  EXPECT_EQ(safetensors_dtype_size("I16"), 2u);
  EXPECT_EQ(safetensors_dtype_size("I8"), 1u);
  EXPECT_EQ(safetensors_dtype_size("U8"), 1u);
  EXPECT_EQ(safetensors_dtype_size("BOOL"), 1u);
  EXPECT_EQ(safetensors_dtype_size("F8_E4M3"), 1u);
  EXPECT_EQ(safetensors_dtype_size("F33"), 0u);
  EXPECT_EQ(safetensors_dtype_size("f32"), 0u);
  EXPECT_EQ(safetensors_dtype_size(""), 0u);
}

// ---- an independent reader and writer: Python's json and struct ------------

// stdout of `cmd`, and its exit status through *status.
std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

// numpy.frombuffer when numpy is installed, else struct.unpack: either way a
// parse that shares nothing with hpmc's.
const char* const kPythonReader = R"PY(
import json, struct, sys
try:
    import numpy as np
except ImportError:
    np = None
FMT = {"F64": "d", "F32": "f", "I64": "q", "I32": "i", "U8": "B"}
NP = {"F64": "<f8", "F32": "<f4", "I64": "<i8", "I32": "<i4", "U8": "u1"}
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
text = raw[8:8 + n].decode("utf-8")
header = json.loads(text)
data = raw[8 + n:]
print("reader", "numpy" if np else "struct")
print("aligned", (8 + n) % 8 == 0, "padding", text.rstrip(" ").endswith("}"))
for k, v in sorted(header.pop("__metadata__", {}).items()):
    print("meta", k.encode().hex(), v.encode().hex())
for name, t in header.items():
    b, e = t["data_offsets"]
    count = 1
    for d in t["shape"]:
        count *= d
    if np is not None:
        values = np.frombuffer(data[b:e], dtype=NP[t["dtype"]]).reshape(t["shape"]).ravel().tolist()
    else:
        values = list(struct.unpack("<%d%s" % (count, FMT[t["dtype"]]), data[b:e]))
    total = sum(values) if t["dtype"][0] in "IU" else "%.17g" % sum(float(v) for v in values)
    print("tensor", name, t["dtype"], t["shape"], b, e, total)
print("data", len(data))
)PY";

// Python writes with json.dumps: its own key order (not the data order),
// ", " and ": " separators, \uXXXX escapes with surrogate pairs, no padding.
const char* const kPythonWriter = R"PY(
import json, struct, sys
tensors = [  # in data order
    ("conv.weight", "F32", [2, 3], "<6f", [0.5, -1.25, 3.0, 1024.0, -0.0, 6.5]),
    ("steps", "I64", [3], "<3q", [-9223372036854775808, 9223372036854775807, 42]),
    ("pixels", "U8", [2, 2], "<4B", [0, 127, 128, 255]),
    ("scale", "F64", [], "<d", [0.1]),
    ("none", "F32", [0, 3], "<0f", []),
]
entries, blobs, offset = {}, [], 0
for name, dtype, shape, fmt, values in tensors:
    blob = struct.pack(fmt, *values)
    entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
    blobs.append(blob)
    offset += len(blob)
header = {"pixels": entries["pixels"],
          "__metadata__": {"format": "pt", "note": "caf\u00e9 \U0001F600 \"quoted\" back\\slash\nnewline"}}
for name in ["none", "steps", "scale", "conv.weight"]:
    header[name] = entries[name]
text = json.dumps(header).encode("utf-8")
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
)PY";

// Prefer the system python3 (with numpy when python3-numpy is installed).
std::string python() {
  std::string py = testing::python_with_numpy();
  return py.empty() ? "python3" : py;
}
bool have_python() { return std::system((python() + " -c 'import json, struct' >/dev/null 2>&1").c_str()) == 0; }

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) h += {digits[c >> 4], digits[c & 15]};
  return h;
}

std::string g17(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

TEST(SafetensorsPython, PythonReadsWhatHpmcWrites) {
  if (!have_python()) GTEST_SKIP() << "python3 is not installed; the independent reader cannot run";
  testing::TempDir dir;
  std::vector<float> w = {0.25f, -1.5f, 3.f, 1e-3f, -7.75f, 2.f};
  std::vector<int64_t> steps = {-5, 1000000000000, 7};
  std::vector<uint8_t> px = {1, 2, 250, 255, 0};
  std::vector<double> scale = {0.1};
  std::map<std::string, std::string> meta = {{"config", "{\"lr\": 0.01}\n"}, {"\xC3\xA9t\xC3\xA9", "\xF0\x9F\x98\x80\\"}};
  std::string path = dir.file("hpmc.safetensors");
  write_safetensors(path,
                    {entry("enc.w", "F32", {2, 3}, w), entry("step", "I64", {3}, steps),
                     entry("px", "U8", {5}, px), entry("scale", "F64", {}, scale)},
                    meta);
  std::string script = dir.file("reader.py");
  write_file_atomic(script, std::string(kPythonReader));
  int status = 0;
  std::string out = run(python() + " " + script + " " + path + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  RecordProperty("python_reader", out.substr(0, out.find('\n')));

  double wsum = 0;
  for (float x : w) wsum += double(x);
  std::string expected = "aligned True padding True\n";
  for (const auto& [k, v] : meta) expected += "meta " + hex(k) + " " + hex(v) + "\n";
  expected += "tensor enc.w F32 [2, 3] 0 24 " + g17(wsum) + "\n";
  expected += "tensor step I64 [3] 24 48 " + std::to_string(-5 + 1000000000000 + 7) + "\n";
  expected += "tensor px U8 [5] 48 53 508\n";
  expected += "tensor scale F64 [] 53 61 0.10000000000000001\n";
  expected += "data 61\n";
  EXPECT_EQ(out.substr(out.find('\n') + 1), expected);
}

TEST(SafetensorsPython, HpmcReadsWhatPythonWrites) {
  if (!have_python()) GTEST_SKIP() << "python3 is not installed; the independent writer cannot run";
  testing::TempDir dir;
  std::string path = dir.file("py.safetensors"), script = dir.file("writer.py");
  write_file_atomic(script, std::string(kPythonWriter));
  int status = 0;
  std::string out = run(python() + " " + script + " " + path + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;

  SafetensorsFile f = SafetensorsFile::read(path);
  std::vector<std::string> names;
  for (const auto& t : f.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv.weight", "steps", "pixels", "scale", "none"}))
      << "tensors() is in data-offset order, not header order";
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "caf\xC3\xA9 \xF0\x9F\x98\x80 \"quoted\" back\\slash\nnewline");

  std::vector<float> w(6);
  f.copy_to("conv.weight", "F32", {2, 3}, w.data());
  EXPECT_EQ(w, (std::vector<float>{0.5f, -1.25f, 3.f, 1024.f, -0.f, 6.5f}));
  EXPECT_TRUE(std::signbit(w[4]));
  std::vector<int64_t> steps(3);
  f.copy_to("steps", "I64", {3}, steps.data());
  EXPECT_EQ(steps, (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 42}));
  std::vector<uint8_t> px(4);
  f.copy_to("pixels", "U8", {2, 2}, px.data());
  EXPECT_EQ(px, (std::vector<uint8_t>{0, 127, 128, 255}));
  double scale = 0;
  f.copy_to("scale", "F64", {}, &scale);
  EXPECT_EQ(scale, 0.1);
  EXPECT_EQ(f.find("none")->shape, (std::vector<int64_t>{0, 3}));
}

// ---- corrupt files -----------------------------------------------------------

TEST(SafetensorsCorrupt, TheBaseFileIsValid) {
  testing::TempDir dir;
  std::string path = dir.file("good.safetensors");
  write_file_atomic(path, raw_file(kGoodHeader, kGoodData));
  SafetensorsFile f = SafetensorsFile::read(path);
  EXPECT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(std::string(static_cast<const char*>(f.data(*f.find("b"))), 4), "89ab");
}

TEST(SafetensorsCorrupt, TooShortForTheLength) {
  testing::TempDir dir;
  expect_corrupt(dir, "", {"file is 0 bytes", "shorter than the 8-byte header length"});
  expect_corrupt(dir, "1234567", {"file is 7 bytes", "shorter"});
}

TEST(SafetensorsCorrupt, HeaderLengthBeyondTheFile) {
  testing::TempDir dir;
  std::string f = raw_file(kGoodHeader, kGoodData, 1000);
  expect_corrupt(dir, f, {"header length 1000 bytes", str("larger than the file (", f.size(), " bytes)")});
}

TEST(SafetensorsCorrupt, HeaderClaiming2To63BytesNeitherCrashesNorAllocates) {
  testing::TempDir dir;
  // Under ASan a 2^63-byte allocation would abort; in any build it would throw
  // something other than DataError.
  expect_corrupt(dir, raw_file("{}", "", uint64_t(1) << 63), {"header length 9223372036854775808 bytes", "larger"});
  expect_corrupt(dir, raw_file("{}", "", ~uint64_t(0)), {"header length 18446744073709551615 bytes"});
}

TEST(SafetensorsCorrupt, AbsurdHeaderLength) {
  testing::TempDir dir;
  // A sparse file big enough that the length fits in it.
  std::string path = dir.file("big.safetensors");
  write_file_atomic(path, raw_file("", "", 100'000'001));
  std::filesystem::resize_file(path, 8 + 100'000'001 + 8);
  expect_data_error(path, {"header length 100000001 bytes is absurdly large"});
}

TEST(SafetensorsCorrupt, HeaderIsNotValidJson) {
  testing::TempDir dir;
  std::string good = kGoodHeader;
  expect_corrupt(dir, raw_file(R"({"a":{"dtype":"F32)", ""),
                 {"not valid JSON at byte 14 of the header (file byte 22)", "unterminated string"});
  expect_corrupt(dir, raw_file(good.substr(0, good.size() - 1) + ",}", kGoodData),
                 {"not valid JSON", str("at byte ", good.size())});
  expect_corrupt(dir, raw_file(good + " x", kGoodData), {"not valid JSON", "after the end of the JSON value"});
  expect_corrupt(dir, raw_file(good + std::string(3, '\0'), kGoodData), {"not valid JSON", "byte 0x00"});
  expect_corrupt(dir, raw_file(good.substr(0, 31), ""), {"not valid JSON", "unexpected end of input"});
  expect_corrupt(dir, raw_file("", ""), {"not valid JSON at byte 0"});
  expect_corrupt(dir, raw_file("{\"\xFF\":1}", ""), {"not valid JSON", "UTF-8"});
}

TEST(SafetensorsCorrupt, HeaderIsNotAnObject) {
  testing::TempDir dir;
  expect_corrupt(dir, raw_file("[1, 2]", ""), {"header is not a JSON object (found array)"});
  expect_corrupt(dir, raw_file(R"({"a": 3})", ""), {"tensor \"a\": expected an object, found number"});
}

TEST(SafetensorsCorrupt, UnknownDtype) {
  testing::TempDir dir;
  expect_corrupt(dir, raw_file("{" + tensor_json("w", "F33", "[2]", "[0,8]") + "}", "01234567"),
                 {"tensor \"w\"", "unknown dtype \"F33\"", "known: F64 F32"});
}

TEST(SafetensorsCorrupt, DtypeSizeDoesNotMatchTheShape) {
  testing::TempDir dir;
  expect_corrupt(dir, raw_file("{" + tensor_json("w", "F64", "[2]", "[0,8]") + "}", "01234567"),
                 {"tensor \"w\"", "data_offsets [0, 8] hold 8 bytes, but shape [2] of F64 needs 16"});
}

TEST(SafetensorsCorrupt, OverlappingTensors) {
  testing::TempDir dir;
  std::string h = "{" + tensor_json("a", "F32", "[2]", "[0,8]") + "," + tensor_json("b", "U8", "[8]", "[4,12]") + "}";
  expect_corrupt(dir, raw_file(h, kGoodData), {"tensors \"a\" [0, 8) and \"b\" [4, 12) overlap"});
  h = "{" + tensor_json("a", "F32", "[2]", "[0,8]") + "," + tensor_json("b", "F32", "[2]", "[0,8]") + "}";
  expect_corrupt(dir, raw_file(h, "01234567"), {"overlap"});
}

TEST(SafetensorsCorrupt, HoleInTheBuffer) {
  testing::TempDir dir;
  std::string h = "{" + tensor_json("a", "F32", "[2]", "[0,8]") + "," + tensor_json("b", "U8", "[2]", "[10,12]") + "}";
  expect_corrupt(dir, raw_file(h, kGoodData), {"hole in the data buffer: bytes [8, 10) belong to no tensor"});
  h = "{" + tensor_json("b", "U8", "[2]", "[4,6]") + "}";
  expect_corrupt(dir, raw_file(h, "012345"), {"hole", "[0, 4)"});
}

TEST(SafetensorsCorrupt, OffsetsBeyondTheEnd) {
  testing::TempDir dir;
  std::string h = "{" + tensor_json("a", "F32", "[2]", "[0,8]") + "," + tensor_json("b", "U8", "[1000]", "[8,1008]") + "}";
  expect_corrupt(dir, raw_file(h, kGoodData),
                 {"truncated: expected 1008 bytes of tensor data, found 12", "\"b\" at data_offsets [8, 1008] lies beyond the end"});
  // An end near 2^63 must be refused from the numbers alone, never allocated.
  h = "{" + tensor_json("a", "F32", "[2305843009213693952]", "[0,9223372036854775808]") + "}";
  expect_corrupt(dir, raw_file(h, "0123"), {"truncated: expected 9223372036854775808 bytes of tensor data, found 4"});
}

TEST(SafetensorsCorrupt, TruncatedData) {
  testing::TempDir dir;
  std::string path = dir.file("t.safetensors");
  std::vector<float> v(16, 1.f);
  write_safetensors(path, {entry("w", "F32", {4, 4}, v)}, {});
  std::string bytes = slurp(path);
  write_file_atomic(path, bytes.substr(0, bytes.size() - 10));
  expect_data_error(path, {"truncated: expected 64 bytes of tensor data, found 54"});
}

TEST(SafetensorsCorrupt, BytesAfterTheLastTensor) {
  testing::TempDir dir;
  expect_corrupt(dir, raw_file(kGoodHeader, kGoodData + "xyz"),
                 {"expected 12 bytes of tensor data, found 15", "3 bytes after the last tensor"});
}

TEST(SafetensorsCorrupt, DuplicateNames) {
  testing::TempDir dir;
  std::string h = "{" + tensor_json("a", "F32", "[2]", "[0,8]") + "," + tensor_json("a", "U8", "[4]", "[8,12]") + "}";
  expect_corrupt(dir, raw_file(h, kGoodData), {"duplicate tensor name \"a\""});
  h = R"({"__metadata__":{},"__metadata__":{}})";
  expect_corrupt(dir, raw_file(h, ""), {"duplicate __metadata__"});
  h = R"({"__metadata__":{"k":"1","k":"2"}})";
  expect_corrupt(dir, raw_file(h, ""), {"duplicate __metadata__ key \"k\""});
  h = R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  expect_corrupt(dir, raw_file(h, "x"), {"duplicate field \"dtype\""});
}

TEST(SafetensorsCorrupt, BadShapes) {
  testing::TempDir dir;
  auto shape = [&](const std::string& s, const std::string& offsets, std::initializer_list<std::string> needles) {
    expect_corrupt(dir, raw_file("{" + tensor_json("w", "F32", s, offsets) + "}", "01234567"), needles);
  };
  shape("[-1, 2]", "[0,8]", {"tensor \"w\"", "entry 0 (-1) is negative"});
  shape("[2.0]", "[0,8]", {"entry 0 (2.0) is not an integer"});
  shape("[1e0, 2]", "[0,8]", {"is not an integer"});
  shape("[\"2\"]", "[0,8]", {"is not an integer"});
  shape("[1, null]", "[0,8]", {"entry 1 (null) is not an integer"});
  shape("2", "[0,8]", {"shape must be an array of integers, found 2"});
  shape("[9223372036854775808]", "[0,8]", {"is too large"});
  shape("[99999999999999999999]", "[0,8]", {"is too large"});
}

TEST(SafetensorsCorrupt, HeaderWithTooManyValues) {
  testing::TempDir dir;
  // 2 MB of "0," would parse into ~100 MB of JSON values; 100 MB into gigabytes.
  std::string shape = "[";
  for (int i = 0; i < 1'000'000; ++i) shape += "0,";
  shape += "0]";
  expect_corrupt(dir, raw_file("{" + tensor_json("w", "F32", shape, "[0,0]") + "}", ""),
                 {"not valid JSON", "more than 1000000 values"});
}

TEST(SafetensorsCorrupt, HugeShapesThatWouldOverflow) {
  testing::TempDir dir;
  // 2^32 · 2^32 elements overflow the count; 2^62 F32 elements overflow the bytes.
  expect_corrupt(dir, raw_file("{" + tensor_json("w", "F32", "[4294967296, 4294967296]", "[0,8]") + "}", "01234567"),
                 {"shape [4294967296, 4294967296] of F32 overflows"});
  expect_corrupt(dir, raw_file("{" + tensor_json("w", "F32", "[4611686018427387904]", "[0,8]") + "}", "01234567"),
                 {"overflows"});
  expect_corrupt(dir, raw_file("{" + tensor_json("w", "F32", "[0, 9223372036854775807, 9223372036854775807]",
                                                 "[0,8]") + "}",
                               "01234567"),
                 {"hold 8 bytes, but shape [0, 9223372036854775807, 9223372036854775807] of F32 needs 0"});
}

TEST(SafetensorsCorrupt, BadDataOffsets) {
  testing::TempDir dir;
  for (const char* offsets : {"[8,0]", "[0]", "[0,8,9]", "[-1,8]", "[0,8.0]", "\"0,8\"", "[0,18446744073709551616]"})
    expect_corrupt(dir, raw_file("{" + tensor_json("w", "F32", "[2]", offsets) + "}", "01234567"),
                   {"tensor \"w\": data_offsets must be two non-decreasing non-negative integers"});
}

TEST(SafetensorsCorrupt, BadEntriesAndMetadata) {
  testing::TempDir dir;
  expect_corrupt(dir, raw_file(R"({"__metadata__":{"epoch":3}})", ""),
                 {"__metadata__ value for \"epoch\" must be a string, found number 3"});
  expect_corrupt(dir, raw_file(R"({"__metadata__":["a"]})", ""), {"__metadata__ must be an object"});
  expect_corrupt(dir, raw_file(R"({"w":{"dtype":"U8","shape":[1]}})", "x"), {"missing field \"data_offsets\""});
  expect_corrupt(dir, raw_file(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", "x"),
                 {"unexpected field \"x\""});
  expect_corrupt(dir, raw_file(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,1]}})", "x"),
                 {"dtype must be a string, found 4"});
  // A newline in a name stays escaped, so the message stays one line.
  expect_corrupt(dir, raw_file(R"({"a\nb":{"dtype":"X","shape":[1],"data_offsets":[0,1]}})", "x"),
                 {"tensor \"a\\nb\""});
}

TEST(SafetensorsCorrupt, NotARegularFileOrMissing) {
  testing::TempDir dir;
  expect_data_error(dir.path().string(), {"not a regular file"});
  EXPECT_THROW(SafetensorsFile::read(dir.file("missing.safetensors")), RuntimeError);
}

// Every prefix of a valid file and many single-byte corruptions: the reader
// either accepts the file or throws DataError, never anything else (run
// under ASan/UBSan this also shows no out-of-bounds access).
TEST(SafetensorsCorrupt, TruncationsAndByteFlipsAreCaught) {
  testing::TempDir dir;
  std::string path = dir.file("f.safetensors");
  std::vector<float> a = {1, 2, 3};
  std::vector<int64_t> b = {4, 5};
  write_safetensors(path, {entry("a", "F32", {3}, a), entry("b", "I64", {2, 1}, b)}, {{"k", "v"}});
  const std::string good = slurp(path);
  for (size_t len = 0; len < good.size(); ++len) {
    overwrite(path, good.substr(0, len));
    EXPECT_THROW(SafetensorsFile::read(path), DataError) << "prefix of " << len << " bytes";
  }
  Rng rng(7);
  int accepted = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = good;
    bad[rng.below(good.size())] = static_cast<char>(rng.below(256));
    overwrite(path, bad);
    try {
      SafetensorsFile::read(path);
      ++accepted;  // e.g. a changed data byte or metadata letter
    } catch (const DataError&) {
    }
  }
  EXPECT_GT(accepted, 0);
}

// ---- crash safety ------------------------------------------------------------

TEST(SafetensorsCrash, WriteIntoAMissingDirectoryFailsCleanly) {
  std::vector<float> v(4);
  try {
    write_safetensors("/nonexistent/dir/x.safetensors", {entry("w", "F32", {4}, v)}, {});
    FAIL();
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsCrash, FailedWriteLeavesThePreviousFile) {
  testing::TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  std::vector<float> old_w = {1, 2, 3, 4};
  write_safetensors(path, {entry("w", "F32", {4}, old_w)}, {{"epoch", "1"}});
  const std::string before = slurp(path);

  // An inconsistent entry is refused before the file is touched.
  std::vector<float> big(1 << 18, 0.5f);
  EXPECT_THROW(write_safetensors(path, {entry("w", "F32", {4}, big)}, {}), RuntimeError);
  EXPECT_EQ(slurp(path), before);

  // Fail mid-way through the data, as a full disk would: a file-size limit
  // makes write() fail with EFBIG. In a child, so the limit stays there.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {4096, 4096};
    setrlimit(RLIMIT_FSIZE, &lim);
    try {
      write_safetensors(path, {entry("w", "F32", {1 << 18}, big)}, {{"epoch", "2"}});
    } catch (const RuntimeError&) {
      _exit(0);
    }
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the oversized write did not fail";

  EXPECT_EQ(slurp(path), before);
  EXPECT_EQ(files_in(dir.path()), 1u) << "the temporary file was left behind";
  SafetensorsFile f = SafetensorsFile::read(path);
  EXPECT_EQ(f.metadata().at("epoch"), "1");
  std::vector<float> w(4);
  f.copy_to("w", "F32", {4}, w.data());
  EXPECT_EQ(w, old_w);
}

}  // namespace
}  // namespace hpmc
