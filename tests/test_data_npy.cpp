// The npy data format (images.npy, labels.npy and their test_ pair) in every
// layout and dtype it takes, float32 images kept as they are, the bad arrays
// it refuses with one line naming the file; the npy header reader; and IDX
// images of sizes other than 28x28.
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/dataset.h"
#include "data/npy_data.h"
#include "io/npy.h"
#include "model/batches.h"
#include "gpu_testing.h"
#include "testing.h"

namespace hpmc {
namespace {

namespace fs = std::filesystem;

// A .npy file of any dtype, written by hand (not by hpmc's writer).
std::string npy_bytes(const std::string& descr, const std::vector<int64_t>& shape,
                      const void* data, size_t bytes, bool fortran = false) {
  std::string dims = "(";
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  dims += shape.size() == 1 ? ",)" : ")";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " +
                     (fortran ? "True" : "False") + ", 'shape': " + dims + ", }";
  while ((10 + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  out += dict;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

template <typename T>
void put(const fs::path& p, const std::string& descr, const std::vector<int64_t>& shape,
         const std::vector<T>& v, bool fortran = false) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << npy_bytes(descr, shape, v.data(), v.size() * sizeof(T), fortran);
}

using testing::expect_data_error;

DataOptions layout(const std::string& l, double fraction = 0) {
  DataOptions o;
  o.layout = l;
  o.test_fraction = fraction;
  return o;
}

std::vector<uint8_t> ramp(size_t n, int seed = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t((i * 5 + size_t(seed) * 17) % 256);
  return v;
}

TEST(NpyHeader, ReadsTheHeaderAndChecksTheSize) {
  testing::TempDir t;
  const std::vector<int16_t> v = {1, -2, 3, -4, 5, -6};
  put(t.path() / "a.npy", "<i2", {2, 3}, v);
  NpyHeader h = read_npy_header(t.file("a.npy"));
  EXPECT_EQ(h.descr, "<i2");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.item_size, 2);
  EXPECT_EQ(h.data_offset, fs::file_size(t.path() / "a.npy") - 12);
  EXPECT_EQ(h.data_offset % 64, 0u);
  EXPECT_EQ(h.data_bytes, 12u);
  int16_t back[2];
  read_npy_data(t.file("a.npy"), h, 4, back, 4);
  EXPECT_EQ(back[0], 3);
  EXPECT_EQ(back[1], -4);
  // read_npy agrees with the header reader.
  NpyArray a = read_npy(t.file("a.npy"));
  EXPECT_EQ(a.shape, h.shape);
  EXPECT_EQ(a.data.size(), 12u);
  // One byte short: the header's size check names both sizes.
  std::string bytes = npy_bytes("<i2", {2, 3}, v.data(), 11);
  std::ofstream(t.file("short.npy"), std::ios::binary) << bytes;
  expect_data_error([&] { read_npy_header(t.file("short.npy")); }, {"short.npy", "needs 12", "has 11"});
  // A header length that runs past the end of the file.
  std::string lie = bytes.substr(0, 10);
  lie[8] = char(0xff), lie[9] = char(0x7f);
  std::ofstream(t.file("lie.npy"), std::ios::binary) << lie;
  expect_data_error([&] { read_npy_header(t.file("lie.npy")); }, {"lie.npy", "truncated header"});
}

TEST(NpyData, Uint8NhwWithLabelsAndTestArrays) {
  testing::TempDir t;
  const fs::path d = t.path() / "npy";
  put(d / kNpyImages, "|u1", {4, 3, 5}, ramp(60));
  put(d / kNpyLabels, "<i8", {4}, std::vector<int64_t>{2, 0, 6, 1});
  put(d / kNpyTestImages, "|u1", {2, 3, 5}, ramp(30, 1));
  put(d / kNpyTestLabels, "|u1", {2, 1}, std::vector<uint8_t>{3, 3});
  DataSplits s = load_dataset(DataFormat::kNpy, d.string(), layout("auto"));
  EXPECT_EQ(s.train.images.shape(), Shape(4, 1, 3, 5));
  EXPECT_EQ(s.train.images.dtype(), DType::kU8);
  EXPECT_EQ(std::memcmp(s.train.images.data<uint8_t>(), ramp(60).data(), 60), 0);
  EXPECT_EQ(s.train.labels.data<int32_t>()[2], 6);
  EXPECT_EQ(s.train.num_classes, 7);  // the largest label of both files, plus one
  EXPECT_EQ(s.test.size(), 2);
  EXPECT_EQ(s.test.labels.data<int32_t>()[1], 3);
  EXPECT_EQ(std::memcmp(s.test.images.data<uint8_t>(), ramp(30, 1).data(), 30), 0);
  DataProbe p = probe_dataset(DataFormat::kNpy, d.string(), layout("auto"));
  EXPECT_EQ(p.sample, Shape(1, 1, 3, 5));
  EXPECT_EQ(p.num_classes, 7);
  EXPECT_EQ(p.train, 4u);
  EXPECT_EQ(p.test, 2u);
  EXPECT_EQ(p.pixels, DType::kU8);
  // The test split alone needs only the test arrays.
  fs::remove(d / kNpyImages);
  fs::remove(d / kNpyLabels);
  EXPECT_EQ(load_dataset(DataFormat::kNpy, d.string(), layout("nhw"), Splits::kTest).test.size(),
            2);
}

TEST(NpyData, NhwcAndNchwGiveTheSameNchwImages) {
  testing::TempDir t;
  const int n = 3, c = 3, h = 4, w = 5;
  std::vector<uint8_t> nchw = ramp(size_t(n * c * h * w));
  std::vector<uint8_t> nhwc(nchw.size());
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < c; ++k)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          nhwc[size_t(((i * h + y) * w + x) * c + k)] = nchw[size_t(((i * c + k) * h + y) * w + x)];
  put(t.path() / "a" / kNpyImages, "|u1", {n, c, h, w}, nchw);
  put(t.path() / "b" / kNpyImages, "|u1", {n, h, w, c}, nhwc);
  Dataset a = load_dataset(DataFormat::kNpy, (t.path() / "a").string(), layout("nchw")).train;
  Dataset b = load_dataset(DataFormat::kNpy, (t.path() / "b").string(), layout("nhwc")).train;
  EXPECT_EQ(a.images.shape(), Shape(n, c, h, w));
  EXPECT_EQ(b.images.shape(), Shape(n, c, h, w));
  EXPECT_EQ(std::memcmp(a.images.raw(), nchw.data(), nchw.size()), 0);
  EXPECT_EQ(std::memcmp(b.images.raw(), nchw.data(), nchw.size()), 0);
  EXPECT_EQ(a.num_classes, 0);  // no labels.npy
  EXPECT_EQ(a.labels.data<int32_t>()[0], -1);
  // The 4-d array needs a layout, and the layout the right rank.
  expect_data_error([&] { load_dataset(DataFormat::kNpy, (t.path() / "a").string(), layout("auto")); },
             {kNpyImages, "(3, 3, 4, 5)", "data.layout: nhwc or nchw"});
  expect_data_error([&] { load_dataset(DataFormat::kNpy, (t.path() / "a").string(), layout("nhw")); },
             {"4 dimensions", "nhw needs 3"});
  // nchw read as nhwc gives 5 channels.
  expect_data_error([&] { load_dataset(DataFormat::kNpy, (t.path() / "a").string(), layout("nhwc")); },
             {"5 channels", "1 (grey) or 3 (RGB)"});
}

TEST(NpyData, Float32ImagesAreKeptAsTheyAre) {
  testing::TempDir t;
  const fs::path d = t.path() / "f";
  std::vector<float> v = {0.0f, 1.0f, 0.1f, 0.333333343f, 0.5f, 0.7f, 1e-7f, 0.9999999f};
  put(d / kNpyImages, "<f4", {2, 2, 2}, v);
  DataSplits s = load_dataset(DataFormat::kNpy, d.string(), layout("nhw"));
  EXPECT_EQ(s.train.images.dtype(), DType::kF32);
  EXPECT_EQ(probe_dataset(DataFormat::kNpy, d.string(), layout("nhw")).pixels, DType::kF32);
  // The batch the model gets holds exactly these values, and a slice keeps them.
  Tensor x = Tensor::empty(Shape(2, 1, 2, 2));
  const int32_t idx[2] = {1, 0};
  gather_batch(s.train, idx, 2, x, nullptr);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(x.data<float>()[i], v[size_t(4 + i)]);
    EXPECT_EQ(x.data<float>()[4 + i], v[size_t(i)]);
  }
  Dataset one = s.train.slice(1, 1);
  EXPECT_EQ(one.images.dtype(), DType::kF32);
  EXPECT_EQ(one.images.data<float>()[3], v[7]);

