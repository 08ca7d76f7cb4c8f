// The images data format and image decoding: PNG, JPEG and BMP files written
// by the tests (stb_image_write), grey and RGB, flat folders, class folders,
// train/ and test/ splits and data.test_fraction's split; conversion of
// channels and size; and every kind of bad file (empty, not an image,
// truncated, corrupt, an empty class folder, mixed sizes) as a one-line
// DataError naming the file. The probe is checked against the load.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#define STBI_WRITE_NO_STDIO
#include <stb_image_write.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "io/image_decode.h"
#include "testing.h"

namespace hpmc {
namespace {

namespace fs = std::filesystem;
using Pixels = std::vector<uint8_t>;

void append(void* ctx, void* data, int size) {
  static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size_t(size));
}

std::string png(int w, int h, int c, const Pixels& px) {
  std::string out;
  EXPECT_TRUE(stbi_write_png_to_func(append, &out, w, h, c, px.data(), w * c));
  return out;
}
std::string jpeg(int w, int h, int c, const Pixels& px, int quality = 95) {
  std::string out;
  EXPECT_TRUE(stbi_write_jpg_to_func(append, &out, w, h, c, px.data(), quality));
  return out;
}
std::string bmp(int w, int h, int c, const Pixels& px) {
  std::string out;
  EXPECT_TRUE(stbi_write_bmp_to_func(append, &out, w, h, c, px.data()));
  return out;
}

// An interleaved w×h×c test pattern; `seed` tells images apart.
Pixels pattern(int w, int h, int c, int seed) {
  Pixels p(size_t(w) * h * c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        p[(size_t(y) * w + x) * c + k] = uint8_t((x * 7 + y * 13 + k * 50 + seed * 31) % 256);
  return p;
}

// A smooth pattern (JPEG keeps it to within a few levels).
Pixels smooth(int w, int h, int c, int seed) {
  Pixels p(size_t(w) * h * c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        p[(size_t(y) * w + x) * c + k] = uint8_t(40 + 4 * x + 3 * y + 20 * k + seed);
  return p;
}

// The pattern as the C×H×W planes a dataset holds.
Pixels chw(int w, int h, int c, const Pixels& hwc) {
  Pixels out(hwc.size());
  for (int k = 0; k < c; ++k)
    for (int i = 0; i < w * h; ++i) out[size_t(k) * w * h + i] = hwc[size_t(i) * c + k];
  return out;
}

void spit(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

using testing::expect_data_error;

DataOptions opts(int h = 0, int w = 0, int c = 0, double fraction = 0, uint64_t seed = 1) {
  DataOptions o;
  o.height = h, o.width = w, o.channels = c, o.test_fraction = fraction, o.split_seed = seed;
  return o;
}

// ---- decoding ---------------------------------------------------------------------------

TEST(ImageDecode, PngAndBmpRoundTripExactlyGreyAndRgb) {
  for (int c : {1, 3, 4}) {
    const Pixels px = pattern(6, 5, c, c);
    DecodedImage a = decode_image(png(6, 5, c, px), "a.png");
    EXPECT_EQ(a.width, 6);
    EXPECT_EQ(a.height, 5);
    EXPECT_EQ(a.channels, c);
    EXPECT_EQ(a.pixels, px) << c << " channels";
    ImageHeader h = image_header(png(6, 5, c, px), "a.png");
    EXPECT_EQ(h.kind, ImageKind::kPng);
    EXPECT_EQ(h.channels, c);
    if (c != 4) {
      DecodedImage b = decode_image(bmp(6, 5, c, px), "a.bmp");
      EXPECT_EQ(b.height, 5);
      EXPECT_EQ(b.width, 6);
      // stb writes BMPs as 24-bit colour: grey comes back as RGB.
      EXPECT_EQ(b.channels, 3);
      for (size_t i = 0; i < size_t(30); ++i) EXPECT_EQ(b.pixels[i * b.channels], px[i * c]) << i;
    }
  }
}

TEST(ImageDecode, JpegDecodesCloseToTheOriginal) {
  for (int c : {1, 3}) {
    const Pixels px = smooth(16, 12, c, 3);
    DecodedImage d = decode_image(jpeg(16, 12, c, px), "a.jpg");
    ASSERT_EQ(d.width, 16);
    ASSERT_EQ(d.height, 12);
    ASSERT_EQ(d.channels, 3);  // stb writes grey as a colour JPEG
    Pixels back(px.size());
    to_chw(d, c, 12, 16, back.data());
    const Pixels want = chw(16, 12, c, px);
    double err = 0;
    for (size_t i = 0; i < px.size(); ++i) err += std::abs(int(back[i]) - int(want[i]));
    EXPECT_LT(err / double(px.size()), 3.0) << c << " channels";
  }
}

TEST(ImageDecode, ChannelConversionIsTheDocumentedLuma) {
  DecodedImage rgba;
  rgba.width = 3, rgba.height = 1, rgba.channels = 4;
  rgba.pixels = {255, 0, 0, 9, 0, 255, 0, 9, 10, 200, 30, 0};
  uint8_t grey[3];
  to_chw(rgba, 1, 1, 3, grey);
  EXPECT_EQ(grey[0], (299 * 255 + 500) / 1000);
  EXPECT_EQ(grey[1], (587 * 255 + 500) / 1000);
  EXPECT_EQ(grey[2], (299 * 10 + 587 * 200 + 114 * 30 + 500) / 1000);
  uint8_t rgb[9];
  to_chw(rgba, 3, 1, 3, rgb);  // alpha dropped, planes R, G, B
  EXPECT_EQ(Pixels(rgb, rgb + 9), (Pixels{255, 0, 10, 0, 255, 200, 0, 0, 30}));
  DecodedImage g;
  g.width = 2, g.height = 1, g.channels = 2;  // grey + alpha
  g.pixels = {7, 0, 250, 255};
  uint8_t out[6];
  to_chw(g, 3, 1, 2, out);
  EXPECT_EQ(Pixels(out, out + 6), (Pixels{7, 250, 7, 250, 7, 250}));
}

TEST(ImageDecode, ResizeIsAntialiasedBilinear) {
  // A constant image stays constant at any size.
  DecodedImage k;
  k.width = 7, k.height = 5, k.channels = 1;
  k.pixels.assign(35, 77);
  Pixels up(13 * 11), down(3 * 2);
  to_chw(k, 1, 11, 13, up.data());
  to_chw(k, 1, 2, 3, down.data());
  for (uint8_t v : up) EXPECT_EQ(v, 77);
  for (uint8_t v : down) EXPECT_EQ(v, 77);
  // A checkerboard shrunk by 4 averages to mid-grey (nearest would keep 0 or 255).
  DecodedImage cb;
  cb.width = 16, cb.height = 16, cb.channels = 1;
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x) cb.pixels.push_back((x + y) % 2 ? 255 : 0);
  Pixels small(16);
  to_chw(cb, 1, 4, 4, small.data());
  for (uint8_t v : small) EXPECT_NEAR(int(v), 128, 20);
  // A horizontal ramp stays a ramp when enlarged.
  DecodedImage ramp;
  ramp.width = 4, ramp.height = 1, ramp.channels = 1;
  ramp.pixels = {0, 80, 160, 240};
  Pixels wide(8);
  to_chw(ramp, 1, 1, 8, wide.data());
  EXPECT_TRUE(std::is_sorted(wide.begin(), wide.end()));
  EXPECT_LT(wide.front(), 40);
  EXPECT_GT(wide.back(), 200);
}

TEST(ImageDecode, BadFilesAreOneLineErrorsNamingTheFile) {
  const std::string good_png = png(8, 8, 3, pattern(8, 8, 3, 1));
  const std::string good_jpg = jpeg(32, 32, 3, smooth(32, 32, 3, 1));
  const std::string good_bmp = bmp(8, 8, 3, pattern(8, 8, 3, 1));
  expect_data_error([] { decode_image("", "e.png"); }, {"e.png", "empty"});
  expect_data_error([] { decode_image("hello, world\n", "t.png"); },
             {"t.png", "not a PNG, JPEG or BMP image", "text starting 'hello"});
  expect_data_error([] { decode_image("GIF89a\x01\x00\x01\x00", "g.png"); }, {"g.png", "a GIF image"});
  // Cut in the middle of the image data, and just before IEND.
  expect_data_error([&] { decode_image(good_png.substr(0, good_png.size() / 2), "cut.png"); },
             {"cut.png", "truncated PNG"});
  expect_data_error([&] { decode_image(good_png.substr(0, good_png.size() - 12), "noend.png"); },
             {"noend.png", "truncated PNG", "IEND"});
  // A flipped bit inside the compressed data: the CRC catches it.
  std::string flipped = good_png;
  const size_t idat = flipped.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  flipped[idat + 10] = char(flipped[idat + 10] ^ 0x10);
  expect_data_error([&] { decode_image(flipped, "crc.png"); }, {"crc.png", "corrupt PNG", "CRC", "IDAT"});
  expect_data_error([&] { decode_image(good_jpg.substr(0, good_jpg.size() * 2 / 3), "cut.jpg"); },
             {"cut.jpg", "truncated JPEG"});
  expect_data_error([&] { decode_image(good_jpg.substr(0, 100), "head.jpg"); }, {"head.jpg", "JPEG"});
  expect_data_error([&] { decode_image(good_bmp.substr(0, good_bmp.size() - 10), "cut.bmp"); },
             {"cut.bmp", "truncated BMP"});
  // More pixels than allowed: refused from the header, before decoding.
  expect_data_error([&] { decode_image(good_png, "big.png", 63); }, {"big.png", "8x8", "63"});
  // The files themselves: missing, a directory.
  testing::TempDir dir;
  expect_data_error([&] { read_image_bytes(dir.file("absent.png")); }, {"absent.png", "no such"});
  expect_data_error([&] { read_image_bytes(dir.path().string()); }, {"is a directory"});
}

// A progressive 8×8 grey JPEG written byte by byte: a first DC scan with
// DC table 0 and an AC scan (coefficients 1-63) with AC table 0. Both tables
// hold one 1-bit code for symbol 0 (a DC difference of 0; an end of band), so
// each scan's data is the bit 0 padded with ones, and every pixel is 128.
// The AC scan names DC table `ac_scan_dc` (an AC scan never decodes with it).
std::string progressive_grey(int first_dc = 0, int ac_scan_dc = 3, int ac_scan_ac = 0) {
  std::string j = "\xFF\xD8";
  j += std::string("\xFF\xDB\x00\x43\x00", 5) + std::string(64, '\x01');  // DQT 0: all ones
  j += std::string("\xFF\xC2\x00\x0B\x08\x00\x08\x00\x08\x01\x01\x11\x00", 13);  // SOF2
  const auto dht = [](int cls) {
    std::string t = std::string("\xFF\xC4\x00\x14", 4) + char(cls << 4) + '\x01';
    return t + std::string(15, '\0') + '\0';  // counts: one 1-bit code; value 0
  };
  const auto sos = [](int td, int ta, int ss, int se) {
    return std::string("\xFF\xDA\x00\x08\x01\x01", 6) + char(td << 4 | ta) + char(ss) + char(se) +
           '\0' + '\x7F';
  };
  j += dht(0) + sos(first_dc, 0, 0, 0);
  j += dht(1) + sos(ac_scan_dc, ac_scan_ac, 1, 63);
  return j + "\xFF\xD9";
}

// stb_image 2.27 decodes with Huffman tables it does not check: a scan may
// name one no segment defined (stb reads uninitialised memory and indexes
// past its arrays) and a table of more than 256 codes is built past them.
// hpmc refuses both before stb sees the file, and still reads progressive
// files whose AC scans name a DC table never defined (they never use it).
TEST(ImageDecode, JpegHuffmanTablesAreCheckedBeforeDecoding) {
  const DecodedImage prog = decode_image(progressive_grey(), "p.jpg");
  ASSERT_EQ(prog.width, 8);
  ASSERT_EQ(prog.height, 8);
  ASSERT_EQ(prog.channels, 1);
  EXPECT_EQ(prog.pixels, Pixels(64, 128));
  expect_data_error([] { decode_image(progressive_grey(2), "dc.jpg"); },
                    {"dc.jpg", "corrupt JPEG", "component 1", "DC Huffman table 2"});
  expect_data_error([] { decode_image(progressive_grey(0, 3, 1), "ac.jpg"); },
                    {"ac.jpg", "corrupt JPEG", "AC Huffman table 1"});

  const std::string good = jpeg(32, 32, 3, smooth(32, 32, 3, 1));
  ASSERT_NO_THROW(decode_image(good, "good.jpg"));
  const size_t sos = good.find("\xFF\xDA"), dht = good.find("\xFF\xC4");
  ASSERT_NE(sos, std::string::npos);
  ASSERT_NE(dht, std::string::npos);
  // The baseline scan's first component (selectors at sos + 6) with DC table
  // 2 or AC table 3, neither of which stb_image_write defines.
  std::string bad = good;
  bad[sos + 6] = '\x20';
  expect_data_error([&] { image_header(bad, "dc2.jpg"); },
                    {"dc2.jpg", "corrupt JPEG", "scan at byte", "DC Huffman table 2"});
  bad[sos + 6] = '\x03';
  expect_data_error([&] { decode_image(bad, "ac3.jpg"); }, {"ac3.jpg", "AC Huffman table 3"});
  // The first table's code counts (dht + 5 to dht + 20) made 200 codes of 8
  // bits and 67 of 16: 267 codes, a prefix code still (stb would build it).
  bad = good;
  ASSERT_EQ(bad[dht + 4], '\0');  // DC table 0 first
  for (int k = 1; k <= 16; ++k) bad[dht + 4 + k] = k == 8 ? char(200) : k == 16 ? char(67) : '\0';
  expect_data_error([&] { decode_image(bad, "big.jpg"); },
                    {"big.jpg", "corrupt JPEG", "DC Huffman table 0", "267 codes", "256"});
  // A segment length past the end of the file.
  bad = good.substr(0, dht + 2) + "\xFF\xF0" + good.substr(dht + 4);
  expect_data_error([&] { decode_image(bad, "long.jpg"); },
                    {"long.jpg", "truncated JPEG", "FFC4 segment at byte"});
}

// ---- the images format --------------------------------------------------------------------

// class folders b_dog (3 images) and a_cat (2), grey 6x5 PNGs, under `root`.
void write_classes(const fs::path& root, int seed = 0) {
  for (int i = 0; i < 3; ++i)
    spit(root / "b_dog" / str("d", i, ".png"), png(6, 5, 1, pattern(6, 5, 1, seed + i)));
  for (int i = 0; i < 2; ++i)
    spit(root / "a_cat" / str("c", i, ".png"), png(6, 5, 1, pattern(6, 5, 1, seed + 10 + i)));
}

TEST(ImageFolder, FlatFolderIsUnlabelledInSortedOrder) {
  testing::TempDir t;
  const fs::path root = t.path() / "flat";
  spit(root / "b.png", png(6, 5, 1, pattern(6, 5, 1, 2)));
  spit(root / "a.png", png(6, 5, 1, pattern(6, 5, 1, 1)));
  spit(root / "c.PNG", png(6, 5, 1, pattern(6, 5, 1, 3)));
  spit(root / ".DS_Store", "not an image, but hidden");
  DataSplits s = load_dataset(DataFormat::kImages, root.string(), opts());
  ASSERT_EQ(s.train.size(), 3);
  EXPECT_EQ(s.test.size(), 0);
  EXPECT_EQ(s.train.sample_shape(), Shape(1, 1, 5, 6));
  EXPECT_EQ(s.train.num_classes, 0);
  EXPECT_FALSE(s.train.labelled());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.train.labels.data<int32_t>()[i], -1);
    EXPECT_EQ(s.train.files[size_t(i)], (root / std::string(1, "abc"[i])).string() + (i == 2 ? ".PNG" : ".png"));
    const Pixels want = chw(6, 5, 1, pattern(6, 5, 1, i + 1));
    EXPECT_EQ(std::memcmp(s.train.images.data<uint8_t>() + i * 30, want.data(), 30), 0) << i;
  }
  DataProbe p = probe_dataset(DataFormat::kImages, root.string(), opts());
  EXPECT_EQ(p.sample, Shape(1, 1, 5, 6));
  EXPECT_EQ(p.num_classes, 0);
  EXPECT_EQ(p.train, 3u);
  EXPECT_EQ(p.test, 0u);
  // A command that reads only the test split has none to read.
  expect_data_error([&] { load_dataset(DataFormat::kImages, root.string(), opts(), Splits::kTest); },
             {root.string(), "no test split", "data.test_fraction"});
}

TEST(ImageFolder, ClassFoldersAreLabelledBySortedNameAndWalked) {
  testing::TempDir t;
  const fs::path root = t.path() / "classes";
  write_classes(root);
  // A sub-directory inside a class folder belongs to the class.
  spit(root / "a_cat" / "more" / "c9.png", png(6, 5, 1, pattern(6, 5, 1, 19)));
  DataSplits s = load_dataset(DataFormat::kImages, root.string(), opts());
  ASSERT_EQ(s.train.size(), 6);
  EXPECT_EQ(s.train.num_classes, 2);
  EXPECT_EQ(s.train.class_names, (std::vector<std::string>{"a_cat", "b_dog"}));
  const std::vector<int32_t> want = {0, 0, 0, 1, 1, 1};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s.train.labels.data<int32_t>()[i], want[size_t(i)]) << i;
  EXPECT_EQ(s.train.files[2], (root / "a_cat" / "more" / "c9.png").string());
  const Pixels d0 = chw(6, 5, 1, pattern(6, 5, 1, 0));
  EXPECT_EQ(std::memcmp(s.train.images.data<uint8_t>() + 3 * 30, d0.data(), 30), 0);
  DataProbe p = probe_dataset(DataFormat::kImages, root.string(), opts());
  EXPECT_EQ(p.num_classes, 2);
  EXPECT_EQ(p.train, 6u);
}

