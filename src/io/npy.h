// npy.h — NumPy .npy files (format version 1.0, NEP 1): exporting features
// and labels that Python tools read with numpy.load(), and reading arrays
// (the npy data format, data/npy_data.cpp).
//
// File layout: the magic "\x93NUMPY", version bytes 1 0, a little-endian
// uint16 header length, then the header: an ASCII Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (10, 3), }
// padded with spaces and ended by '\n' so that magic + version + length +
// header is a multiple of 64 bytes; then the data, C order, little-endian.
// Every writer here goes through AtomicFile: a failed or abandoned write
// leaves the previous file (or none) in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hpmc {

class AtomicFile;

enum class NpyDtype { kFloat32, kInt32 };

// "<f4" or "<i4".
const char* npy_descr(NpyDtype dtype);

// Everything before the data: magic, version, length and padded header.
// Throws RuntimeError for a negative dimension.
std::string npy_header(NpyDtype dtype, const std::vector<int64_t>& shape);

// The whole array at once; `data` holds product(shape) values (1 for shape {}).
void write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape);
void write_npy(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape);

// The same file, written in pieces for arrays too large to hold in memory:
//   NpyWriter w(path, NpyDtype::kFloat32, {n, 512});
//   for (each batch) w.append(features, rows * 512);
//   w.commit();
// The header goes first, so the shape must be known up front. commit() checks
// that exactly product(shape) values were appended. Any error (a mismatched
// count, the wrong dtype, a failed write) abandons the writer: the temporary
// file is removed at once, `path` is untouched, and later calls throw.
class NpyWriter {
 public:
  NpyWriter(const std::string& path, NpyDtype dtype, std::vector<int64_t> shape);
  ~NpyWriter();
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;

  void append(const float* data, size_t n);
  void append(const int32_t* data, size_t n);
  void commit();

  int64_t expected() const { return expected_; }  // product(shape)
  int64_t written() const { return written_; }

 private:
  void append_bytes(NpyDtype dtype, const void* data, size_t n);
  void fail(const std::string& msg);  // abandons the file, then throws RuntimeError

  std::string path_;
  NpyDtype dtype_;
  std::vector<int64_t> shape_;
  std::unique_ptr<AtomicFile> file_;  // null once committed or abandoned
  int64_t expected_ = 0, written_ = 0;
};

// A .npy file as stored: enough to check what a writer produced, and to read
// arrays back without interpreting every dtype.
struct NpyArray {
  std::string descr;  // e.g. "<f4"
  bool fortran_order = false;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // the raw bytes after the header
  int64_t numel() const;
};

// Reads a .npy file of format version 1.x, 2.x or 3.x. Throws DataError for a
// missing or unreadable file, a bad magic or header, or data whose size does
// not match descr and shape.
NpyArray read_npy(const std::string& path);

// The header alone, with the same checks as read_npy (the file's size among
// them), for readers that stream a large array into a buffer of their own.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  int64_t item_size = 0;     // bytes per element, from descr
  uint64_t data_offset = 0;  // where the data starts in the file
  uint64_t data_bytes = 0;   // numel() * item_size, what the file holds after the header
  int64_t numel() const;
};
NpyHeader read_npy_header(const std::string& path);

// Reads data bytes [offset, offset + bytes) of the file whose header is `h`
// into dst. DataError if the file cannot be read or is no longer the size
// its header gave.
void read_npy_data(const std::string& path, const NpyHeader& h, uint64_t offset, void* dst,
                   size_t bytes);

}  // namespace hpmc
