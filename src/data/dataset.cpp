// dataset.cpp — data formats, Dataset helpers, batch gathering, and finding
// a dataset's files in a directory (with messages that say where to get
// them when they are not there). The readers are in mnist.cpp and
// cifar10.cpp; the layouts are described in dataset.h.
#include "data/dataset.h"

#include "core/rng.h"

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/download_hints.h"

namespace hpmc {

namespace fs = std::filesystem;

DataFormat parse_data_format(const std::string& s) {
  if (s == "mnist") return DataFormat::kMnist;
  if (s == "cifar10") return DataFormat::kCifar10;
  std::string hint;
  if (s.find("ashion") != std::string::npos) hint = " (Fashion-MNIST uses the format mnist)";
  throw ConfigError(
      str("unknown data format \"", s, "\"", hint, "; expected one of: mnist, cifar10"));
}

const char* data_format_name(DataFormat f) {
  switch (f) {
    case DataFormat::kMnist:
      return "mnist";
    case DataFormat::kCifar10:
      return "cifar10";
  }
  return "?";
}

Shape sample_shape(DataFormat f) {
  return f == DataFormat::kMnist ? Shape(1, 1, 28, 28) : Shape(1, 3, 32, 32);
}

int num_classes(DataFormat) { return 10; }

int Dataset::size() const { return images.defined() ? images.shape().n : 0; }

Shape Dataset::sample_shape() const { return images.shape().with_batch(1); }

Dataset Dataset::slice(int begin, int count) const {
  HPMC_CHECK(begin >= 0 && count >= 0 && int64_t(begin) + count <= size(), "slice [", begin, ", ",
             int64_t(begin) + count, ") of a dataset of ", size(), " samples");
  Dataset out;
  out.source = source;
  out.num_classes = num_classes;
  out.images = Tensor::empty(images.shape().with_batch(count), DType::kU8);
  out.labels = Tensor::empty(labels.shape().with_batch(count), DType::kI32);
  const size_t per = images.shape().per_sample();
  std::memcpy(out.images.data<uint8_t>(), images.data<uint8_t>() + size_t(begin) * per,
              size_t(count) * per);
  std::memcpy(out.labels.data<int32_t>(), labels.data<int32_t>() + begin,
              size_t(count) * sizeof(int32_t));
  return out;
}

void gather_batch(const Dataset& d, const int32_t* idx, int n, Tensor& x, Tensor* labels) {
  HPMC_CHECK(d.images.dtype() == DType::kU8 && d.images.device() == Device::kCPU,
             "dataset images must be uint8 on the CPU");
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
  const uint8_t* src = d.images.data<uint8_t>();
  const int32_t* src_lab = d.labels.data<int32_t>();
  float* dst = x.data<float>();
  int32_t* dst_lab = labels ? labels->data<int32_t>() : nullptr;
  for (int i = 0; i < n; ++i) {
    const int32_t j = idx[i];
    HPMC_CHECK(j >= 0 && j < size, "sample index ", j, " at batch position ", i,
               " is outside a dataset of ", size, " samples");
    const uint8_t* s = src + size_t(j) * per;
    float* o = dst + size_t(i) * per;
    // A division, not a multiply by 1/255, so every value is exactly
    // v / 255.0f (255 maps to exactly 1.0f); unlike a table lookup it
    // vectorises (the gather is a tenth of an MLP step otherwise).
    for (size_t k = 0; k < per; ++k) o[k] = float(s[k]) / 255.0f;
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

bool wants_train(Splits w) { return w != Splits::kTest; }
bool wants_test(Splits w) { return w != Splits::kTrain; }

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
  return s;
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

}  // namespace

DataSplits load_dataset(DataFormat f, const std::string& dir, Splits which) {
  return f == DataFormat::kMnist ? load_mnist_dir(dir, which) : load_cifar10_dir(dir, which);
}

namespace {
Dataset synthetic_split(DataFormat f, int n, uint64_t seed, const char* name) {
  Dataset d;
  d.source = str("synthetic ", data_format_name(f), " ", name, " (seed ", seed, ")");
  Shape s = sample_shape(f);
  d.images = Tensor::empty(s.with_batch(n), DType::kU8);
  d.labels = Tensor::empty(Shape(n, 1, 1, 1), DType::kI32);
  d.num_classes = num_classes(f);
  Rng rng(seed);
  uint8_t* px = d.images.data<uint8_t>();
  for (size_t i = 0; i < d.images.numel(); ++i) px[i] = uint8_t(rng.next_u64() >> 56);
  for (int i = 0; i < n; ++i) d.labels.data<int32_t>()[i] = int32_t(rng.below(uint64_t(d.num_classes)));
  return d;
}
}  // namespace

int standard_train_size(DataFormat f) { return f == DataFormat::kMnist ? 60000 : 50000; }

DataSplits synthetic_dataset(DataFormat f, uint64_t seed) {
  DataSplits s;
  s.train = synthetic_split(f, standard_train_size(f), seed, "train");
  s.test = synthetic_split(f, kStandardTestSize, seed + 1, "test");
  return s;
}

}  // namespace hpmc