  v[5] = 1.5f;
  put(d / kNpyImages, "<f4", {2, 2, 2}, v);
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw")); },
             {kNpyImages, "value 1.5 of image 1", "outside [0, 1]", "255"});
  v[5] = std::nanf("");
  put(d / kNpyImages, "<f4", {2, 2, 2}, v);
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw")); },
             {"not a number"});
  put(d / kNpyImages, "<f8", {1, 1, 1}, std::vector<double>{0.5});
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw")); },
             {kNpyImages, "<f8", "uint8", "float32"});
  put(d / kNpyImages, ">f4", {1, 1, 1}, std::vector<float>{0.5f});
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw")); }, {">f4"});
  put(d / kNpyImages, "|u1", {2, 2, 2}, ramp(8), /*fortran=*/true);
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw")); },
             {"Fortran order", "ascontiguousarray"});
}

TEST(NpyData, BadLabelsAreOneLineErrors) {
  testing::TempDir t;
  const fs::path d = t.path() / "l";
  put(d / kNpyImages, "|u1", {3, 2, 2}, ramp(12));
  put(d / kNpyLabels, "<i4", {2}, std::vector<int32_t>{0, 1});
  expect_data_error([&] { probe_dataset(DataFormat::kNpy, d.string(), layout("nhw")); },
             {kNpyLabels, "2 labels", kNpyImages, "3 images"});
  put(d / kNpyLabels, "<f4", {3}, std::vector<float>{0, 1, 2});
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw")); },
             {kNpyLabels, "<f4", "integers"});
  put(d / kNpyLabels, "<i2", {3}, std::vector<int16_t>{0, -1, 2});
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw")); },
             {"label -1 at index 1"});
  put(d / kNpyLabels, "<i4", {3, 2}, std::vector<int32_t>{0, 1, 2, 3, 4, 5});
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw")); },
             {"(3, 2)", "(N,)"});
  // Labels for one split only.
  put(d / kNpyLabels, "<u2", {3}, std::vector<uint16_t>{0, 1, 65535});
  EXPECT_EQ(load_dataset(DataFormat::kNpy, d.string(), layout("nhw")).train.num_classes, 65536);
  put(d / kNpyTestImages, "|u1", {1, 2, 2}, ramp(4));
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw")); },
             {kNpyLabels, kNpyTestLabels, "both splits or for neither"});
  put(d / kNpyTestImages, "|u1", {1, 3, 3}, ramp(9));
  put(d / kNpyTestLabels, "|u1", {1}, std::vector<uint8_t>{0});
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw")); },
             {kNpyTestImages, "1x3x3", "1x2x2"});
  expect_data_error([&] { load_dataset(DataFormat::kNpy, d.string(), layout("nhw", 0.5)); },
             {kNpyTestImages, "data.test_fraction"});
  expect_data_error([&] { load_dataset(DataFormat::kNpy, (t.path() / "none").string(), layout("nhw")); },
             {"none", "does not exist"});
}

