// Dataset loaders: MNIST IDX (raw and gzipped) and CIFAR-10 binary batches.
//
// The tests write small files in the real on-disk formats (big-endian IDX
// headers, gzip through zlib, 3073-byte CIFAR records) and check what comes
// back, byte for byte, and that each kind of damaged or missing file gives a
// one-line DataError naming the file and the numbers involved. The last two
// tests load the real Fashion-MNIST and MNIST files when they are present.
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <set>

#include "core/error.h"
#include "data/dataset.h"
#include "data/file_io.h"
#include "fifo_testing.h"
#include "testing.h"

namespace hpmc {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

void put_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}

Bytes idx_images(uint32_t n, uint32_t h, uint32_t w, const Bytes& pixels,
                 uint32_t magic = 0x00000803) {
  Bytes b;
  put_be32(b, magic);
  put_be32(b, n);
  put_be32(b, h);
  put_be32(b, w);
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}

Bytes idx_labels(const Bytes& labels) {
  Bytes b;
  put_be32(b, 0x00000801);
  put_be32(b, uint32_t(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

void write_raw(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  ASSERT_TRUE(out.good()) << path;
}

void write_gz(const std::string& path, const Bytes& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!b.empty()) {
    ASSERT_EQ(gzwrite(f, b.data(), unsigned(b.size())), int(b.size())) << path;
  }
  ASSERT_EQ(gzclose(f), Z_OK) << path;
}

Bytes read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// n random 28x28 images (with 0 and 255 surely present) and labels 0..9.
struct Samples {
  Bytes pixels, labels;
};
Samples random_samples(int n, uint64_t seed, int side = 28) {
  Rng rng(seed);
  Samples s;
  s.pixels.resize(size_t(n) * side * side);
  for (auto& p : s.pixels) p = uint8_t(rng.below(256));
  s.pixels[0] = 0;
  s.pixels[1] = 255;
  for (int i = 0; i < n; ++i) s.labels.push_back(uint8_t(rng.below(10)));
  return s;
}

// Writes <prefix>-images-idx3-ubyte and <prefix>-labels-idx1-ubyte (+ .gz).
Samples write_mnist_split(const testing::TempDir& dir, const std::string& prefix, int n,
                          uint64_t seed, bool gz) {
  Samples s = random_samples(n, seed);
  std::string ext = gz ? ".gz" : "";
  auto write = gz ? write_gz : write_raw;
  write(dir.file(prefix + "-images-idx3-ubyte" + ext), idx_images(n, 28, 28, s.pixels));
  write(dir.file(prefix + "-labels-idx1-ubyte" + ext), idx_labels(s.labels));
  return s;
}

void expect_matches(const Dataset& d, const Samples& s) {
  ASSERT_EQ(size_t(d.size()), s.labels.size());
  ASSERT_EQ(d.images.numel(), s.pixels.size());
  EXPECT_EQ(std::memcmp(d.images.data<uint8_t>(), s.pixels.data(), s.pixels.size()), 0);
  for (int i = 0; i < d.size(); ++i) EXPECT_EQ(d.labels.data<int32_t>()[i], s.labels[size_t(i)]);
}

using testing::expect_data_error;

// One CIFAR-10 record: label, then R, G, B planes of 32x32. Each plane gets
// its own value range so a channel mix-up is visible.
Bytes cifar_record(uint8_t label, int seed) {
  Bytes r{label};
  for (int c = 0; c < 3; ++c)
    for (int k = 0; k < 1024; ++k) r.push_back(uint8_t(c * 80 + (k * 7 + seed * 13) % 80));
  return r;
}

Bytes cifar_batch(int records, int first_seed) {
  Bytes b;
  for (int i = 0; i < records; ++i) {
    Bytes r = cifar_record(uint8_t((first_seed + i) % 10), first_seed + i);
    b.insert(b.end(), r.begin(), r.end());
  }
  return b;
}

// Five training batches of 2, 3, 1, 2, 2 records and a test batch of 3;
// record seeds run 0..9 through the training batches, 100.. in the test.
void write_cifar_dir(const fs::path& dir) {
  fs::create_directories(dir);
  const int sizes[5] = {2, 3, 1, 2, 2};
  int seed = 0;
  for (int b = 0; b < 5; ++b) {
    write_raw((dir / str("data_batch_", b + 1, ".bin")).string(), cifar_batch(sizes[b], seed));
    seed += sizes[b];
  }
  write_raw((dir / "test_batch.bin").string(), cifar_batch(3, 100));
}

// Sample i of d equals cifar_record(label, seed), plane by plane.
void expect_cifar_sample(const Dataset& d, int i, int seed) {
  Bytes r = cifar_record(uint8_t(seed % 10), seed);
  EXPECT_EQ(d.labels.data<int32_t>()[i], seed % 10) << "sample " << i;
  EXPECT_EQ(std::memcmp(d.images.data<uint8_t>() + size_t(i) * 3072, r.data() + 1, 3072), 0)
      << "sample " << i;
}

// A small hand-made dataset: sample i has pixels 10*i + k (k < 4) and label
// 9 - i; the last sample's pixels are 0 and 255.
Dataset tiny_dataset(int n) {
  Dataset d;
  d.source = "tiny";
  d.images = Tensor::empty(Shape(n, 1, 2, 2), DType::kU8);
  d.labels = Tensor::empty(Shape(n, 1, 1, 1), DType::kI32);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) d.images.data<uint8_t>()[i * 4 + k] = uint8_t(10 * i + k);
    d.labels.data<int32_t>()[i] = 9 - i;
  }
  uint8_t* last = d.images.data<uint8_t>() + (n - 1) * 4;
  last[0] = 0;
  last[1] = 255;
  return d;
}

}  // namespace