TEST(ImageFolder, TrainAndTestDirectoriesRgbJpegAndBmp) {
  testing::TempDir t;
  const fs::path root = t.path() / "split";
  for (const char* split : {"train", "test"})
    for (const char* cls : {"x", "y"}) {
      spit(root / split / cls / "1.jpg", jpeg(8, 8, 3, smooth(8, 8, 3, 1)));
      spit(root / split / cls / "2.bmp", bmp(8, 8, 3, pattern(8, 8, 3, 2)));
    }
  spit(root / "train" / "y" / "3.jpeg", jpeg(8, 8, 3, smooth(8, 8, 3, 3)));
  DataSplits s = load_dataset(DataFormat::kImages, root.string(), opts());
  EXPECT_EQ(s.train.size(), 5);
  EXPECT_EQ(s.test.size(), 4);
  EXPECT_EQ(s.train.sample_shape(), Shape(1, 3, 8, 8));
  EXPECT_EQ(s.test.num_classes, 2);
  EXPECT_EQ(s.test.labels.data<int32_t>()[3], 1);
  const Pixels b = chw(8, 8, 3, pattern(8, 8, 3, 2));
  EXPECT_EQ(std::memcmp(s.test.images.data<uint8_t>() + 192, b.data(), 192), 0);
  // Only the test split: the training images are not decoded (the first
  // one's header gives the shape).
  spit(root / "train" / "x" / "zbad.png", "broken");
  DataSplits only = load_dataset(DataFormat::kImages, root.string(), opts(), Splits::kTest);
  EXPECT_EQ(only.test.size(), 4);
  EXPECT_EQ(only.train.size(), 0);
  expect_data_error([&] { load_dataset(DataFormat::kImages, root.string(), opts()); },
             {"zbad.png", "not a PNG"});
  fs::remove(root / "train" / "x" / "zbad.png");
  // Different class folders in the two splits.
  fs::create_directories(root / "test" / "z");
  spit(root / "test" / "z" / "1.png", png(8, 8, 3, pattern(8, 8, 3, 1)));
  expect_data_error([&] { load_dataset(DataFormat::kImages, root.string(), opts()); },
             {(root / "test").string(), "'z'", "same class folders"});
}

