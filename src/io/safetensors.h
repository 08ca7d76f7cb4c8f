// safetensors.h — read and write checkpoints in the safetensors format
// (https://github.com/huggingface/safetensors), so they can be opened by
// PyTorch, NumPy or any other safetensors reader.
//
// Layout:
//   8 bytes   N, little-endian uint64: the header length
//   N bytes   UTF-8 JSON object, possibly right-padded with spaces:
//               {"__metadata__": {"key": "value", ...},              (optional)
//                "name": {"dtype": "F32", "shape": [d0, d1, ...],
//                         "data_offsets": [begin, end]}, ...}
//   rest      the data buffer; [begin, end) is relative to its start
// Tensors are little-endian and row-major (C order). The tensors must cover
// the data buffer exactly: no holes, no overlaps, nothing after the last.
//
// The reader trusts nothing in the file: the whole header is validated
// (every size and offset overflow-checked, and the covered span compared with
// the actual file size) before the data buffer is allocated, so a corrupt or
// hostile file gives a one-line DataError, never a crash or a huge allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hpmc {

// One tensor to write. `data` holds `bytes` bytes, little-endian, C order.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // a safetensors dtype name: "F32", "I64", "U8", ...
  std::vector<int64_t> shape;
  const void* data;
  size_t bytes;
};

// Writes `tensors` (data laid out contiguously in the given order) and
// `metadata` to `path` through AtomicFile, so a failure at any point leaves
// the previous file intact. The header is padded with spaces so the data
// starts at a multiple of 8. The entries are checked first (known dtype,
// bytes = product(shape) · dtype size, unique names, valid UTF-8): a mismatch
// is a bug in the caller and throws RuntimeError before anything is written.
// I/O failures throw RuntimeError.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata);

// A tensor's description in a file read; [begin, end) is within the data buffer.
struct SafetensorsTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;
};

class SafetensorsFile {
 public:
  // Reads and validates the whole file. Throws DataError naming the file and
  // what was expected vs found for anything malformed, RuntimeError if the
  // file cannot be opened or read.
  static SafetensorsFile read(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // In data-offset order (which need not be the header's key order).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // nullptr if there is no tensor of that name.
  const SafetensorsTensor* find(const std::string& name) const;
  // Pointer into the loaded buffer. Files from other writers need not align
  // tensors, so the pointer may be unaligned for the dtype: memcpy from it.
  const void* data(const SafetensorsTensor& t) const;
  // Copies tensor `name` into `dst` (room for product(shape) elements) after
  // checking that it exists, has `dtype` and has as many elements as `shape`;
  // otherwise throws DataError naming the file, the tensor, expected and found.
  void copy_to(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
               void* dst) const;

 private:
  SafetensorsFile() = default;

  std::string path_;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;  // name -> position in tensors_
  std::unique_ptr<unsigned char[]> buffer_;
  size_t buffer_bytes_ = 0;
};

// Bytes per element of a safetensors dtype ("F64", "F32", "F16", "BF16",
// "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL", "F8_E4M3",
// "F8_E5M2", "F8_E8M0", "C64"); 0 if unknown. Sub-byte types (F4, F6_*) are
// not supported and also give 0.
size_t safetensors_dtype_size(const std::string& dtype);

}  // namespace hpmc