TEST(DataFormat, ParseNamesAndShapes) {
  EXPECT_EQ(parse_data_format("mnist"), DataFormat::kMnist);
  EXPECT_EQ(parse_data_format("cifar10"), DataFormat::kCifar10);
  EXPECT_STREQ(data_format_name(DataFormat::kMnist), "mnist");
  EXPECT_STREQ(data_format_name(DataFormat::kCifar10), "cifar10");
  EXPECT_EQ(parse_data_format("images"), DataFormat::kImages);
  EXPECT_EQ(parse_data_format("npy"), DataFormat::kNpy);
  EXPECT_STREQ(data_format_name(DataFormat::kImages), "images");
  EXPECT_STREQ(data_format_name(DataFormat::kNpy), "npy");
  EXPECT_EQ(sample_shape(DataFormat::kMnist), Shape(1, 1, 28, 28));
  EXPECT_EQ(sample_shape(DataFormat::kCifar10), Shape(1, 3, 32, 32));
  EXPECT_EQ(num_classes(DataFormat::kMnist), 10);
  EXPECT_EQ(num_classes(DataFormat::kCifar10), 10);
  try {
    parse_data_format("imagenet");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("imagenet"), std::string::npos) << m;
    EXPECT_NE(m.find("mnist"), std::string::npos) << m;
    EXPECT_NE(m.find("cifar10"), std::string::npos) << m;
  }
}

TEST(FileIo, RawGzipMultiMemberAndMisnamed) {
  testing::TempDir dir;
  Samples s = random_samples(3, 1);
  const Bytes& b = s.pixels;
  write_raw(dir.file("a.bin"), b);
  write_gz(dir.file("a.bin.gz"), b);
  write_raw(dir.file("plain.gz"), b);  // a .gz name over raw bytes, as browsers leave them
  EXPECT_EQ(read_file(dir.file("a.bin")), b);
  EXPECT_EQ(read_file(dir.file("a.bin.gz")), b);
  EXPECT_EQ(read_file(dir.file("plain.gz")), b);
  EXPECT_FALSE(is_gzip(dir.file("a.bin")));
  EXPECT_TRUE(is_gzip(dir.file("a.bin.gz")));
  EXPECT_EQ(content_size(dir.file("a.bin")), b.size());
  EXPECT_EQ(content_size(dir.file("a.bin.gz")), b.size());
  ASSERT_TRUE(gzip_size_hint(dir.file("a.bin.gz")).has_value());
  EXPECT_EQ(*gzip_size_hint(dir.file("a.bin.gz")), b.size());
  EXPECT_FALSE(gzip_size_hint(dir.file("a.bin")).has_value());

  // Two gzip members back to back (what `cat a.gz b.gz` makes) read as one.
  Bytes gz = read_raw(dir.file("a.bin.gz"));
  Bytes twice = gz;
  twice.insert(twice.end(), gz.begin(), gz.end());
  write_raw(dir.file("twice.gz"), twice);
  Bytes expected = b;
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(read_file(dir.file("twice.gz")), expected);
  EXPECT_EQ(content_size(dir.file("twice.gz")), expected.size());

  write_raw(dir.file("empty"), {});
  EXPECT_TRUE(read_file(dir.file("empty")).empty());
  expect_data_error([&] { read_file(dir.file("nope.gz")); }, {dir.file("nope.gz"), "not found"});
  expect_data_error([&] { read_file(dir.path().string()); }, {"is a directory"});
}

