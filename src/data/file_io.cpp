// file_io.cpp — InputFile and helpers over zlib's gz* stream interface.
//
// gzread() detects the gzip magic itself and passes other files through
// unchanged, checks each member's CRC-32 and length, and continues across
// concatenated members — everything a dataset reader needs. One trap: on a
// truncated stream it returns the bytes it did decode and only records
// Z_BUF_ERROR ("unexpected end of file"), so every read checks gzerror().
#include "data/file_io.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/regular_file.h"

namespace hpmc {

namespace fs = std::filesystem;

namespace {

gzFile as_gz(void* p) { return static_cast<gzFile>(p); }

// Large reads: the default 8 KiB buffer makes gunzipping a 26 MB file
// measurably slower.
constexpr unsigned kGzBuffer = 1u << 17;

// gzread takes an unsigned length and returns int, so big reads are chunked.
constexpr size_t kMaxChunk = size_t(1) << 30;

// deflate cannot compress better than about 1032:1; used to cap a size hint
// read from a possibly corrupt trailer before reserving memory for it.
constexpr uint64_t kMaxDeflateRatio = 1032;

}  // namespace

InputFile::InputFile(const std::string& path) : path_(path) {
  // A FIFO or a device would block or never end: only a regular file is opened.
  RegularFile file(path);
  if (file.missing()) throw DataError(str(path, ": file not found; check the path"));
  if (!file.ok())
    throw DataError(str(path, ": ", file.why(),
                        file.problem() == FileProblem::kUnreadable
                            ? ""
                            : "; hpmc reads a dataset file from disk: give the file itself"));
  errno = 0;
  gzFile f = gzdopen(file.fd(), "rb");
  if (!f) {
    int e = errno;
    throw DataError(str(path, ": cannot open: ", e ? std::strerror(e) : "out of memory"));
  }
  file.release();  // gzclose() closes it now
  gz_ = f;
  gzbuffer(f, kGzBuffer);
  // gzdirect() peeks at the first bytes, so it already knows the format.
  compressed_ = gzdirect(f) == 0;
  int errnum = Z_OK;
  gzerror(f, &errnum);
  if (errnum != Z_OK) {
    gzclose(f);
    gz_ = nullptr;
    throw DataError(str(path, ": cannot read: ", std::strerror(errno ? errno : EIO)));
  }
}

InputFile::~InputFile() {
  if (gz_) gzclose(as_gz(gz_));
}

size_t InputFile::read(void* dst, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < n) {
    size_t want = std::min(n - done, kMaxChunk);
    int got = gzread(as_gz(gz_), out + done, unsigned(want));
    int errnum = Z_OK;
    const char* msg = gzerror(as_gz(gz_), &errnum);
    if (got > 0) {
      done += size_t(got);
      position_ += uint64_t(got);
    }
    if (got < 0 || errnum != Z_OK) {
      if (errnum == Z_ERRNO)
        throw DataError(str(path_, ": read failed after ", position_,
                            " bytes: ", std::strerror(errno ? errno : EIO)));
      // zlib prefixes its message with the path; keep only the reason.
      std::string reason = msg ? msg : "unknown error";
      std::string prefix = path_ + ": ";
      if (reason.compare(0, prefix.size(), prefix) == 0) reason = reason.substr(prefix.size());
      const char* what = errnum == Z_BUF_ERROR ? "truncated" : "corrupt";
      throw DataError(str(path_, ": ", what, " gzip data (zlib: ", reason,
                          "); the file is damaged or incomplete, download it again"));
    }
    if (got == 0) break;  // end of data
  }
  return done;
}

uint64_t InputFile::skip_rest() {
  std::vector<uint8_t> buf(1 << 16);
  uint64_t total = 0;
  while (size_t got = read(buf.data(), buf.size())) total += got;
  return total;
}

bool is_gzip(const std::string& path) {
  RegularFile f(path);
  unsigned char magic[2] = {0, 0};
  if (!f.ok() || ::pread(f.fd(), magic, 2, 0) != 2) return false;
  return magic[0] == 0x1f && magic[1] == 0x8b;
}

std::optional<uint32_t> gzip_size_hint(const std::string& path) {
  if (!is_gzip(path)) return std::nullopt;
  RegularFile f(path);
  // 18 bytes: the smallest possible gzip file (10 header + 2 data + 8 trailer).
  if (!f.ok() || f.size() < 18) return std::nullopt;
  unsigned char b[4];
  if (::pread(f.fd(), b, 4, off_t(f.size() - 4)) != 4) return std::nullopt;
  // The gzip trailer is little-endian.
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

uint64_t content_size(const std::string& path) {
  if (!is_gzip(path)) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      uintmax_t size = fs::file_size(path, ec);
      if (!ec) return uint64_t(size);
    }
  }
  // Gzip, or something without a size on disk: count by reading (which
  // also produces the right error for a missing or unreadable file).
  InputFile f(path);
  return f.skip_rest();
}

std::vector<uint8_t> read_file(const std::string& path) {
  InputFile f(path);
  std::vector<uint8_t> data;
  std::error_code ec;
  uint64_t on_disk = fs::file_size(path, ec);
  if (ec) on_disk = 0;
  uint64_t expect = on_disk;
  if (f.compressed()) {
    auto hint = gzip_size_hint(path);
    expect = hint ? std::min<uint64_t>(*hint, on_disk * kMaxDeflateRatio) : 0;
  }
  // One byte more than expected, so the final read that finds the end does
  // not double the buffer.
  data.resize(size_t(expect) + 1);
  size_t used = 0;
  for (;;) {
    if (used == data.size()) data.resize(std::max<size_t>(data.size() * 2, 1 << 16));
    size_t got = f.read(data.data() + used, data.size() - used);
    used += got;
    if (got == 0) break;
  }
  data.resize(used);
  // Shrinking copies, so only when the hint was far off.
  if (data.capacity() - used > used / 4) data.shrink_to_fit();
  return data;
}

}  // namespace hpmc
