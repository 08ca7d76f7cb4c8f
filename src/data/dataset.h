// dataset.h — image datasets held in memory, and the formats they are read
// from (data.format).
//
//   mnist: MNIST / Fashion-MNIST IDX files, raw or gzipped (file_io.h).
//     Big-endian throughout:
//     images: magic 0x00000803 (0, 0, type 0x08 = unsigned byte, 3 dims),
//             N, rows, cols (any size: 28x28 in MNIST, others in EMNIST-style
//             sets), then N*rows*cols pixel bytes, row-major;
//     labels: magic 0x00000801 (1 dim), N, then N label bytes 0..9.
//     Files: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
//
//   cifar10: CIFAR-10 binary version. Each batch file is a sequence of
//     3073-byte records: 1 label byte (0..9), then 1024 red, 1024 green and
//     1024 blue bytes, each plane 32x32 row-major — already CHW, so records
//     are copied as they are. Files: data_batch_1.bin .. data_batch_5.bin
//     (10000 records each) and test_batch.bin, as extracted from
//     cifar-10-binary.tar.gz.
//
//   images: a directory of PNG, JPEG and BMP files (image_folder.h).
//
//   npy: NumPy arrays images.npy and labels.npy (npy_data.h).
//
// Pixels stay uint8 (a quarter of the float size: Fashion-MNIST is ~55 MB),
// except float32 npy arrays, which are kept as float32 in [0, 1] so the model
// sees their values as they are; gather_batch() converts just the samples of
// one batch to float in [0, 1]. A dataset without labels (a flat image
// folder, npy without labels.npy) has num_classes 0 and every label -1: it
// trains autoencoders, not classifiers. Every problem with the files is a
// DataError (exit code 4) whose one line names the file, what was expected,
// what was found and what to do.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/shape.h"
#include "core/tensor.h"

namespace hpmc {

enum class DataFormat { kMnist, kCifar10, kImages, kNpy };

// "mnist" (also for Fashion-MNIST), "cifar10", "images" or "npy"; anything
// else is a ConfigError listing them.
DataFormat parse_data_format(const std::string& s);
const char* data_format_name(DataFormat f);
// The standard shapes and sizes of mnist and cifar10 (what synthetic data of
// those formats has, and what the probe assumes while their files are
// missing); not for images or npy, whose shapes come from the files.
// One sample: (1, 1, 28, 28) for MNIST, (1, 3, 32, 32) for CIFAR-10.
Shape sample_shape(DataFormat f);
int num_classes(DataFormat f);
// The official training-set size: 60,000 (MNIST) or 50,000 (CIFAR-10).
int standard_train_size(DataFormat f);
// The official test-set size of both formats.
constexpr int kStandardTestSize = 10000;

// The keys of the images and npy formats (data.size, data.channels,
// data.layout, data.test_fraction, data.split_seed; model/config.cpp reads
// and checks them).
struct DataOptions {
  int height = 0, width = 0;   // images: data.size, what every image is resized to; 0: as stored
  int channels = 0;            // images: data.channels (1 or 3), converted to; 0: as stored
  std::string layout = "auto"; // npy: auto (3-d N×H×W only), nhw, nhwc or nchw
  double test_fraction = 0;    // images, npy: the share of samples held out as the test
                               // split (0: the split comes from the files)
  uint64_t split_seed = 1;     // seeds that split
};

// Reports loading progress: `done` of `total` samples decoded. Called from
// one thread (the caller's) at a time.
using LoadProgress = std::function<void(size_t done, size_t total)>;

struct Dataset {
  std::string source;  // the file(s) it came from, for messages and logs
  // uint8 (N, C, H, W) raw pixel values 0..255, or float32 (N, C, H, W) in
  // [0, 1] (npy float32 arrays); on the CPU
  Tensor images;
  Tensor labels;       // int32 (N, 1, 1, 1), each in 0..num_classes-1, or -1 without labels
  int num_classes = 10;  // 0: the data has no labels
  // images format: each class's folder name (index = label); empty otherwise
  std::vector<std::string> class_names;
  // images format and image files: each sample's file; empty for array formats
  std::vector<std::string> files;