// A FIFO used to block the reader forever; a device or a directory is named
// for what it is.
TEST(FileIo, RefusesWhatIsNotARegularFile) {
  testing::TempDir dir;
  const std::string fifo = dir.file("pipe.gz");
  testing::make_fifo(fifo);
  testing::returns_without_blocking(fifo, [&] {
    return expect_data_error([&] { read_file(fifo); }, {fifo + ": is a FIFO, not a regular file"});
  });
  EXPECT_TRUE(testing::returns_without_blocking(fifo, [&] { return !is_gzip(fifo); }));
  EXPECT_TRUE(testing::returns_without_blocking(
      fifo, [&] { return !gzip_size_hint(fifo).has_value(); }));
  testing::returns_without_blocking(fifo, [&] {
    return expect_data_error([&] { content_size(fifo); }, {"is a FIFO, not a regular file"});
  });
  expect_data_error([&] { read_file("/dev/null"); },
                    {"/dev/null: is a character device, not a regular file"});
  expect_data_error([&] { read_file(dir.path().string()); },
                    {dir.path().string() + ": is a directory, not a regular file"});
  fs::create_symlink(dir.file("b"), dir.file("a"));
  fs::create_symlink(dir.file("a"), dir.file("b"));
  expect_data_error([&] { InputFile f(dir.file("a")); },
                    {dir.file("a") + ": is a symbolic link loop, not a regular file"});
}

TEST(Mnist, RawAndGzipGiveIdenticalTensors) {
  testing::TempDir dir;
  Samples raw = write_mnist_split(dir, "train", 7, 11, false);
  Samples gz = write_mnist_split(dir, "train", 7, 11, true);
  Dataset a = load_mnist(dir.file("train-images-idx3-ubyte"), dir.file("train-labels-idx1-ubyte"));
  Dataset b =
      load_mnist(dir.file("train-images-idx3-ubyte.gz"), dir.file("train-labels-idx1-ubyte.gz"));
  EXPECT_EQ(a.source, dir.file("train-images-idx3-ubyte"));
  for (const Dataset* d : {&a, &b}) {
    EXPECT_EQ(d->images.shape(), Shape(7, 1, 28, 28));
    EXPECT_EQ(d->images.dtype(), DType::kU8);
    EXPECT_EQ(d->images.device(), Device::kCPU);
    EXPECT_EQ(d->labels.shape(), Shape(7, 1, 1, 1));
    EXPECT_EQ(d->labels.dtype(), DType::kI32);
    EXPECT_EQ(d->size(), 7);
    EXPECT_EQ(d->sample_shape(), Shape(1, 1, 28, 28));
    EXPECT_EQ(d->num_classes, 10);
    expect_matches(*d, raw);
  }
  EXPECT_EQ(std::memcmp(a.images.raw(), b.images.raw(), a.images.bytes()), 0);
  EXPECT_EQ(std::memcmp(a.labels.raw(), b.labels.raw(), a.labels.bytes()), 0);
}

TEST(Mnist, LoadDatasetFromDirectoryPrefersRaw) {
  testing::TempDir dir;
  Samples train = write_mnist_split(dir, "train", 5, 1, false);
  write_mnist_split(dir, "train", 4, 2, true);  // a different .gz beside the raw files
  Samples test = write_mnist_split(dir, "t10k", 3, 3, true);
  DataSplits s = load_dataset(DataFormat::kMnist, dir.path().string());
  expect_matches(s.train, train);
  expect_matches(s.test, test);
  EXPECT_EQ(s.train.source, dir.file("train-images-idx3-ubyte"));
  EXPECT_EQ(s.test.source, dir.file("t10k-images-idx3-ubyte.gz"));
}

