// dataset.h — image classification datasets held in memory as uint8.
//
// Two on-disk formats, both read raw or gzipped (see file_io.h):
//
//   MNIST / Fashion-MNIST (IDX). Big-endian throughout:
//     images: magic 0x00000803 (0, 0, type 0x08 = unsigned byte, 3 dims),
//             N, rows = 28, cols = 28, then N*28*28 pixel bytes, row-major;
//     labels: magic 0x00000801 (1 dim), N, then N label bytes 0..9.
//     Files: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
//
//   CIFAR-10 binary version. Each batch file is a sequence of 3073-byte
//     records: 1 label byte (0..9), then 1024 red, 1024 green and 1024 blue
//     bytes, each plane 32x32 row-major — already CHW, so records are copied
//     as they are. Files: data_batch_1.bin .. data_batch_5.bin (10000 records
//     each) and test_batch.bin, as extracted from cifar-10-binary.tar.gz.
//
// Pixels stay uint8 (a quarter of the float size: Fashion-MNIST is ~55 MB);
// gather_batch() converts just the samples of one batch to float in [0, 1].
// Every problem with the files is a DataError (exit code 4) whose one line
// names the file, what was expected, what was found and what to do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"
#include "core/tensor.h"

namespace hpmc {

enum class DataFormat { kMnist, kCifar10 };

// "mnist" (also for Fashion-MNIST) or "cifar10"; anything else is a
// ConfigError listing both.
DataFormat parse_data_format(const std::string& s);
const char* data_format_name(DataFormat f);
// One sample: (1, 1, 28, 28) for MNIST, (1, 3, 32, 32) for CIFAR-10.
Shape sample_shape(DataFormat f);
int num_classes(DataFormat f);
// The official training-set size: 60,000 (MNIST) or 50,000 (CIFAR-10).
int standard_train_size(DataFormat f);
// The official test-set size of both formats.
constexpr int kStandardTestSize = 10000;

struct Dataset {
  std::string source;  // the file(s) it came from, for messages and logs
  Tensor images;       // uint8 (N, C, H, W) on the CPU, raw pixel values 0..255
  Tensor labels;       // int32 (N, 1, 1, 1), each in 0..num_classes-1
  int num_classes = 10;

  int size() const;
  Shape sample_shape() const;  // (1, C, H, W)
  // A copy (not a view) of samples [begin, begin + count); source is kept.
  Dataset slice(int begin, int count) const;
};

struct DataSplits {
  Dataset train, test;
};

// Which splits to read: a command that scores or exports one split reads
// only that split's files (and needs only those to be there).
enum class Splits { kBoth, kTrain, kTest };

// The splits from a directory (an unread split is left empty). MNIST: train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte,
// each raw or with .gz (raw preferred if both exist). CIFAR-10:
// data_batch_1.bin .. data_batch_5.bin and test_batch.bin (or the same with
// .gz) in `dir` or in `dir/cifar-10-batches-bin`.
DataSplits load_dataset(DataFormat f, const std::string& dir, Splits which = Splits::kBoth);

// Random images and labels of the format's real shapes and split sizes
// (MNIST 60000/10000, CIFAR-10 50000/10000), deterministic from `seed`: a
// stand-in for benchmarks where the real files cannot be had.
DataSplits synthetic_dataset(DataFormat f, uint64_t seed);

// One IDX images file and its labels file; the images must be 28x28.
Dataset load_mnist(const std::string& images_path, const std::string& labels_path);
// CIFAR-10 binary batch files, concatenated in the order given.
Dataset load_cifar10(const std::vector<std::string>& batch_paths);

// Gathers samples idx[0..n) of `d` into x (float32 (n, C, H, W), pixels
// divided by 255 so they lie in [0, 1]) and, when labels is non-null, into
// *labels (int32 (n, 1, 1, 1)). Both are CPU tensors with capacity for at
// least n samples; they are set_batch(n)'d here, so the last, partial batch
// of an epoch reuses the same buffers.
void gather_batch(const Dataset& d, const int32_t* idx, int n, Tensor& x, Tensor* labels);

}  // namespace hpmc
