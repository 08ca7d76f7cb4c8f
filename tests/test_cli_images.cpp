// End to end through the hpmc binary: a small autoencoder trained on a
// generated folder of 20x24 grey PNGs in class sub-folders (the model's input
// shape comes from the images), evaluated, `hpmc recon --images` on some of
// the files and `hpmc features --images` on a folder; a config built for
// another size with data.size; the one-line errors of a classifier on
// unlabelled images, a layer that cannot take the images' shape, and image
// files the model cannot take.
#include <algorithm>
#include <filesystem>
#include <fstream>

#define STBI_WRITE_NO_STDIO
#include <stb_image_write.h>

#include "cli_runner.h"
#include "testing.h"

namespace hpmc {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::run_hpmc;

void append(void* ctx, void* data, int size) {
  static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size_t(size));
}

// A w×h PNG of `c` channels: a blob whose place depends on the class, plus
// a little per-image texture.
void write_png(const fs::path& p, int w, int h, int c, int cls, int seed) {
  std::vector<uint8_t> px(size_t(w) * h * c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const int cx = 4 + cls * 7, cy = 6 + cls * 3;
      const int d2 = (x - cx) * (x - cx) + (y - cy) * (y - cy);
      const int v = (d2 < 20 ? 200 : 30) + (x * 3 + y * 5 + seed * 11) % 17;
      for (int k = 0; k < c; ++k) px[(size_t(y) * w + x) * c + k] = uint8_t(v);
    }
  std::string bytes;
  ASSERT_TRUE(stbi_write_png_to_func(append, &bytes, w, h, c, px.data(), w * c));
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

// root/{train,test}/{circle,square,tri}/N.png, 20 high and 24 wide.
void write_folder(const fs::path& root, int train_per_class, int test_per_class) {
  const char* classes[] = {"circle", "square", "tri"};
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < train_per_class; ++i)
      write_png(root / "train" / classes[k] / (std::to_string(i) + ".png"), 24, 20, 1, k, i);
    for (int i = 0; i < test_per_class; ++i)
      write_png(root / "test" / classes[k] / (std::to_string(i) + ".png"), 24, 20, 1, k, 100 + i);
  }
}

std::string ae_config(const std::string& name, const std::string& data, const fs::path& out) {
  return "name: " + name + "\ndata: " + data +
         "\nmodel:\n  loss: mse\n  features: pool1\n  layers:\n"
         "    - {name: conv1, type: conv2d, out_channels: 4, kernel: 3, padding: 1}\n"
         "    - {name: relu1, type: relu}\n"
         "    - {name: pool1, type: maxpool2d, kernel: 2}\n"
         "    - {name: up1, type: upsample2d, scale: 2}\n"
         "    - {name: conv2, type: conv2d, out_channels: 1, kernel: 3, padding: 1}\n"
         "training: {epochs: 2, batch_size: 8, lr: 0.05, momentum: 0.9, seed: 1}\n"
         "output: {dir: " + (out / "run").string() + ", weights_dir: " + (out / "w").string() +
         ", recon_count: 4}\n";
}

fs::path write_config(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
  return p;
}

// A PNG's width and height, from its IHDR chunk.
std::pair<int, int> png_size(const fs::path& p) {
  const std::string b = testing::slurp(p.string());
  if (b.size() < 24) return {0, 0};
  auto be = [&](size_t at) {
    return int(uint8_t(b[at])) << 24 | int(uint8_t(b[at + 1])) << 16 |
           int(uint8_t(b[at + 2])) << 8 | int(uint8_t(b[at + 3]));
  };
  return {be(16), be(20)};
}

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

