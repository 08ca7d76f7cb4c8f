// image_folder.cpp — the images data format and image files (image_folder.h):
// listing a directory into splits and classes, the probe, and decoding every
// file into the dataset on all threads.
#include "data/image_folder.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <exception>
#include <filesystem>
#include <mutex>

#include "core/error.h"
#include "core/regular_file.h"
#include "core/threads.h"
#include "data/formats.h"
#include "io/image_decode.h"

namespace hpmc {

namespace {

namespace fs = std::filesystem;

constexpr const char* kLayouts =
    "a directory of PNG, JPEG or BMP files: flat, one sub-directory per class, or train/ and "
    "test/ sub-directories holding either";
// Deeper than this is a symbolic link loop, not a dataset.
constexpr int kMaxDepth = 32;

bool hidden(const fs::path& p) {
  const std::string n = p.filename().string();
  return !n.empty() && n[0] == '.';
}

bool image_extension(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return e == ".png" || e == ".jpg" || e == ".jpeg" || e == ".bmp";
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// The entries of `dir` that are not hidden, sorted by name.
std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec))
    if (!hidden(it->path())) out.push_back(it->path());
  if (ec) throw DataError(str("cannot list the directory ", dir.string(), ": ", ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

// An entry that is to be an image file: a regular file with an image
// extension; anything else is named for what it is.
void check_image_file(const fs::path& p) {
  FileCheck c = check_regular_file(p.string());
  if (c.problem != FileProblem::kNone)
    throw DataError(str(p.string(), ": ", c.why, "; the data directory should hold only image "
                        "files (PNG, JPEG, BMP) and folders of them"));
  if (!image_extension(p))
    throw DataError(str(p.string(), ": not an image file name (hpmc reads .png, .jpg, .jpeg and "
                        ".bmp files); move it out of the data directory"));
}

// The image files under `dir`, walked in sorted order.
void walk(const fs::path& dir, int depth, std::vector<std::string>& out) {
  if (depth > kMaxDepth)
    throw DataError(str(dir.string(), ": directories nested more than ", kMaxDepth,
                        " deep (a symbolic link loop?)"));
  for (const fs::path& e : entries(dir)) {
    if (is_dir(e)) {
      walk(e, depth + 1, out);
    } else {
      check_image_file(e);
      out.push_back(e.string());
    }
  }
}

// One split's directory: flat (files) or class folders (sub-directories).
struct SplitListing {
  std::string dir;
  bool classed = false;
  std::vector<std::string> classes;  // sorted folder names (classed)
  std::vector<std::string> files;
  std::vector<int32_t> labels;  // -1 when flat
};

SplitListing list_split(const fs::path& dir) {
  SplitListing s;
  s.dir = dir.string();
  std::vector<fs::path> all = entries(dir);
  if (all.empty())
    throw DataError(str(dir.string(), ": holds no images; the images format reads ", kLayouts));
  const fs::path* a_dir = nullptr;
  const fs::path* a_file = nullptr;
  for (const fs::path& e : all) {
    if (is_dir(e)) {
      if (!a_dir) a_dir = &e;
    } else if (!a_file) {
      a_file = &e;
    }
  }
  if (a_dir && a_file)
    throw DataError(str(dir.string(), ": mixes image files (", a_file->filename().string(),
                        ") with sub-directories (", a_dir->filename().string(),
                        "/); use one sub-directory per class, or files only (no labels)"));
  s.classed = a_dir != nullptr;
  if (!s.classed) {
    for (const fs::path& e : all) {
      check_image_file(e);
      s.files.push_back(e.string());
    }
    s.labels.assign(s.files.size(), -1);
    return s;
  }
  if (all.size() > size_t(INT_MAX))
    throw DataError(str(dir.string(), ": more class folders than hpmc can label"));
  for (const fs::path& e : all) {
    const size_t before = s.files.size();
    walk(e, 1, s.files);
    if (s.files.size() == before)
      throw DataError(str(e.string(), ": the class folder holds no images; every class needs at "
                          "least one (remove the folder, or add its images)"));
    s.labels.resize(s.files.size(), int32_t(s.classes.size()));
    s.classes.push_back(e.filename().string());
  }
  return s;
}

// The whole directory: the training split (or everything) and the test
// split, after data.test_fraction's split.
struct FolderListing {
  SplitListing train, test;
  bool has_test = false;
};

void require_directory(const std::string& dir) {
  if (dir.empty())
    throw DataError(str("no images directory given; data.path should name ", kLayouts,
                        "; point hpmc at it with --data DIR"));
  std::error_code ec;
  if (!fs::exists(dir, ec))
    throw DataError(str("images data directory ", dir, " does not exist; data.path should name ",
                        kLayouts, "; point hpmc at it with --data DIR"));
  if (!is_dir(dir))
    throw DataError(str("images data directory ", dir, " is not a directory; data.path should "
                        "name ", kLayouts));
}

// The first difference between the two splits' class folders.
void require_same_classes(const SplitListing& train, const SplitListing& test) {
  if (train.classed != test.classed)
    throw DataError(str(train.classed ? test.dir : train.dir, " holds image files but ",
                        train.classed ? train.dir : test.dir,
                        " holds class folders; both splits need the same layout"));
  if (train.classes == test.classes) return;
  for (const std::string& c : train.classes)
    if (!std::binary_search(test.classes.begin(), test.classes.end(), c))
      throw DataError(str(test.dir, " lacks the class folder '", c, "' that ", train.dir,
                          " has; both splits need the same class folders"));
  for (const std::string& c : test.classes)
    if (!std::binary_search(train.classes.begin(), train.classes.end(), c))
      throw DataError(str(test.dir, " has a class folder '", c, "' that ", train.dir,
                          " lacks; both splits need the same class folders"));
}

SplitListing pick(const SplitListing& all, const std::vector<int32_t>& idx) {
  SplitListing s;
  s.dir = all.dir;
  s.classed = all.classed;
  s.classes = all.classes;
  for (int32_t i : idx) {
    s.files.push_back(all.files[size_t(i)]);
    s.labels.push_back(all.labels[size_t(i)]);
  }
  return s;
}

FolderListing list_folder(const std::string& dir, const DataOptions& o) {
  require_directory(dir);
  FolderListing f;
  const fs::path root(dir);
  std::vector<fs::path> top = entries(root);
  const bool split_dirs =
      is_dir(root / "train") &&
      std::all_of(top.begin(), top.end(), [](const fs::path& e) {
        return (e.filename() == "train" || e.filename() == "test") && is_dir(e);
      });
  f.train = list_split(split_dirs ? root / "train" : root);
  if (split_dirs && is_dir(root / "test")) {
    if (o.test_fraction > 0)
      throw DataError(str("images data directory ", dir, " has a test/ sub-directory and "
                          "data.test_fraction is ", o.test_fraction, "; use one or the other"));
    f.test = list_split(root / "test");
    require_same_classes(f.train, f.test);
    f.has_test = true;
  }
  if (f.train.files.size() + f.test.files.size() > size_t(INT_MAX))
    throw DataError(str("images data directory ", dir, " holds more images than hpmc can index"));
  if (o.test_fraction > 0) {
    SplitIndices s = split_by_fraction(f.train.labels.data(), int(f.train.files.size()),
                                       o.test_fraction, o.split_seed, f.train.dir);
    SplitListing all = std::move(f.train);
    f.train = pick(all, s.train);
    f.test = pick(all, s.test);
    f.has_test = true;
  }
  return f;
}

std::string no_test_split(const std::string& dir) {
  return str("images data directory ", dir, " has no test split; add train/ and test/ "
             "sub-directories, or set data.test_fraction to hold some images out");
}

// The target's zeros filled from the first file's header.
ImageTarget resolve_target(ImageTarget t, const std::string& first) {
  if (t.channels > 0 && t.height > 0 && t.width > 0) return t;
  const ImageHeader h = image_header(read_image_bytes(first), first);
  if (t.channels == 0) t.channels = model_channels(h.channels);
  if (t.height == 0) t.height = h.height, t.width = h.width;
  if (t.origin.empty()) t.origin = str("the first image, ", first, ",");
  return t;
}

std::string shape_of(int c, int h, int w) { return Shape(1, c, h, w).sample_str(); }

// Decodes files[i] into dst + i·C·H·W on every thread. The error reported is
// that of the first file (in order) that fails, whatever the thread count.
void decode_all(const std::vector<std::string>& files, const ImageTarget& t, uint8_t* dst,
                const LoadProgress& progress, size_t done_before, size_t total) {
  const int64_t n = int64_t(files.size());
  const size_t per = size_t(t.channels) * size_t(t.height) * size_t(t.width);
  std::atomic<int64_t> first_error{n};
  std::exception_ptr error;
  std::mutex error_mutex;
  std::atomic<size_t> done{0};
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t i = 0; i < n; ++i) {
    if (i > first_error.load(std::memory_order_relaxed)) continue;
    try {
      const std::string& path = files[size_t(i)];
      const DecodedImage img = decode_image(read_image_bytes(path), path);
      const int c = model_channels(img.channels);
      if (c != t.channels && !t.convert_channels)
        throw DataError(str(path, " is ", c == 1 ? "grey" : "colour", " (",
                            shape_of(c, img.height, img.width), ") but ", t.origin, " is ",
                            t.channels == 1 ? "grey" : "colour", " (",
                            shape_of(t.channels, t.height, t.width), "); ",
                            t.hint.empty() ? str("set data.channels: ", t.channels,
                                                 " to convert every image to it")
                                           : t.hint));
      if ((img.height != t.height || img.width != t.width) && !t.resize)
        throw DataError(str(path, " is ", shape_of(c, img.height, img.width),
                            " (CxHxW) but ", t.origin, " is ",
                            shape_of(t.channels, t.height, t.width), "; ",
                            t.hint.empty() ? "all images must share one size, or set data.size: "
                                             "[H, W] to resize them"
                                           : t.hint));
      to_chw(img, t.channels, t.height, t.width, dst + size_t(i) * per);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (i < first_error.load()) {
        first_error.store(i);
        error = std::current_exception();
      }
    }
    const size_t d = done.fetch_add(1) + 1;
    if (progress && thread_index() == 0) progress(done_before + d, total);
  }
  if (error) std::rethrow_exception(error);
}

// A split as a dataset: its files decoded to the target.
Dataset decode_split(const SplitListing& s, const ImageTarget& t, const LoadProgress& progress,
                     size_t done_before, size_t total) {
  Dataset d;
  d.source = s.dir;
  d.num_classes = s.classed ? int(s.classes.size()) : 0;
  d.class_names = s.classes;
  d.files = s.files;
  const int n = int(s.files.size());
  d.images = Tensor::empty(Shape(n, t.channels, t.height, t.width), DType::kU8);
  d.labels = Tensor::empty(Shape(n, 1, 1, 1), DType::kI32);
  std::copy(s.labels.begin(), s.labels.end(), d.labels.data<int32_t>());
  decode_all(s.files, t, d.images.data<uint8_t>(), progress, done_before, total);
  return d;
}

ImageTarget folder_target(const DataOptions& o) {
  ImageTarget t;
  t.channels = o.channels;
  t.height = o.height;
  t.width = o.width;
  t.convert_channels = o.channels > 0;
  t.resize = o.height > 0;
  return t;
}

const std::string& first_file(const FolderListing& f) {
  return f.train.files.empty() ? f.test.files.front() : f.train.files.front();
}

}  // namespace

DataProbe probe_image_folder(const std::string& dir, const DataOptions& o, Splits which) {
  DataProbe p;
  p.pixels = DType::kU8;
  const ImageTarget given = folder_target(o);
  if (which == Splits::kNone && given.channels > 0 && given.height > 0) {
    // The shape is the config's, and the command reads no split.
    p.sample = Shape(1, given.channels, given.height, given.width);
    p.num_classes = 0;
    return p;
  }
  const FolderListing f = list_folder(dir, o);
  if (which == Splits::kTest && !f.has_test) throw DataError(no_test_split(dir));
  const ImageTarget t = resolve_target(given, first_file(f));
  p.sample = Shape(1, t.channels, t.height, t.width);
  p.num_classes = f.train.classed ? int(f.train.classes.size()) : 0;
  p.train = wants_train(which) ? f.train.files.size() : 0;
  p.test = wants_test(which) ? f.test.files.size() : 0;
  return p;
}

DataSplits load_image_folder(const std::string& dir, const DataOptions& o, Splits which,
                             const LoadProgress& progress) {
  const FolderListing f = list_folder(dir, o);
  if (which == Splits::kTest && !f.has_test) throw DataError(no_test_split(dir));
  const ImageTarget t = resolve_target(folder_target(o), first_file(f));
  const size_t n_train = wants_train(which) ? f.train.files.size() : 0;
  const size_t n_test = wants_test(which) ? f.test.files.size() : 0;
  DataSplits s;
  if (n_train > 0) s.train = decode_split(f.train, t, progress, 0, n_train + n_test);
  if (n_test > 0) s.test = decode_split(f.test, t, progress, n_train, n_train + n_test);
  if (progress) progress(n_train + n_test, n_train + n_test);
  return s;
}

std::vector<std::string> list_image_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::exists(p, ec)) throw DataError(str(p, ": no such image file or directory"));
    if (is_dir(p)) {
      const size_t before = files.size();
      walk(p, 0, files);
      if (files.size() == before)
        throw DataError(str(p, ": the directory holds no images (PNG, JPEG or BMP files)"));
    } else {
      check_image_file(p);
      files.push_back(p);
    }
  }
  if (files.size() > size_t(INT_MAX)) throw DataError("more image files than hpmc can index");
  return files;
}

Dataset load_image_files(const std::vector<std::string>& files, const ImageTarget& target,
                         const LoadProgress& progress) {
  HPMC_CHECK(!files.empty(), "load_image_files of no files");
  const ImageTarget t = resolve_target(target, files.front());
  SplitListing s;
  s.dir = files.size() == 1 ? files.front() : str(files.front(), " .. ", files.back());
  s.files = files;
  s.labels.assign(files.size(), -1);
  Dataset d = decode_split(s, t, progress, 0, files.size());
  if (progress) progress(files.size(), files.size());
  return d;
}

}  // namespace hpmc