TEST(NpyData, TestFractionSplitsImagesNpy) {
  testing::TempDir t;
  const fs::path d = t.path() / "s";
  std::vector<int32_t> labels;
  for (int i = 0; i < 20; ++i) labels.push_back(i % 4);
  put(d / kNpyImages, "|u1", {20, 2, 2}, ramp(80));
  put(d / kNpyLabels, "<i4", {20}, labels);
  DataSplits s = load_dataset(DataFormat::kNpy, d.string(), layout("nhw", 0.25));
  EXPECT_EQ(s.train.size(), 16);
  EXPECT_EQ(s.test.size(), 4);  // one of each class
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 4; ++i) ++seen[size_t(s.test.labels.data<int32_t>()[i])];
  EXPECT_EQ(seen, (std::vector<int>{1, 1, 1, 1}));
  DataProbe p = probe_dataset(DataFormat::kNpy, d.string(), layout("nhw", 0.25), Splits::kTest);
  EXPECT_EQ(p.train, 0u);
  EXPECT_EQ(p.test, 4u);
  // Without a test split, a test-only command is refused.
  expect_data_error(
      [&] { probe_dataset(DataFormat::kNpy, d.string(), layout("nhw"), Splits::kTest); },
      {"no test split", kNpyTestImages, "data.test_fraction"});
}