TEST(ImageFolder, TestFractionIsAStratifiedSeededSplit) {
  testing::TempDir t;
  const fs::path root = t.path() / "frac";
  for (int i = 0; i < 10; ++i) spit(root / "a" / str(i, ".png"), png(4, 4, 1, pattern(4, 4, 1, i)));
  for (int i = 0; i < 20; ++i) spit(root / "b" / str(i, ".png"), png(4, 4, 1, pattern(4, 4, 1, i)));
  DataSplits s = load_dataset(DataFormat::kImages, root.string(), opts(0, 0, 0, 0.3, 5));
  ASSERT_EQ(s.test.size(), 9);  // 3 of a, 6 of b
  ASSERT_EQ(s.train.size(), 21);
  int test_a = 0;
  for (int i = 0; i < 9; ++i) test_a += s.test.labels.data<int32_t>()[i] == 0;
  EXPECT_EQ(test_a, 3);
  // Each split keeps the files' order, and together they are every file once.
  std::vector<std::string> all = s.train.files;
  all.insert(all.end(), s.test.files.begin(), s.test.files.end());
  EXPECT_TRUE(std::is_sorted(s.train.files.begin(), s.train.files.end()));
  EXPECT_TRUE(std::is_sorted(s.test.files.begin(), s.test.files.end()));
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  EXPECT_EQ(all.size(), 30u);
  // The same seed gives the same split, another seed another one.
  DataSplits again = load_dataset(DataFormat::kImages, root.string(), opts(0, 0, 0, 0.3, 5));
  EXPECT_EQ(again.test.files, s.test.files);
  DataSplits other = load_dataset(DataFormat::kImages, root.string(), opts(0, 0, 0, 0.3, 6));
  EXPECT_NE(other.test.files, s.test.files);
  DataProbe p = probe_dataset(DataFormat::kImages, root.string(), opts(0, 0, 0, 0.3, 5));
  EXPECT_EQ(p.train, 21u);
  EXPECT_EQ(p.test, 9u);
  // Too small a fraction leaves no test samples.
  expect_data_error([&] { load_dataset(DataFormat::kImages, root.string(), opts(0, 0, 0, 0.01)); },
             {"data.test_fraction 0.01", "no test samples"});
  // A test/ directory and a fraction are one split too many.
  const fs::path both = t.path() / "both";
  write_classes(both / "train");
  write_classes(both / "test");
  expect_data_error([&] { load_dataset(DataFormat::kImages, both.string(), opts(0, 0, 0, 0.5)); },
             {both.string(), "test/", "data.test_fraction"});
}