TEST(Cifar10, LoadsFiveBatchesAndTestKeepingChannelPlanes) {
  testing::TempDir dir;
  write_cifar_dir(dir.path());
  DataSplits s = load_dataset(DataFormat::kCifar10, dir.path().string());
  EXPECT_EQ(s.train.images.shape(), Shape(10, 3, 32, 32));
  EXPECT_EQ(s.train.labels.shape(), Shape(10, 1, 1, 1));
  EXPECT_EQ(s.train.sample_shape(), Shape(1, 3, 32, 32));
  EXPECT_EQ(s.test.size(), 3);
  for (int i = 0; i < 10; ++i) expect_cifar_sample(s.train, i, i);  // batch order kept
  for (int i = 0; i < 3; ++i) expect_cifar_sample(s.test, i, 100 + i);
  // Plane c of the record is channel c of the tensor: R in 0..79, G in
  // 80..159, B in 160..239.
  const uint8_t* px = s.train.images.data<uint8_t>() + 4 * 3072;
  for (int c = 0; c < 3; ++c)
    for (int k = 0; k < 1024; ++k) {
      ASSERT_GE(px[c * 1024 + k], c * 80);
      ASSERT_LT(px[c * 1024 + k], c * 80 + 80);
    }
  EXPECT_EQ(px[1024 + 5 * 32 + 3], 80 + ((5 * 32 + 3) * 7 + 4 * 13) % 80);  // G at (y 5, x 3)
  EXPECT_EQ(s.test.source, dir.file("test_batch.bin"));
}

TEST(Cifar10, OfficialSubdirectoryLayoutAndGzip) {
  testing::TempDir dir;
  fs::path sub = dir.path() / "cifar-10-batches-bin";
  write_cifar_dir(sub);
  // A gzipped batch is read too.
  write_gz((sub / "data_batch_3.bin.gz").string(), read_raw((sub / "data_batch_3.bin").string()));
  fs::remove(sub / "data_batch_3.bin");
  DataSplits s = load_dataset(DataFormat::kCifar10, dir.path().string());
  EXPECT_EQ(s.train.size(), 10);
  EXPECT_EQ(s.test.size(), 3);
  for (int i = 0; i < 10; ++i) expect_cifar_sample(s.train, i, i);
  Dataset one = load_cifar10({(sub / "data_batch_2.bin").string()});
  ASSERT_EQ(one.size(), 3);
  for (int i = 0; i < 3; ++i) expect_cifar_sample(one, i, 2 + i);
}

TEST(GatherBatch, ScalesToUnitRangeAndFollowsIndexOrder) {
  Dataset d = tiny_dataset(4);
  Tensor x = Tensor::zeros(Shape(5, 1, 2, 2));
  Tensor y = Tensor::zeros(Shape(5, 1, 1, 1), DType::kI32);
  const int32_t idx[3] = {3, 0, 2};
  gather_batch(d, idx, 3, x, &y);
  EXPECT_EQ(x.shape(), Shape(3, 1, 2, 2));
  EXPECT_EQ(y.shape(), Shape(3, 1, 1, 1));
  const float* p = x.data<float>();
  EXPECT_EQ(p[0], 0.0f);  // sample 3 holds 0 and 255
  EXPECT_EQ(p[1], 1.0f);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(p[4 + k], float(k) / 255.0f);
    EXPECT_EQ(p[8 + k], float(20 + k) / 255.0f);
  }
  EXPECT_EQ(y.data<int32_t>()[0], 6);
  EXPECT_EQ(y.data<int32_t>()[1], 9);
  EXPECT_EQ(y.data<int32_t>()[2], 7);

  // A partial last batch reuses the buffers; labels are optional; a flat
  // (n, 4, 1, 1) input takes the same values.
  const int32_t one[1] = {1};
  gather_batch(d, one, 1, x, nullptr);
  EXPECT_EQ(x.shape().n, 1);
  EXPECT_EQ(x.capacity(), 20u);
  EXPECT_EQ(p[0], 10.0f / 255.0f);
  Tensor flat = Tensor::zeros(Shape(2, 4, 1, 1));
  gather_batch(d, idx, 2, flat, nullptr);
  EXPECT_EQ(flat.shape(), Shape(2, 4, 1, 1));
  EXPECT_EQ(flat.data<float>()[1], 1.0f);

  const int32_t bad[1] = {4};
  EXPECT_THROW(gather_batch(d, bad, 1, x, &y), Error);
  EXPECT_THROW(gather_batch(d, idx, 6, x, &y), Error);  // more than the capacity
}

