// cifar10.cpp — the reader for CIFAR-10's binary batch files.
//
// A batch is nothing but 3073-byte records: 1 label byte (0..9), then the
// 32x32 red plane, green plane and blue plane, each row-major. That is
// exactly one CHW sample, so pixels are copied through unchanged. There is no
// header, so the file size is the only structural check: it must be a
// non-zero multiple of 3073 (30730000 bytes for each official batch).
#include <algorithm>
#include <climits>
#include <cstring>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/dataset.h"
#include "data/download_hints.h"
#include "data/file_io.h"

namespace hpmc {

namespace {

constexpr uint64_t kPixels = 3 * 32 * 32;
constexpr uint64_t kRecord = 1 + kPixels;
constexpr uint64_t kOfficialBatch = 10000 * kRecord;
using data_hints::kCifarGetIt;

// Records read per InputFile::read(): a few MB, so reading stays efficient
// without a second copy of the whole batch.
constexpr uint64_t kChunkRecords = 1024;

}  // namespace

Dataset load_cifar10(const std::vector<std::string>& batch_paths) {
  if (batch_paths.empty())
    throw DataError(
        str("no CIFAR-10 batch files given; expected data_batch_1.bin .. "
            "data_batch_5.bin or test_batch.bin; ",
            kCifarGetIt));

  // Pass 1: sizes only, so the tensors are allocated once at their final
  // size and nothing is read from a file that is the wrong shape. (A
  // gzipped batch is decompressed twice for that; the official archive
  // extracts to raw files, so that is the rare case.)
  std::vector<uint64_t> records;
  uint64_t total = 0;
  for (const std::string& p : batch_paths) {
    if (check_regular_file(p).problem == FileProblem::kMissing)
      throw DataError(str("CIFAR-10 batch file ", p, " not found; ", kCifarGetIt));
    uint64_t size = content_size(p);
    if (size == 0 || size % kRecord != 0) {
      std::string gz = is_gzip(p) ? " (after gunzipping)" : "";
      std::string cifar100 = size != 0 && size % (kRecord + 1) == 0
                                 ? " (it is a multiple of 3074, the record size of CIFAR-100, "
                                   "which hpmc does not read)"
                                 : "";
      throw DataError(
          str(p, ": not a CIFAR-10 binary batch: ",
              size == 0 ? "the file is empty (0 bytes)"
                        : str("the file holds ", size, " bytes", gz, cifar100),
              "; a batch must be a non-zero multiple of ", kRecord,
              " bytes (1 label byte + 3072 pixel bytes per image), and an official batch is ",
              kOfficialBatch, " bytes (10000 images); ", kCifarGetIt));
    }
    records.push_back(size / kRecord);
    total += size / kRecord;
  }
  if (total > uint64_t(INT_MAX))
    throw DataError(str("CIFAR-10 batches ", batch_paths.front(), " .. ", batch_paths.back(),
                        " hold ", total, " images, more than hpmc can index (2147483647)"));

  Dataset d;
  d.source =
      batch_paths.size() == 1 ? batch_paths[0] : batch_paths.front() + " .. " + batch_paths.back();
  d.num_classes = num_classes(DataFormat::kCifar10);
  d.images = Tensor::empty(Shape(int(total), 3, 32, 32), DType::kU8);
  d.labels = Tensor::empty(Shape(int(total), 1, 1, 1), DType::kI32);
  uint8_t* img = d.images.data<uint8_t>();
  int32_t* lab = d.labels.data<int32_t>();

  // Pass 2: the records, checked label by label.
  std::vector<uint8_t> buf(size_t(std::min<uint64_t>(kChunkRecords, total) * kRecord));
  uint64_t out = 0;
  for (size_t b = 0; b < batch_paths.size(); ++b) {
    InputFile f(batch_paths[b]);
    for (uint64_t r = 0; r < records[b];) {
      uint64_t m = std::min(kChunkRecords, records[b] - r);
      size_t want = size_t(m * kRecord);
      if (f.read(buf.data(), want) < want)
        throw DataError(str(f.path(), ": ended after ", f.position(), " of ", records[b] * kRecord,
                            " bytes; it changed while being read, try again"));
      for (uint64_t j = 0; j < m; ++j, ++out) {
        const uint8_t* rec = buf.data() + j * kRecord;
        if (rec[0] >= d.num_classes)
          throw DataError(str(f.path(), ": image ", r + j, " has label ", int(rec[0]),
                              ", outside 0..", d.num_classes - 1,
                              "; the file is corrupt or not a CIFAR-10 binary batch; ",
                              kCifarGetIt));
        lab[out] = rec[0];
        std::memcpy(img + out * kPixels, rec + 1, kPixels);
      }
      r += m;
    }
  }
  return d;
}

}  // namespace hpmc