TEST(ImageFolder, MixedSizesNeedDataSize) {
  testing::TempDir t;
  const fs::path root = t.path() / "mixed";
  spit(root / "a.png", png(6, 5, 1, pattern(6, 5, 1, 1)));
  spit(root / "b.png", png(6, 5, 1, pattern(6, 5, 1, 2)));
  spit(root / "c.png", png(9, 7, 1, pattern(9, 7, 1, 3)));
  spit(root / "d.png", png(3, 3, 1, pattern(3, 3, 1, 4)));
  expect_data_error([&] { load_dataset(DataFormat::kImages, root.string(), opts()); },
             {(root / "c.png").string(), "1x7x9 (CxHxW)", (root / "a.png").string(), "1x5x6",
              "data.size"});
  // With data.size every image is resized to it.
  DataSplits s = load_dataset(DataFormat::kImages, root.string(), opts(10, 12));
  EXPECT_EQ(s.train.images.shape(), Shape(4, 1, 10, 12));
  DataProbe p = probe_dataset(DataFormat::kImages, root.string(), opts(10, 12));
  EXPECT_EQ(p.sample, Shape(1, 1, 10, 12));
}

TEST(ImageFolder, MixedChannelsNeedDataChannels) {
  testing::TempDir t;
  const fs::path root = t.path() / "mixed";
  spit(root / "a.png", png(4, 4, 1, pattern(4, 4, 1, 1)));
  spit(root / "b.png", png(4, 4, 3, pattern(4, 4, 3, 2)));
  expect_data_error([&] { load_dataset(DataFormat::kImages, root.string(), opts()); },
             {(root / "b.png").string(), "colour", "grey", "data.channels"});
  DataSplits grey = load_dataset(DataFormat::kImages, root.string(), opts(0, 0, 1));
  EXPECT_EQ(grey.train.images.shape(), Shape(2, 1, 4, 4));
  DataSplits rgb = load_dataset(DataFormat::kImages, root.string(), opts(0, 0, 3));
  EXPECT_EQ(rgb.train.images.shape(), Shape(2, 3, 4, 4));
  // Grey to RGB: the three planes of image a are its grey plane.
  const Pixels a = pattern(4, 4, 1, 1);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(std::memcmp(rgb.train.images.data<uint8_t>() + k * 16, a.data(), 16), 0) << k;
}