TEST(CliImages, TrainOnAnImageFolderThenReconstructFiles) {
  testing::TempDir t;
  const fs::path root = t.path() / "shapes";
  write_folder(root, 12, 3);
  const fs::path cfg =
      write_config(t.path() / "ae.yaml", ae_config("img_ae", "{format: images, path: " +
                                                                 root.string() + "}",
                                                   t.path()));
  CliResult r = run_hpmc("run " + cfg.string() + " --progress lines");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const char* s : {"1x20x24 -> 4x20x24", "data: images from", "(1x20x24, 3 classes)",
                        "36 train, 9 test samples", "epoch 2/2", "test loss"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  EXPECT_TRUE(fs::exists(t.path() / "run" / "recon.png"));
  const std::string weights = (t.path() / "w" / "img_ae.safetensors").string();

  CliResult e = run_hpmc("eval " + cfg.string() + " --weights " + weights);
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("(9 samples)"), std::string::npos) << e.out;

  // recon --images: a directory and a file, 4 images of 20x24 upscaled 4x.
  CliResult rc = run_hpmc("recon " + cfg.string() + " --weights " + weights + " --images " +
                          (root / "test" / "circle").string() + " " +
                          (root / "train" / "tri" / "0.png").string() + " --out " +
                          (t.path() / "r").string());
  ASSERT_EQ(rc.code, 0) << rc.out << rc.err;
  EXPECT_NE(rc.out.find("images: 4 files"), std::string::npos) << rc.out;
  EXPECT_NE(rc.out.find("4 images (top) above their reconstructions"), std::string::npos)
      << rc.out;
  const auto [w, h] = png_size(t.path() / "r" / "recon.png");
  EXPECT_EQ(w, 4 * 24 * 4 + 5 * 2);
  EXPECT_EQ(h, 2 * 20 * 4 + 2 + 2 * 2);

  // Images the model cannot take: RGB of another size, no conversion asked for.
  write_png(t.path() / "big.png", 30, 30, 3, 0, 0);
  CliResult bad = run_hpmc("recon " + cfg.string() + " --weights " + weights + " --images " +
                           (t.path() / "big.png").string());
  EXPECT_EQ(bad.code, 4) << bad.out << bad.err;
  EXPECT_EQ(lines(bad.err), 1) << bad.err;
  for (const char* s : {"big.png", "colour", "the model's input", "1x20x24", "data.channels"})
    EXPECT_NE(bad.err.find(s), std::string::npos) << s << ": " << bad.err;
  // ... which data.size and data.channels convert.
  CliResult conv = run_hpmc("recon " + cfg.string() + " --weights " + weights + " --images " +
                            (t.path() / "big.png").string() + " --set data.size=[20,24]" +
                            " --set data.channels=1 --out " + (t.path() / "r2").string());
  EXPECT_EQ(conv.code, 0) << conv.out << conv.err;
  EXPECT_TRUE(fs::exists(t.path() / "r2" / "recon.png"));

  CliResult both = run_hpmc("recon " + cfg.string() + " --weights " + weights +
                            " --count 2 --images " + (t.path() / "big.png").string());
  EXPECT_EQ(both.code, 2) << both.err;
  EXPECT_NE(both.err.find("--count"), std::string::npos) << both.err;
  CliResult none = run_hpmc("recon " + cfg.string() + " --weights " + weights + " --images " +
                            (t.path() / "absent").string());
  EXPECT_EQ(none.code, 4) << none.err;
  EXPECT_NE(none.err.find("absent: no such image file or directory"), std::string::npos)
      << none.err;
}

// features --images: the rows are keyed by the files' names, in the order
// the files were listed; a directory of the test split gives the very
// features of the test split's export (the same files, in the same order).
TEST(CliImages, FeaturesOfImageFilesAreKeyedByName) {
  testing::TempDir t;
  const fs::path root = t.path() / "shapes";
  write_folder(root, 4, 2);
  const fs::path cfg =
      write_config(t.path() / "ae.yaml", ae_config("img_ae", "{format: images, path: " +
                                                                 root.string() + "}",
                                                   t.path()));
  CliResult r = run_hpmc("run " + cfg.string() + " --epochs 1 --progress quiet");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string weights = (t.path() / "w" / "img_ae.safetensors").string();
  const fs::path out = t.path() / "f";

  CliResult split = run_hpmc("features " + cfg.string() + " --weights " + weights +
                             " --split test --format npy --out " + out.string());
  ASSERT_EQ(split.code, 0) << split.out << split.err;
  CliResult f = run_hpmc("features " + cfg.string() + " --weights " + weights + " --images " +
                         (root / "test").string() + " --format all --out " + out.string());
  ASSERT_EQ(f.code, 0) << f.out << f.err;
  EXPECT_NE(f.out.find("images: 6 files"), std::string::npos) << f.out;
  EXPECT_EQ(testing::slurp((out / "features_images.npy").string()),
            testing::slurp((out / "features_test.npy").string()));
  EXPECT_FALSE(fs::exists(out / "labels_images.npy"));  // image files have no labels

  // names_images.txt lists the files in row order; the CSV's first column
  // holds the same names under the header "file".
  std::vector<std::string> names;
  {
    std::ifstream in(out / "names_images.txt");
    for (std::string line; std::getline(in, line);) names.push_back(line);
  }
  const char* classes[] = {"circle", "square", "tri"};
  ASSERT_EQ(names.size(), 6u);
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(names[size_t(2 * k + i)],
                (root / "test" / classes[k] / (std::to_string(i) + ".png")).string());
  std::ifstream csv(out / "features_images.csv");
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line.rfind("file,f0,f1,", 0), 0u) << line;
  for (const std::string& name : names) {
    ASSERT_TRUE(std::getline(csv, line));
    EXPECT_EQ(line.rfind(name + ",", 0), 0u) << line.substr(0, 80);
  }
  EXPECT_FALSE(std::getline(csv, line));
  const std::string svm = testing::slurp((out / "features_images.libsvm").string());
  EXPECT_EQ(lines(svm), 6);
  EXPECT_EQ(svm.rfind("-1 ", 0), 0u) << svm.substr(0, 40);  // no label

  // An earlier export is not replaced without --overwrite, and --split
  // does not go with --images.
  CliResult again = run_hpmc("features " + cfg.string() + " --weights " + weights +
                             " --images " + (root / "test").string() + " --format csv --out " +
                             out.string());
  EXPECT_EQ(again.code, 2) << again.err;
  EXPECT_EQ(lines(again.err), 1) << again.err;
  EXPECT_NE(again.err.find("features_images.csv"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("names_images.txt"), std::string::npos) << again.err;
  CliResult both = run_hpmc("features " + cfg.string() + " --weights " + weights +
                            " --split test --images " + (root / "test").string() + " --out " +
                            (t.path() / "g").string());
  EXPECT_EQ(both.code, 2) << both.err;
  EXPECT_NE(both.err.find("leave out --split"), std::string::npos) << both.err;
}