TEST(Dataset, SliceCopiesTheRightSamples) {
  Dataset d = tiny_dataset(5);
  Dataset s = d.slice(1, 3);
  EXPECT_EQ(s.size(), 3);
  EXPECT_EQ(s.images.shape(), Shape(3, 1, 2, 2));
  EXPECT_EQ(s.source, "tiny");
  EXPECT_EQ(std::memcmp(s.images.data<uint8_t>(), d.images.data<uint8_t>() + 4, 12), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(s.labels.data<int32_t>()[i], 8 - i);
  s.images.data<uint8_t>()[0] = 99;  // a copy, not a view
  EXPECT_EQ(d.images.data<uint8_t>()[4], 10);
  EXPECT_EQ(d.slice(5, 0).size(), 0);
  EXPECT_THROW(d.slice(4, 2), Error);
  EXPECT_THROW(d.slice(-1, 1), Error);
}

TEST(MnistErrors, WrongMagic) {
  testing::TempDir dir;
  Samples s = random_samples(2, 1);
  write_raw(dir.file("images"), idx_images(2, 28, 28, s.pixels, 0x00000801));
  write_raw(dir.file("labels"), idx_labels(s.labels));
  expect_data_error([&] { load_mnist(dir.file("images"), dir.file("labels")); },
                    {dir.file("images"), "0x00000803", "0x00000801", "swapped"});
  // An HTML page saved by a failed download.
  write_raw(dir.file("page"), Bytes{'<', '!', 'D', 'O', 'C', 'T', 'Y', 'P', 'E', ' ', 'h', 't', 'm',
                                    'l', '>', '\n', '<', 'p', '>'});
  expect_data_error([&] { load_mnist(dir.file("page"), dir.file("labels")); },
                    {dir.file("page"), "0x00000803", "HTML"});
}

TEST(MnistErrors, TruncatedImagesFile) {
  testing::TempDir dir;
  Samples s = random_samples(5, 1);
  Bytes img = idx_images(5, 28, 28, s.pixels);
  img.resize(16 + 3 * 784 + 10);
  write_raw(dir.file("images"), img);
  write_raw(dir.file("labels"), idx_labels(s.labels));
  expect_data_error([&] { load_mnist(dir.file("images"), dir.file("labels")); },
                    {dir.file("images"), "truncated", "5 images", "3936", "2378"});
  // The same inside a (valid) gzip stream.
  write_gz(dir.file("images.gz"), img);
  expect_data_error([&] { load_mnist(dir.file("images.gz"), dir.file("labels")); },
                    {dir.file("images.gz"), "truncated", "3936", "2378", "gunzip"});
  // Inside the header.
  write_raw(dir.file("short"), Bytes(img.begin(), img.begin() + 10));
  expect_data_error([&] { load_mnist(dir.file("short"), dir.file("labels")); },
                    {dir.file("short"), "10 bytes", "16-byte header"});
  // Extra bytes are as wrong as missing ones.
  Bytes longer = idx_images(5, 28, 28, s.pixels);
  longer.push_back(0);
  write_raw(dir.file("long"), longer);
  expect_data_error([&] { load_mnist(dir.file("long"), dir.file("labels")); },
                    {dir.file("long"), "3936", "3937"});
}

TEST(MnistErrors, TruncatedOrCorruptGzip) {
  testing::TempDir dir;
  Samples s = random_samples(50, 2);
  write_gz(dir.file("images.gz"), idx_images(50, 28, 28, s.pixels));
  write_raw(dir.file("labels"), idx_labels(s.labels));
  Bytes gz = read_raw(dir.file("images.gz"));
  write_raw(dir.file("half.gz"), Bytes(gz.begin(), gz.begin() + gz.size() / 2));
  expect_data_error([&] { load_mnist(dir.file("half.gz"), dir.file("labels")); },
                    {dir.file("half.gz"), "truncated gzip"});
  expect_data_error([&] { read_file(dir.file("half.gz")); }, {dir.file("half.gz"), "truncated"});
  Bytes bad = gz;
  for (size_t i = gz.size() / 3; i < gz.size() / 3 + 64; ++i) bad[i] ^= 0x5a;
  write_raw(dir.file("bad.gz"), bad);
  expect_data_error([&] { load_mnist(dir.file("bad.gz"), dir.file("labels")); },
                    {dir.file("bad.gz"), "gzip"});
}

TEST(MnistErrors, ImageAndLabelCountsDiffer) {
  testing::TempDir dir;
  Samples s = random_samples(5, 1);
  write_raw(dir.file("images"), idx_images(5, 28, 28, s.pixels));
  write_raw(dir.file("labels"), idx_labels(Bytes(s.labels.begin(), s.labels.begin() + 4)));
  expect_data_error([&] { load_mnist(dir.file("images"), dir.file("labels")); },
                    {dir.file("images"), dir.file("labels"), "5 images", "4 labels"});
}

TEST(MnistErrors, LabelOutOfRange) {
  testing::TempDir dir;
  Samples s = random_samples(4, 1);
  write_raw(dir.file("images"), idx_images(4, 28, 28, s.pixels));
  write_raw(dir.file("labels"), idx_labels({1, 2, 11, 3}));
  expect_data_error([&] { load_mnist(dir.file("images"), dir.file("labels")); },
                    {dir.file("labels"), "label 11", "index 2", "0..9"});
}

TEST(MnistErrors, ImageSizeOutsideTheLimits) {
  testing::TempDir dir;
  Samples s = random_samples(2, 1, 27);
  write_raw(dir.file("labels"), idx_labels(s.labels));
  // 27x27 is a size like any other; a zero or huge side is a corrupt header.
  write_raw(dir.file("images"), idx_images(2, 27, 27, s.pixels));
  EXPECT_EQ(load_mnist(dir.file("images"), dir.file("labels")).sample_shape(), Shape(1, 1, 27, 27));
  write_raw(dir.file("images"), idx_images(2, 0, 27, s.pixels));
  expect_data_error([&] { load_mnist(dir.file("images"), dir.file("labels")); },
                    {dir.file("images"), "0x27", "corrupt"});
  write_raw(dir.file("images"), idx_images(2, 27, 70000, s.pixels));
  expect_data_error([&] { load_mnist(dir.file("images"), dir.file("labels")); },
                    {dir.file("images"), "27x70000", "65536"});
}

TEST(MnistErrors, EmptyFiles) {
  testing::TempDir dir;
  Samples s = random_samples(2, 1);
  write_raw(dir.file("labels"), idx_labels(s.labels));
  write_raw(dir.file("empty"), {});
  expect_data_error([&] { load_mnist(dir.file("empty"), dir.file("labels")); },
                    {dir.file("empty"), "empty", "0 bytes"});
  write_gz(dir.file("empty.gz"), {});
  expect_data_error([&] { load_mnist(dir.file("empty.gz"), dir.file("labels")); },
                    {dir.file("empty.gz"), "empty", "0 bytes"});
  write_raw(dir.file("images"), idx_images(2, 28, 28, s.pixels));
  expect_data_error([&] { load_mnist(dir.file("images"), dir.file("empty")); },
                    {dir.file("empty"), "0 bytes"});
  expect_data_error([&] { load_mnist(dir.file("images"), dir.file("absent")); },
                    {dir.file("absent"), "not found", "yann.lecun.com"});
}

TEST(MnistErrors, MissingFilesAreListed) {
  testing::TempDir dir;
  write_mnist_split(dir, "train", 2, 1, true);
  std::string msg = expect_data_error(
      [&] { load_dataset(DataFormat::kMnist, dir.path().string()); },
      {dir.path().string(), "lacks t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]",
       "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "http://yann.lecun.com/exdb/mnist/",
       "https://github.com/zalandoresearch/fashion-mnist", "dataset-fashion-mnist",
       "/usr/share/datasets/fashion-mnist", "--data DIR"});
  EXPECT_EQ(msg.find("lacks train"), std::string::npos) << msg;

  // --data naming the parent of the real directory gets pointed at it.
  testing::TempDir parent;
  fs::create_directories(parent.path() / "fashion");
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"})
    write_raw((parent.path() / "fashion" / name).string(), {});
  expect_data_error([&] { load_dataset(DataFormat::kMnist, parent.path().string()); },
                    {"use --data " + (parent.path() / "fashion").string()});
}

// A dataset file that is a directory, a FIFO, a device or a symbolic link
// loop used to be reported as missing.
TEST(MnistErrors, DataFileThatIsNotARegularFileIsNamed) {
  testing::TempDir dir;
  write_mnist_split(dir, "train", 2, 1, true);
  write_mnist_split(dir, "t10k", 2, 2, false);
  const std::string images = dir.file("t10k-images-idx3-ubyte");
  auto expect_named = [&](const std::string& why) {
    return expect_data_error([&] { load_dataset(DataFormat::kMnist, dir.path().string()); },
                             {"MNIST data file " + images + " " + why,
                              "replace it with the file t10k-images-idx3-ubyte (raw or .gz)"});
  };
  fs::remove(images);
  fs::create_directory(images);
  expect_named("is a directory, not a regular file");
  fs::remove(images);
  fs::create_symlink("/dev/null", images);
  expect_named("is a character device, not a regular file");
  fs::remove(images);
  fs::create_symlink(images, images);
  expect_named("is a symbolic link loop, not a regular file");
  fs::remove(images);
  testing::make_fifo(images);
  testing::returns_without_blocking(images, [&] { return expect_named("is a FIFO"); });
  // The loader given the path itself says the same.
  testing::returns_without_blocking(images, [&] {
    return expect_data_error([&] { load_mnist(images, dir.file("t10k-labels-idx1-ubyte")); },
                             {images + ": is a FIFO, not a regular file"});
  });
  // A .gz that is a FIFO beside no raw file is named too.
  fs::rename(images, images + ".gz");
  testing::returns_without_blocking(images + ".gz", [&] {
    return expect_data_error([&] { load_dataset(DataFormat::kMnist, dir.path().string()); },
                             {images + ".gz is a FIFO, not a regular file"});
  });
}

TEST(MnistErrors, MissingDirectory) {
  testing::TempDir dir;
  std::string absent = dir.file("no-such-dir");
  expect_data_error([&] { load_dataset(DataFormat::kMnist, absent); },
                    {absent, "does not exist", "train-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
                     "yann.lecun.com", "fashion-mnist", "--data DIR"});
  expect_data_error(
      [&] { load_dataset(DataFormat::kCifar10, absent); },
      {absent, "does not exist", "data_batch_1.bin", "test_batch.bin",
       "https://www.cs.toronto.edu/~kriz/cifar.html", "cifar-10-binary.tar.gz", "--data DIR"});
  write_raw(dir.file("a-file"), {1});
  expect_data_error([&] { load_dataset(DataFormat::kMnist, dir.file("a-file")); },
                    {dir.file("a-file"), "not a directory"});
}

TEST(CifarErrors, WrongSizeEmptyOrMissingFile) {
  testing::TempDir dir;
  Bytes b = cifar_batch(2, 0);
  b.resize(b.size() + 5);
  write_raw(dir.file("odd.bin"), b);
  expect_data_error([&] { load_cifar10({dir.file("odd.bin")}); },
                    {dir.file("odd.bin"), "6151 bytes", "3073", "30730000"});
  write_raw(dir.file("empty.bin"), {});
  expect_data_error([&] { load_cifar10({dir.file("empty.bin")}); },
                    {dir.file("empty.bin"), "empty (0 bytes)", "3073", "30730000"});
  // The size is checked for every file before any is read.
  write_raw(dir.file("good.bin"), cifar_batch(1, 0));
  expect_data_error(
      [&] {
        load_cifar10({dir.file("good.bin"), dir.file("odd.bin")});
      },
      {dir.file("odd.bin")});
  // CIFAR-100 records are one byte longer.
  write_raw(dir.file("c100.bin"), Bytes(3 * 3074, 1));
  expect_data_error([&] { load_cifar10({dir.file("c100.bin")}); }, {"9222 bytes", "CIFAR-100"});
  expect_data_error(
      [&] {
        load_cifar10({dir.file("good.bin"), dir.file("absent.bin")});
      },
      {dir.file("absent.bin"), "not found", "https://www.cs.toronto.edu/~kriz/cifar.html"});
}

TEST(CifarErrors, DataFileThatIsNotARegularFileIsNamed) {
  testing::TempDir dir;
  write_cifar_dir(dir.path() / "cifar-10-batches-bin");
  const std::string batch = (dir.path() / "cifar-10-batches-bin" / "data_batch_3.bin").string();
  fs::remove(batch);
  testing::make_fifo(batch);
  testing::returns_without_blocking(batch, [&] {
    return expect_data_error([&] { load_dataset(DataFormat::kCifar10, dir.path().string()); },
                             {"CIFAR-10 data file " + batch + " is a FIFO, not a regular file"});
  });
  testing::returns_without_blocking(batch, [&] {
    return expect_data_error([&] { load_cifar10({batch}); },
                             {batch + ": is a FIFO, not a regular file"});
  });
  fs::remove(batch);
  fs::create_directory(batch);
  expect_data_error([&] { load_dataset(DataFormat::kCifar10, dir.path().string()); },
                    {batch + " is a directory, not a regular file"});
}

TEST(CifarErrors, BadLabel) {
  testing::TempDir dir;
  Bytes b = cifar_batch(3, 0);
  b[3073] = 10;
  write_raw(dir.file("batch.bin"), b);
  expect_data_error([&] { load_cifar10({dir.file("batch.bin")}); },
                    {dir.file("batch.bin"), "image 1", "label 10", "0..9"});
}

TEST(CifarErrors, MissingFilesAreListed) {
  testing::TempDir dir;
  write_cifar_dir(dir.path());
  fs::remove(dir.path() / "data_batch_4.bin");
  fs::remove(dir.path() / "test_batch.bin");
  expect_data_error(
      [&] { load_dataset(DataFormat::kCifar10, dir.path().string()); },
      {dir.path().string(), "lacks data_batch_4.bin, test_batch.bin", "cifar-10-batches-bin",
       "cifar-10-binary.tar.gz", "https://www.cs.toronto.edu/~kriz/cifar.html", "--data DIR"});
  // The archive downloaded but not extracted.
  testing::TempDir dl;
  write_raw(dl.file("cifar-10-binary.tar.gz"), {0x1f, 0x8b});
  expect_data_error([&] { load_dataset(DataFormat::kCifar10, dl.path().string()); },
                    {"not extracted", "tar xzf cifar-10-binary.tar.gz"});
}

// ---- the real data, when it is installed ----------------------------------

namespace {

void expect_all_classes(const Dataset& d) {
  std::set<int32_t> seen;
  for (int i = 0; i < d.size(); ++i) {
    int32_t l = d.labels.data<int32_t>()[i];
    ASSERT_GE(l, 0);
    ASSERT_LE(l, 9);
    seen.insert(l);
  }
  EXPECT_EQ(seen.size(), 10u);
}

}  // namespace

TEST(RealData, FashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::is_directory(dir))
    GTEST_SKIP() << dir << " is absent (Debian package dataset-fashion-mnist)";
  DataSplits s = load_dataset(DataFormat::kMnist, dir);
  EXPECT_EQ(s.train.size(), 60000);
  EXPECT_EQ(s.test.size(), 10000);
  EXPECT_EQ(s.train.sample_shape(), Shape(1, 1, 28, 28));
  EXPECT_EQ(s.test.sample_shape(), Shape(1, 1, 28, 28));
  expect_all_classes(s.train);
  expect_all_classes(s.test);
}

TEST(RealData, MnistTestDigits) {
  testing::MnistTestFiles f = testing::mnist_test_files();
  if (f.images.empty()) GTEST_SKIP() << f.looked;
  Dataset d = load_mnist(f.images, f.labels);
  EXPECT_EQ(d.size(), 10000);
  EXPECT_EQ(d.sample_shape(), Shape(1, 1, 28, 28));
  expect_all_classes(d);
  // The well-known first digits of the MNIST test set.
  const int32_t first[5] = {7, 2, 1, 0, 4};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(d.labels.data<int32_t>()[i], first[i]);
}

}  // namespace hpmc