  int size() const;
  bool labelled() const { return num_classes > 0; }
  Shape sample_shape() const;  // (1, C, H, W)
  // A copy (not a view) of samples [begin, begin + count); source is kept.
  Dataset slice(int begin, int count) const;
  // A copy of the samples idx[0..n), in that order.
  Dataset subset(const std::vector<int32_t>& idx) const;
};

struct DataSplits {
  Dataset train, test;
};

// Which splits to read: a command that scores or exports one split reads
// only that split's files (and needs only those to be there). kNone reads
// neither: the command brings image files of its own (recon --images).
enum class Splits { kBoth, kTrain, kTest, kNone };
inline bool wants_train(Splits w) { return w == Splits::kBoth || w == Splits::kTrain; }
inline bool wants_test(Splits w) { return w == Splits::kBoth || w == Splits::kTest; }

// What the model and the memory plan need to know before the data is read,
// from headers, file sizes, directory listings and the config's keys.
struct DataProbe {
  Shape sample;              // (1, C, H, W)
  int num_classes = 10;      // 0: the data has no labels
  size_t train = 0, test = 0;  // samples in the splits asked for (before data.*_limit)
  DType pixels = DType::kU8;   // kF32 for float32 npy arrays
};

// The probe of the dataset in `dir`, for the splits `which` asks for. mnist
// reads the IDX headers and cifar10 the batch files' sizes; while a file is
// missing they assume the standard shape and size (the load then says what
// is missing and where to get it). images lists the directory and reads the
// first image's header; npy reads the arrays' headers and the labels.
// DataError for what is wrong with what it reads.
DataProbe probe_dataset(DataFormat f, const std::string& dir, const DataOptions& o,
                        Splits which = Splits::kBoth);

// The splits from a directory (an unread split is left empty). MNIST: train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte,
// each raw or with .gz (raw preferred if both exist). CIFAR-10:
// data_batch_1.bin .. data_batch_5.bin and test_batch.bin (or the same with
// .gz) in `dir` or in `dir/cifar-10-batches-bin`. images and npy: see
// image_folder.h and npy_data.h. `progress` hears about the images format's
// decoding (the others read too fast to need it).
DataSplits load_dataset(DataFormat f, const std::string& dir, const DataOptions& o,
                        Splits which = Splits::kBoth, const LoadProgress& progress = {});
DataSplits load_dataset(DataFormat f, const std::string& dir, Splits which = Splits::kBoth);

// Random images and labels of the format's real shapes and split sizes
// (MNIST 60000/10000, CIFAR-10 50000/10000), deterministic from `seed`: a
// stand-in for benchmarks where the real files cannot be had.
DataSplits synthetic_dataset(DataFormat f, uint64_t seed);
// The same for the shape, classes and split sizes of a probe (images, npy).
DataSplits synthetic_dataset(const DataProbe& p, uint64_t seed);

// One IDX images file and its labels file; images of any size the header gives.
Dataset load_mnist(const std::string& images_path, const std::string& labels_path);
// CIFAR-10 binary batch files, concatenated in the order given.
Dataset load_cifar10(const std::vector<std::string>& batch_paths);

// The seeded split of data.test_fraction over n samples with these labels
// (-1: unlabelled): within each class, round(count · fraction) samples drawn
// by a Fisher–Yates shuffle seeded with `seed` go to the test split and the
// rest to the training split; both keep the samples' order. The same files,
// fraction and seed give the same split on every machine, whatever
// training.seed is. DataError naming `what` when a split would be empty.
struct SplitIndices {
  std::vector<int32_t> train, test;
};
SplitIndices split_by_fraction(const int32_t* labels, int n, double fraction, uint64_t seed,
                               const std::string& what);

// Gathers samples idx[0..n) of `d` into x (float32 (n, C, H, W): uint8
// pixels divided by 255 so they lie in [0, 1], float32 ones as they are) and, when labels is non-null, into
// *labels (int32 (n, 1, 1, 1)). Both are CPU tensors with capacity for at
// least n samples; they are set_batch(n)'d here, so the last, partial batch
// of an epoch reuses the same buffers.
void gather_batch(const Dataset& d, const int32_t* idx, int n, Tensor& x, Tensor* labels);

}  // namespace hpmc