TEST(CliImages, DataSizeResizesAndShapesComeFromTheData) {
  testing::TempDir t;
  const fs::path root = t.path() / "flat";
  for (int i = 0; i < 10; ++i) write_png(root / ("img" + std::to_string(i) + ".png"), 24, 20, 1, i % 3, i);
  write_png(root / "odd.png", 17, 13, 3, 1, 99);  // another size and colour: converted
  // A config built for 32x32 images: the same layers, data.size resizes to it.
  const fs::path cfg = write_config(
      t.path() / "ae32.yaml",
      ae_config("ae32", "{format: images, path: " + root.string() +
                            ", size: [32, 32], channels: 1, test_fraction: 0.2}",
                t.path()));
  CliResult r = run_hpmc("run " + cfg.string() + " --epochs 1 --progress quiet");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const char* s : {"1x32x32 -> 4x32x32", "(1x32x32, no labels)", "9 train, 2 test samples"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;

  // A classifier on unlabelled images: one line, before any training.
  const fs::path cls = write_config(
      t.path() / "cls.yaml",
      "data: {format: images, path: " + root.string() + ", size: [20, 24], channels: 1}\n"
      "model:\n  loss: softmax_cross_entropy\n  layers:\n    - {type: flatten}\n"
      "    - {type: linear, out_features: 3}\n");
  CliResult c = run_hpmc("run " + cls.string());
  EXPECT_EQ(c.code, 3) << c.err;
  EXPECT_EQ(lines(c.err), 1) << c.err;
  EXPECT_NE(c.err.find("cls.yaml:3:"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("needs labels"), std::string::npos) << c.err;
  EXPECT_EQ(c.out.find("epoch"), std::string::npos) << c.out;

  // A layer that cannot take the images' shape: named, with the shapes, before any training.
  const fs::path big = write_config(
      t.path() / "big.yaml",
      "data: {format: images, path: " + root.string() + ", size: [20, 24], channels: 1}\n"
      "model:\n  loss: mse\n  layers:\n"
      "    - {name: wide, type: conv2d, out_channels: 1, kernel: 22}\n");
  CliResult b = run_hpmc("run " + big.string());
  EXPECT_EQ(b.code, 3) << b.err;
  EXPECT_EQ(lines(b.err), 1) << b.err;
  for (const char* s : {"layer 'wide'", "1x20x24", "22"})
    EXPECT_NE(b.err.find(s), std::string::npos) << s << ": " << b.err;
  EXPECT_EQ(b.out.find("epoch"), std::string::npos) << b.out;
}

// A folder of 1000 images shows its loading progress (lines, off a terminal).
TEST(CliImages, ALargeFolderShowsItsProgress) {
  testing::TempDir t;
  const fs::path root = t.path() / "many";
  for (int i = 0; i < 1000; ++i)
    write_png(root / ("i" + std::to_string(1000 + i) + ".png"), 4, 4, 1, 0, i);
  const fs::path cfg = write_config(
      t.path() / "tiny.yaml",
      "data: {format: images, path: " + root.string() + ", test_fraction: 0.1}\n"
      "model:\n  loss: mse\n  layers:\n"
      "    - {type: conv2d, out_channels: 1, kernel: 3, padding: 1}\n"
      "training: {batch_size: 100}\noutput: {dir: " + (t.path() / "run").string() +
      ", weights_dir: " + (t.path() / "w").string() + "}\n");
  CliResult q = run_hpmc("run " + cfg.string() + " --progress quiet");
  ASSERT_EQ(q.code, 0) << q.out << q.err;
  EXPECT_NE(q.out.find("900 train, 100 test samples"), std::string::npos) << q.out;
  EXPECT_EQ(q.out.find("loading images"), std::string::npos) << q.out;
  CliResult r = run_hpmc("run " + cfg.string() + " --progress lines --overwrite");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // A line about every 10% (thread 0 reports, so the counts vary a little).
  int progress_lines = 0;
  for (size_t at = r.out.find("loading images: "); at != std::string::npos;
       at = r.out.find("loading images: ", at + 1)) {
    ++progress_lines;
    EXPECT_NE(r.out.find("/1000 (", at), std::string::npos) << r.out;
  }
  EXPECT_GE(progress_lines, 5) << r.out;
  EXPECT_LE(progress_lines, 9) << r.out;
}

}  // namespace
}  // namespace hpmc
