// dataset.cpp — data formats, Dataset helpers, batch gathering, the probes
// and loaders of each format (dispatched to mnist.cpp, cifar10.cpp,
// image_folder.cpp and npy_data.cpp), finding the MNIST and CIFAR-10 files in
// a directory (with messages that say where to get them when they are not
// there), synthetic data and the seeded test split. The layouts are
// described in dataset.h.
#include "data/dataset.h"

#include "core/rng.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/download_hints.h"
#include "data/formats.h"

namespace hpmc {

namespace fs = std::filesystem;

DataFormat parse_data_format(const std::string& s) {
  if (s == "mnist") return DataFormat::kMnist;
  if (s == "cifar10") return DataFormat::kCifar10;
  if (s == "images") return DataFormat::kImages;
  if (s == "npy") return DataFormat::kNpy;
  std::string hint;
  if (s.find("ashion") != std::string::npos) hint = " (Fashion-MNIST uses the format mnist)";
  throw ConfigError(str("unknown data format \"", s, "\"", hint,
                        "; expected one of: mnist, cifar10, images, npy"));
}

const char* data_format_name(DataFormat f) {
  switch (f) {
    case DataFormat::kMnist:
      return "mnist";
    case DataFormat::kCifar10:
      return "cifar10";
    case DataFormat::kImages:
      return "images";
    case DataFormat::kNpy:
      return "npy";
  }
  return "?";
}

namespace {
void check_standard_format(DataFormat f) {
  HPMC_CHECK(f == DataFormat::kMnist || f == DataFormat::kCifar10, "the ", data_format_name(f),
             " format has no standard shape: probe its files (probe_dataset)");
}
}  // namespace

Shape sample_shape(DataFormat f) {
  check_standard_format(f);
  return f == DataFormat::kMnist ? Shape(1, 1, 28, 28) : Shape(1, 3, 32, 32);
}

int num_classes(DataFormat f) {
  check_standard_format(f);
  return 10;
}

int Dataset::size() const { return images.defined() ? images.shape().n : 0; }

Shape Dataset::sample_shape() const { return images.shape().with_batch(1); }

Dataset Dataset::slice(int begin, int count) const {
  HPMC_CHECK(begin >= 0 && count >= 0 && int64_t(begin) + count <= size(), "slice [", begin, ", ",
             int64_t(begin) + count, ") of a dataset of ", size(), " samples");
  std::vector<int32_t> idx(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) idx[size_t(i)] = begin + i;
  return subset(idx);
}

Dataset Dataset::subset(const std::vector<int32_t>& idx) const {
  const int count = int(idx.size());
  Dataset out;
  out.source = source;
  out.num_classes = num_classes;
  out.class_names = class_names;
  out.images = Tensor::empty(images.shape().with_batch(count), images.dtype());
  out.labels = Tensor::empty(labels.shape().with_batch(count), DType::kI32);
  const size_t per = images.shape().per_sample() * dtype_size(images.dtype());
  const auto* src = static_cast<const uint8_t*>(images.raw());
  auto* dst = static_cast<uint8_t*>(out.images.raw());
  for (int i = 0; i < count; ++i) {
    const int32_t j = idx[size_t(i)];
    HPMC_CHECK(j >= 0 && j < size(), "sample ", j, " of a dataset of ", size(), " samples");
    std::memcpy(dst + size_t(i) * per, src + size_t(j) * per, per);
    out.labels.data<int32_t>()[i] = labels.data<int32_t>()[j];
    if (!files.empty()) out.files.push_back(files[size_t(j)]);
  }
  return out;
}

void gather_batch(const Dataset& d, const int32_t* idx, int n, Tensor& x, Tensor* labels) {
  const DType pixels = d.images.dtype();
  HPMC_CHECK((pixels == DType::kU8 || pixels == DType::kF32) && d.images.device() == Device::kCPU,
             "dataset images must be uint8 or float32 on the CPU");
  // Only the element count per sample must match, so an MLP can gather
  // straight into a flat (n, C*H*W, 1, 1) input.
  HPMC_CHECK(x.dtype() == DType::kF32 && x.device() == Device::kCPU &&
                 x.shape().per_sample() == d.images.shape().per_sample(),
             "gather_batch needs a float32 CPU tensor of ", d.sample_shape().sample_str(),
             " samples, got ", dtype_name(x.dtype()), " ", device_name(x.device()), " ",
             x.shape().str());
  HPMC_CHECK(n >= 0, "negative batch size ", n);
  x.set_batch(n);
  if (labels) {
    HPMC_CHECK(labels->dtype() == DType::kI32 && labels->device() == Device::kCPU &&
                   labels->shape().per_sample() == 1,
               "gather_batch needs int32 CPU (n, 1, 1, 1) labels, got ",
               dtype_name(labels->dtype()), " ", device_name(labels->device()), " ",
               labels->shape().str());
    labels->set_batch(n);
  }

  const size_t per = d.images.shape().per_sample();
  const int size = d.size();
  const int32_t* src_lab = d.labels.data<int32_t>();
  float* dst = x.data<float>();
  int32_t* dst_lab = labels ? labels->data<int32_t>() : nullptr;
  for (int i = 0; i < n; ++i) {
    const int32_t j = idx[i];
    HPMC_CHECK(j >= 0 && j < size, "sample index ", j, " at batch position ", i,
               " is outside a dataset of ", size, " samples");
    float* o = dst + size_t(i) * per;
    if (pixels == DType::kU8) {
      const uint8_t* s = d.images.data<uint8_t>() + size_t(j) * per;
      // A division, not a multiply by 1/255, so every value is exactly
      // v / 255.0f (255 maps to exactly 1.0f); unlike a table lookup it
      // vectorises (the gather is a tenth of an MLP step otherwise).
      for (size_t k = 0; k < per; ++k) o[k] = float(s[k]) / 255.0f;
    } else {
      std::memcpy(o, d.images.data<float>() + size_t(j) * per, per * sizeof(float));
    }
    if (dst_lab) dst_lab[i] = src_lab[j];
  }
}

// ---- finding the files ------------------------------------------------------

namespace {

using data_hints::kCifarGetIt;
using data_hints::kMnistGetIt;

constexpr const char* kMnistFiles[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
constexpr const char* kMnistNeeds =
    "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and "
    "t10k-labels-idx1-ubyte, each raw or with .gz";

constexpr const char* kCifarFiles[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                        "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
constexpr const char* kCifarSubdir = "cifar-10-batches-bin";
constexpr const char* kCifarNeeds = "data_batch_1.bin .. data_batch_5.bin and test_batch.bin";

constexpr const char* kPointAt = "then point hpmc at the directory with --data DIR";

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// dir/name, else dir/name.gz; empty when neither exists. Raw wins because
// it reads faster and is what someone who gunzipped the files meant.
std::string find_file(const fs::path& dir, const std::string& name) {
  if (is_file(dir / name)) return (dir / name).string();
  if (is_file(dir / (name + ".gz"))) return (dir / (name + ".gz")).string();
  return "";
}

// A dataset file that is there but is not a regular file (a directory, a FIFO,
// a device, a symbolic link loop or one to nothing) is named for what it is,
// rather than reported missing.
void refuse_what_is_not_a_file(const fs::path& dir, const std::string& name,
                               const char* dataset) {
  for (const std::string& n : {name, name + ".gz"}) {
    std::string p = (dir / n).string();
    FileCheck c = check_regular_file(p);
    if (c.problem == FileProblem::kNone || c.problem == FileProblem::kMissing) continue;
    throw DataError(str(dataset, " data file ", p, " ", c.why, "; replace it with the file ", name,
                        " (raw or .gz)"));
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

void require_directory(const std::string& dir, const char* dataset, const char* needs,
                       const char* get_it) {
  if (dir.empty())
    throw DataError(str("no ", dataset, " data directory given; it should hold ", needs, "; ",
                        get_it, "; ", kPointAt));
  std::error_code ec;
  if (!fs::exists(dir, ec))
    throw DataError(str(dataset, " data directory ", dir, " does not exist; it should hold ", needs,
                        "; ", get_it, "; ", kPointAt));
  if (!is_dir(dir))
    throw DataError(str(dataset, " data directory ", dir, " is not a directory; it should hold ",
                        needs, "; ", get_it, "; ", kPointAt));
}

DataSplits load_mnist_dir(const std::string& dir, Splits which) {
  require_directory(dir, "MNIST", kMnistNeeds, kMnistGetIt);
  std::string paths[4];
  std::vector<std::string> missing;
  for (int i = 0; i < 4; ++i) {
    if (i < 2 ? !wants_train(which) : !wants_test(which)) continue;
    paths[i] = find_file(dir, kMnistFiles[i]);
    if (paths[i].empty()) {
      refuse_what_is_not_a_file(dir, kMnistFiles[i], "MNIST");
      missing.push_back(str(kMnistFiles[i], "[.gz]"));
    }
  }
  if (!missing.empty()) {
    // A common slip: --data names the parent of the real directory.
    std::string nested;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (is_dir(e.path()) && !find_file(e.path(), kMnistFiles[0]).empty()) {
        nested = str(" (", e.path().string(), " has them: use --data ", e.path().string(), ")");
        break;
      }
    }
    throw DataError(str("MNIST data directory ", dir, " lacks ", join(missing), nested,
                        "; it should hold ", kMnistNeeds, "; ", kMnistGetIt, "; ", kPointAt));
  }
  DataSplits s;
  if (wants_train(which)) s.train = load_mnist(paths[0], paths[1]);
  if (wants_test(which)) s.test = load_mnist(paths[2], paths[3]);
  if (wants_train(which) && wants_test(which) &&
      !s.train.sample_shape().same_sample(s.test.sample_shape()))
    throw DataError(str("MNIST data directory ", dir, ": the test images (", paths[2], ") are ",
                        s.test.sample_shape().sample_str(), " but the training images (", paths[0],
                        ") are ", s.train.sample_shape().sample_str(),
                        "; both splits must share one image size"));
  return s;
}

// The IDX headers of the images files there are; the standard shape and
// sizes stand in for those that are missing.
DataProbe probe_mnist_dir(const std::string& dir, Splits which) {
  DataProbe p;
  p.sample = sample_shape(DataFormat::kMnist);
  p.num_classes = num_classes(DataFormat::kMnist);
  p.train = wants_train(which) ? size_t(standard_train_size(DataFormat::kMnist)) : 0;
  p.test = wants_test(which) ? size_t(kStandardTestSize) : 0;
  if (!is_dir(dir)) return p;
  bool shaped = false;
  for (int i : {0, 2}) {
    // Without a split to read (Splits::kNone) either file gives the shape.
    const bool wanted = i == 0 ? wants_train(which) : wants_test(which);
    if (!wanted && which != Splits::kNone) continue;
    const std::string path = find_file(dir, kMnistFiles[i]);
    if (path.empty()) continue;
    const IdxShape h = read_mnist_images_header(path);
    const Shape sample(1, 1, int(h.rows), int(h.cols));
    if (shaped && !sample.same_sample(p.sample))
      throw DataError(str("MNIST data directory ", dir, ": the test images (", path, ") are ",
                          sample.sample_str(), " but the training images are ",
                          p.sample.sample_str(), "; both splits must share one image size"));
    p.sample = sample;
    shaped = true;
    if (wanted) (i == 0 ? p.train : p.test) = h.n;
  }
  return p;
}

DataSplits load_cifar10_dir(const std::string& dir, Splits which) {
  require_directory(dir, "CIFAR-10", kCifarNeeds, kCifarGetIt);
  // The batches may sit in dir itself or in the subdirectory that the
  // official archive extracts to; use whichever holds more of them.
  std::vector<std::string> wanted;  // the batch files of the splits asked for, in order
  for (int i = 0; i < 6; ++i)
    if (i < 5 ? wants_train(which) : wants_test(which)) wanted.push_back(kCifarFiles[i]);
  auto look_in = [&](const fs::path& d, std::vector<std::string>& found,
                     std::vector<std::string>& missing) {
    found.clear();
    missing.clear();
    for (const std::string& name : wanted) {
      std::string p = find_file(d, name);
      if (p.empty())
        missing.push_back(name);
      else
        found.push_back(p);
    }
  };
  std::vector<std::string> found, missing;
  look_in(dir, found, missing);
  fs::path looked = dir;
  fs::path sub = fs::path(dir) / kCifarSubdir;
  if (!missing.empty() && is_dir(sub)) {
    std::vector<std::string> found2, missing2;
    look_in(sub, found2, missing2);
    if (found2.size() >= found.size()) {
      found.swap(found2);
      missing.swap(missing2);
      looked = sub;
    }
  }
  for (const std::string& name : missing) refuse_what_is_not_a_file(looked, name, "CIFAR-10");
  if (!missing.empty()) {
    std::string hint;
    if (is_file(fs::path(dir) / "cifar-10-binary.tar.gz"))
      hint =
          str("; cifar-10-binary.tar.gz is there but not extracted: run `tar xzf "
              "cifar-10-binary.tar.gz` in ",
              dir);
    else if (is_dir(fs::path(dir) / "cifar-10-batches-py"))
      hint = "; cifar-10-batches-py is the Python version, hpmc reads the binary version";
    throw DataError(str("CIFAR-10 data directory ", dir, " lacks ", join(missing),
                        " (looked in it and in its subdirectory ", kCifarSubdir, ")", hint,
                        "; it should hold ", kCifarNeeds, "; ", kCifarGetIt, "; ", kPointAt));
  }
  DataSplits s;
  if (wants_train(which))
    s.train = load_cifar10(std::vector<std::string>(found.begin(), found.begin() + 5));
  if (wants_test(which)) s.test = load_cifar10({found.back()});
  return s;
}

// The raw batch files there are give their record counts; gzipped or
// missing ones count as the official 10000 records.
DataProbe probe_cifar10_dir(const std::string& dir, Splits which) {
  DataProbe p;
  p.sample = sample_shape(DataFormat::kCifar10);
  p.num_classes = num_classes(DataFormat::kCifar10);
  for (int i = 0; i < 6; ++i) {
    if (i < 5 ? !wants_train(which) : !wants_test(which)) continue;
    uint64_t records = 10000;
    for (const fs::path& d : {fs::path(dir), fs::path(dir) / kCifarSubdir}) {
      std::error_code ec;
      const uint64_t size = is_file(d / kCifarFiles[i]) ? fs::file_size(d / kCifarFiles[i], ec) : 0;
      if (!ec && size > 0 && size % 3073 == 0) {
        records = size / 3073;
        break;
      }
    }
    (i < 5 ? p.train : p.test) += records;
  }
  return p;
}

}  // namespace

DataProbe probe_dataset(DataFormat f, const std::string& dir, const DataOptions& o,
                        Splits which) {
  switch (f) {
    case DataFormat::kMnist:
      return probe_mnist_dir(dir, which);
    case DataFormat::kCifar10:
      return probe_cifar10_dir(dir, which);
    case DataFormat::kImages:
      return probe_image_folder(dir, o, which);
    case DataFormat::kNpy:
      return probe_npy_dir(dir, o, which);
  }
  return {};
}

DataSplits load_dataset(DataFormat f, const std::string& dir, const DataOptions& o, Splits which,
                        const LoadProgress& progress) {
  if (which == Splits::kNone) return {};
  switch (f) {
    case DataFormat::kMnist:
      return load_mnist_dir(dir, which);
    case DataFormat::kCifar10:
      return load_cifar10_dir(dir, which);
    case DataFormat::kImages:
      return load_image_folder(dir, o, which, progress);
    case DataFormat::kNpy:
      return load_npy_dir(dir, o, which);
  }
  return {};
}

DataSplits load_dataset(DataFormat f, const std::string& dir, Splits which) {
  return load_dataset(f, dir, DataOptions{}, which);
}

namespace {
Dataset synthetic_split(const std::string& format, const Shape& s, int classes, int n,
                        uint64_t seed, const char* name) {
  Dataset d;
  d.source = str("synthetic ", format, " ", name, " (seed ", seed, ")");
  d.images = Tensor::empty(s.with_batch(n), DType::kU8);
  d.labels = Tensor::empty(Shape(n, 1, 1, 1), DType::kI32);
  d.num_classes = classes;
  Rng rng(seed);
  uint8_t* px = d.images.data<uint8_t>();
  for (size_t i = 0; i < d.images.numel(); ++i) px[i] = uint8_t(rng.next_u64() >> 56);
  for (int i = 0; i < n; ++i)
    d.labels.data<int32_t>()[i] = classes > 0 ? int32_t(rng.below(uint64_t(classes))) : -1;
  return d;
}
}  // namespace

int standard_train_size(DataFormat f) {
  check_standard_format(f);
  return f == DataFormat::kMnist ? 60000 : 50000;
}

DataSplits synthetic_dataset(DataFormat f, uint64_t seed) {
  DataSplits s;
  s.train = synthetic_split(data_format_name(f), sample_shape(f), num_classes(f),
                            standard_train_size(f), seed, "train");
  s.test = synthetic_split(data_format_name(f), sample_shape(f), num_classes(f), kStandardTestSize,
                           seed + 1, "test");
  return s;
}

DataSplits synthetic_dataset(const DataProbe& p, uint64_t seed) {
  HPMC_CHECK(p.train <= size_t(INT_MAX) && p.test <= size_t(INT_MAX), "a probe of ", p.train,
             " + ", p.test, " samples");
  DataSplits s;
  s.train = synthetic_split("data", p.sample, p.num_classes, int(p.train), seed, "train");
  s.test = synthetic_split("data", p.sample, p.num_classes, int(p.test), seed + 1, "test");
  return s;
}

SplitIndices split_by_fraction(const int32_t* labels, int n, double fraction, uint64_t seed,
                               const std::string& what) {
  HPMC_CHECK(n >= 0 && fraction > 0 && fraction < 1, "split of ", n, " samples at ", fraction);
  // Samples by class, in order (-1, unlabelled, is a class of its own).
  std::map<int32_t, std::vector<int32_t>> by_class;
  for (int i = 0; i < n; ++i) by_class[labels[i]].push_back(i);
  std::vector<char> to_test(static_cast<size_t>(n), 0);
  Rng rng(seed, 0x73706c6974ull);  // "split": a stream of its own
  for (auto& [label, members] : by_class) {
    const size_t k = size_t(std::llround(double(members.size()) * fraction));
    for (size_t i = members.size(); i > 1; --i)  // Fisher–Yates
      std::swap(members[i - 1], members[size_t(rng.below(i))]);
    for (size_t i = 0; i < k; ++i) to_test[size_t(members[i])] = 1;
  }
  SplitIndices s;
  for (int i = 0; i < n; ++i) (to_test[size_t(i)] ? s.test : s.train).push_back(i);
  if (s.test.empty() || s.train.empty())
    throw DataError(str(what, ": data.test_fraction ", fraction, " of its ", n, " samples leaves ",
                        s.test.empty() ? "no test samples" : "no training samples",
                        "; ", s.test.empty() ? "raise" : "lower", " it, or add more data"));
  return s;
}

}  // namespace hpmc
