// file_io.h — reading dataset files that may or may not be gzip-compressed.
//
// Datasets are distributed both raw and gzipped (MNIST's official files are
// .gz; the Debian Fashion-MNIST package ships .gz; people often gunzip them),
// so every reader here looks at the bytes, not only the name: a file that
// starts with the gzip magic (1f 8b) is gunzipped, anything else is read as
// is — including a .gz-named file that a browser already decompressed.
// Corrupt or truncated gzip data is a DataError naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hpmc {

// A sequential reader over a file's (gunzipped) contents. Streaming lets a
// loader validate a header and then read the payload straight into its final
// buffer, so a dataset is never held twice in memory.
class InputFile {
 public:
  // DataError if the file is missing, is not a regular file (a directory, a
  // FIFO, a device: see core/regular_file.h), or cannot be opened.
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  // True when the contents are being gunzipped.
  bool compressed() const { return compressed_; }
  // Uncompressed bytes delivered so far.
  uint64_t position() const { return position_; }

  // Reads up to n bytes into dst and returns how many were read; fewer than
  // n only at the end of the data. DataError on corrupt or truncated gzip.
  size_t read(void* dst, size_t n);
  // Reads and discards the rest, returning how many bytes that was.
  uint64_t skip_rest();

 private:
  std::string path_;
  void* gz_ = nullptr;  // gzFile, kept opaque so zlib.h stays out of this header
  bool compressed_ = false;
  uint64_t position_ = 0;
};

// True when the file starts with the gzip magic bytes (false if unreadable).
bool is_gzip(const std::string& path);

// The ISIZE field of a gzip file's trailer: the uncompressed length, modulo
// 2^32, of its last member. Only a hint — a truncated file's last bytes are
// not a trailer — so callers that trust it must still check while reading.
// nullopt when the file is not gzip or too short.
std::optional<uint32_t> gzip_size_hint(const std::string& path);

// The exact length of the file's contents after gunzipping: the size on disk
// for a raw file; a gzip file is decompressed (and so checked) to count it.
uint64_t content_size(const std::string& path);

// The whole (gunzipped) contents of a file.
std::vector<uint8_t> read_file(const std::string& path);

}  // namespace hpmc