TEST(ImageFolder, BadFoldersAndFilesAreNamed) {
  testing::TempDir t;
  const fs::path empty = t.path() / "empty";
  fs::create_directories(empty);
  expect_data_error([&] { load_dataset(DataFormat::kImages, empty.string(), opts()); },
             {empty.string(), "holds no images"});
  expect_data_error([&] { probe_dataset(DataFormat::kImages, (t.path() / "absent").string(), opts()); },
             {"absent", "does not exist"});

  const fs::path classes = t.path() / "classes";
  write_classes(classes);
  fs::create_directories(classes / "c_empty");
  expect_data_error([&] { load_dataset(DataFormat::kImages, classes.string(), opts()); },
             {(classes / "c_empty").string(), "holds no images"});
  fs::remove(classes / "c_empty");

  spit(classes / "notes.txt", "a file beside the class folders");
  expect_data_error([&] { load_dataset(DataFormat::kImages, classes.string(), opts()); },
             {classes.string(), "mixes image files", "notes.txt", "a_cat"});
  fs::remove(classes / "notes.txt");
  spit(classes / "a_cat" / "notes.txt", "not an image");
  expect_data_error([&] { load_dataset(DataFormat::kImages, classes.string(), opts()); },
             {(classes / "a_cat" / "notes.txt").string(), "not an image file name"});
  fs::remove(classes / "a_cat" / "notes.txt");

  // The probe reads the first image's header only; the load decodes every
  // file and names the first bad one in file order, whatever the threads.
  const fs::path many = t.path() / "many";
  for (int i = 0; i < 40; ++i)
    spit(many / str("img", i < 10 ? "0" : "", i, ".png"), png(5, 5, 1, pattern(5, 5, 1, i)));
  const std::string good = png(5, 5, 1, pattern(5, 5, 1, 0));
  spit(many / "img31.png", good.substr(0, good.size() - 20));
  spit(many / "img07.png", "");
  spit(many / "img12.png", "this is text, not a PNG");
  EXPECT_EQ(probe_dataset(DataFormat::kImages, many.string(), opts()).train, 40u);
  expect_data_error([&] { load_dataset(DataFormat::kImages, many.string(), opts()); },
             {(many / "img07.png").string(), "empty"});
  spit(many / "img07.png", good);
  expect_data_error([&] { load_dataset(DataFormat::kImages, many.string(), opts()); },
             {(many / "img12.png").string(), "not a PNG, JPEG or BMP"});
  spit(many / "img12.png", good);
  expect_data_error([&] { load_dataset(DataFormat::kImages, many.string(), opts()); },
             {(many / "img31.png").string(), "truncated PNG"});
  spit(many / "img31.png", good);
  size_t last_done = 0, last_total = 0;
  DataSplits s = load_dataset(DataFormat::kImages, many.string(), opts(), Splits::kBoth,
                              [&](size_t done, size_t total) {
                                EXPECT_GE(done, last_done);
                                last_done = done, last_total = total;
                              });
  EXPECT_EQ(s.train.size(), 40);
  EXPECT_EQ(last_done, 40u);
  EXPECT_EQ(last_total, 40u);
}

