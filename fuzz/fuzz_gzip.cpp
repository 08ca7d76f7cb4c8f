// fuzz_gzip.cpp — the dataset files' gzip path (data/file_io.h) on an
// arbitrary file: read_file, content_size, gzip_size_hint and InputFile
// reading in small pieces.
//
// The three ways of reading agree on the length and the bytes, and a file
// without the gzip magic comes back exactly as it is.
#include <algorithm>

#include "data/file_io.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpmc;
  const std::string path = fuzz::write_scratch("file.gz", data, size);
  const bool magic = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  if (is_gzip(path) != magic) fuzz::finding("is_gzip disagrees with the first two bytes");
  if (!magic && gzip_size_hint(path)) fuzz::finding("a size hint for a file that is not gzip");

  std::vector<uint8_t> whole;
  if (!fuzz::expect_clean([&] { whole = read_file(path); })) return 0;
  if (!magic && (whole.size() != size || !std::equal(whole.begin(), whole.end(), data)))
    fuzz::finding("a raw file did not come back as it is");
  uint64_t counted = 0;
  if (!fuzz::expect_clean([&] { counted = content_size(path); }))
    fuzz::finding("content_size failed where read_file succeeded");
  if (counted != whole.size()) fuzz::finding("content_size disagrees with read_file");

  std::vector<uint8_t> pieces;
  if (!fuzz::expect_clean([&] {
        InputFile f(path);
        if (f.compressed() != magic) fuzz::finding("compressed() disagrees with the magic");
        uint8_t buf[4099];  // an odd size, so reads straddle zlib's buffers
        for (size_t got; (got = f.read(buf, sizeof buf)) > 0;)
          pieces.insert(pieces.end(), buf, buf + got);
        if (f.skip_rest() != 0 || f.position() != pieces.size())
          fuzz::finding("InputFile's position disagrees with what it read");
      }))
    fuzz::finding("reading in pieces failed where read_file succeeded");
  if (pieces != whole) fuzz::finding("reading in pieces gave other bytes than read_file");
  return 0;
}