// ---- IDX at other sizes -----------------------------------------------------------------

void be32(std::string& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(char(v >> s));
}

void write_idx(const fs::path& dir, const std::string& prefix, uint32_t n, uint32_t h,
               uint32_t w) {
  std::string img, lab;
  be32(img, 0x803), be32(img, n), be32(img, h), be32(img, w);
  for (uint32_t i = 0; i < n * h * w; ++i) img.push_back(char(i * 3));
  be32(lab, 0x801), be32(lab, n);
  for (uint32_t i = 0; i < n; ++i) lab.push_back(char(i % 10));
  fs::create_directories(dir);
  std::ofstream(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary) << img;
  std::ofstream(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary) << lab;
}

TEST(MnistSizes, AnyImageSizeTheHeaderGives) {
  testing::TempDir t;
  write_idx(t.path(), "train", 5, 20, 24);
  write_idx(t.path(), "t10k", 2, 20, 24);
  DataProbe p = probe_dataset(DataFormat::kMnist, t.path().string(), DataOptions{});
  EXPECT_EQ(p.sample, Shape(1, 1, 20, 24));
  EXPECT_EQ(p.train, 5u);
  EXPECT_EQ(p.test, 2u);
  EXPECT_EQ(p.num_classes, 10);
  DataSplits s = load_dataset(DataFormat::kMnist, t.path().string());
  EXPECT_EQ(s.train.images.shape(), Shape(5, 1, 20, 24));
  EXPECT_EQ(s.train.images.data<uint8_t>()[479], uint8_t(479 * 3));
  // Without the files the probe assumes MNIST's shape (the load then says
  // what is missing).
  DataProbe none = probe_dataset(DataFormat::kMnist, (t.path() / "no").string(), DataOptions{});
  EXPECT_EQ(none.sample, Shape(1, 1, 28, 28));
  EXPECT_EQ(none.train, 60000u);
  // The two splits must agree.
  write_idx(t.path(), "t10k", 2, 28, 28);
  expect_data_error([&] { probe_dataset(DataFormat::kMnist, t.path().string(), DataOptions{}); },
             {"1x28x28", "1x20x24", "one image size"});
  expect_data_error([&] { load_dataset(DataFormat::kMnist, t.path().string()); },
             {"1x28x28", "1x20x24", "one image size"});
  // A zero side is corrupt.
  write_idx(t.path(), "t10k", 2, 0, 28);
  expect_data_error([&] { load_dataset(DataFormat::kMnist, t.path().string(), Splits::kTest); },
             {"t10k-images-idx3-ubyte", "0x28"});
}

// ---- the GPU batch from float32 images ---------------------------------------------------

TEST(NpyData, GpuBatchesOfFloat32ImagesMatchTheCpu) {
  HPMC_REQUIRE_GPU();
  Dataset d;
  d.num_classes = 3;
  d.images = Tensor::empty(Shape(9, 3, 4, 5), DType::kF32);
  d.labels = Tensor::empty(Shape(9, 1, 1, 1), DType::kI32);
  Rng rng(4);
  for (size_t i = 0; i < d.images.numel(); ++i) d.images.data<float>()[i] = rng.uniform01();
  for (int i = 0; i < 9; ++i) d.labels.data<int32_t>()[i] = i % 3;
  BatchFeeder cpu(d, Device::kCPU, 4, d.sample_shape());
  BatchFeeder gpu(d, Device::kGPU, 4, d.sample_shape());
  const std::vector<int32_t> order = {8, 3, 0, 5, 1, 2, 4, 6, 7};
  cpu.set_order(order);
  gpu.set_order(order);
  cpu.load(2, 4);
  gpu.load(2, 4);
  const Tensor gx = testing::to_cpu(gpu.x()), gy = testing::to_cpu(gpu.labels());
  ASSERT_EQ(gx.numel(), cpu.x().numel());
  for (size_t i = 0; i < gx.numel(); ++i) ASSERT_EQ(gx.data<float>()[i], cpu.x().data<float>()[i]) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(gy.data<int32_t>()[i], cpu.labels().data<int32_t>()[i]);
}

}  // namespace
}  // namespace hpmc