TEST(ImageFiles, ListAndLoadToATarget) {
  testing::TempDir t;
  spit(t.path() / "dir" / "b.png", png(6, 4, 3, pattern(6, 4, 3, 2)));
  spit(t.path() / "dir" / "sub" / "a.bmp", bmp(6, 4, 3, pattern(6, 4, 3, 1)));
  spit(t.path() / "one.png", png(6, 4, 1, pattern(6, 4, 1, 5)));
  const std::vector<std::string> files =
      list_image_files({t.file("one.png"), (t.path() / "dir").string()});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], t.file("one.png"));
  EXPECT_EQ(files[1], (t.path() / "dir" / "b.png").string());
  EXPECT_EQ(files[2], (t.path() / "dir" / "sub" / "a.bmp").string());

  ImageTarget model;
  model.channels = 1, model.height = 4, model.width = 6;
  model.origin = "the model's input";
  model.hint = "give images of that shape";
  expect_data_error([&] { load_image_files(files, model); },
             {files[1], "colour", "the model's input", "give images of that shape"});
  model.convert_channels = true;
  Dataset d = load_image_files(files, model);
  EXPECT_EQ(d.images.shape(), Shape(3, 1, 4, 6));
  EXPECT_EQ(d.files, files);
  EXPECT_EQ(d.num_classes, 0);
  model.height = 8;
  expect_data_error([&] { load_image_files(files, model); }, {files[0], "1x4x6", "1x8x6"});
  model.resize = true;
  EXPECT_EQ(load_image_files(files, model).images.shape(), Shape(3, 1, 8, 6));

  expect_data_error([&] { list_image_files({t.file("nope.png")}); }, {"nope.png", "no such"});
  fs::create_directories(t.path() / "hollow");
  expect_data_error([&] { list_image_files({(t.path() / "hollow").string()}); },
             {"hollow", "holds no images"});
  spit(t.path() / "x.txt", "text");
  expect_data_error([&] { list_image_files({t.file("x.txt")}); }, {"x.txt", "not an image file name"});
}

TEST(SplitByFraction, RoundsPerClassAndRefusesEmptySplits) {
  std::vector<int32_t> labels;
  for (int i = 0; i < 7; ++i) labels.push_back(i % 2);  // 4 of class 0, 3 of class 1
  SplitIndices s = split_by_fraction(labels.data(), 7, 0.5, 3, "x");
  EXPECT_EQ(s.test.size(), 4u);  // round(2) + round(1.5) = 2 + 2
  EXPECT_EQ(s.train.size(), 3u);
  EXPECT_TRUE(std::is_sorted(s.test.begin(), s.test.end()));
  std::vector<int32_t> none(5, -1);
  expect_data_error([&] { split_by_fraction(none.data(), 5, 0.05, 1, "tiny"); }, {"tiny", "no test"});
  expect_data_error([&] { split_by_fraction(none.data(), 2, 0.9, 1, "tiny"); }, {"no training"});
}

}  // namespace
}  // namespace hpmc
