// image_decode.cpp — the integrity checks, stb_image decoding and the
// channel and size conversion described in image_decode.h.
#include "io/image_decode.h"

#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include <stb_image.h>
#include <stb_image_resize.h>

#include "core/error.h"
#include "core/regular_file.h"

namespace hpmc {

namespace {

constexpr unsigned char kPngSignature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};

uint32_t be32(const unsigned char* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}
uint32_t le32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t le16(const unsigned char* p) { return uint16_t(p[0] | p[1] << 8); }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw DataError(str(path, ": ", what));
}

bool starts_with(const std::string& b, const char* magic, size_t n) {
  return b.size() >= n && std::memcmp(b.data(), magic, n) == 0;
}

// What a file that is not a PNG, JPEG or BMP looks like, for the message.
std::string what_it_is(const std::string& b) {
  if (starts_with(b, "GIF8", 4)) return "a GIF image";
  if (b.size() >= 12 && starts_with(b, "RIFF", 4) && b.compare(8, 4, "WEBP") == 0)
    return "a WebP image";
  if (starts_with(b, "II*\0", 4) || starts_with(b, "MM\0*", 4)) return "a TIFF image";
  if (starts_with(b, "\x93NUMPY", 6)) return "a .npy array (use data.format: npy)";
  bool text = true;
  for (size_t i = 0; i < b.size() && i < 64; ++i) {
    unsigned char c = static_cast<unsigned char>(b[i]);
    if (c < 0x09 || (c > 0x0d && c < 0x20) || c == 0x7f) text = false;
  }
  if (text) return str("text starting '", printable(b, 24), "'");
  return str("bytes starting '", printable(b, 8), "'");
}

// Chunk by chunk: each inside the file, its CRC right, IHDR first, IEND last.
void check_png(const std::string& b, const std::string& path) {
  const auto* p = reinterpret_cast<const unsigned char*>(b.data());
  const size_t n = b.size();
  size_t at = sizeof kPngSignature;
  bool first = true;
  while (true) {
    if (n - at < 12)
      fail(path, str("truncated PNG: it ends after ", n, " bytes without an IEND chunk; the file "
                     "is incomplete, copy or export it again"));
    const uint32_t len = be32(p + at);
    const std::string type(b, at + 4, 4);
    if (len > 0x7fffffffu)
      fail(path, str("corrupt PNG: chunk '", printable(type), "' at byte ", at, " claims ", len,
                     " bytes"));
    if (n - at - 12 < len)
      fail(path, str("truncated PNG: chunk '", printable(type), "' at byte ", at, " needs ",
                     12 + uint64_t(len), " bytes but the file ends after ", n - at,
                     "; the file is incomplete, copy or export it again"));
    if (first && type != "IHDR")
      fail(path, str("corrupt PNG: the first chunk is '", printable(type), "', not IHDR"));
    first = false;
    const uLong crc = crc32(crc32(0L, Z_NULL, 0), p + at + 4, uInt(len + 4));
    if (crc != be32(p + at + 8 + len))
      fail(path, str("corrupt PNG: the CRC of chunk '", printable(type), "' at byte ", at,
                     " does not match its data; the file is damaged"));
    at += 12 + size_t(len);
    if (type == "IEND") return;
  }
}

// A scan's entropy-coded data never holds 0xFF followed by a marker other
// than a restart (a data 0xFF is stuffed as FF 00), so the last FF DA is the
// last scan's start and an end-of-image FF D9 after it ends the image.
void check_jpeg(const std::string& b, const std::string& path) {
  const auto* p = reinterpret_cast<const unsigned char*>(b.data());
  size_t sos = std::string::npos;
  for (size_t i = b.size() - 1; i-- > 2;)
    if (p[i] == 0xFF && p[i + 1] == 0xDA) {
      sos = i;
      break;
    }
  if (sos == std::string::npos)
    fail(path, str("truncated or corrupt JPEG: no start-of-scan marker in its ", b.size(),
                   " bytes; the file is incomplete, copy or export it again"));
  for (size_t i = sos + 2; i + 1 < b.size(); ++i)
    if (p[i] == 0xFF && p[i + 1] == 0xD9) return;
  fail(path, str("truncated JPEG: its last scan (from byte ", sos, ") has no end-of-image marker "
                 "in the file's ", b.size(), " bytes; the file is incomplete, copy or export it "
                 "again"));
}

std::string marker_name(unsigned m) {
  static const char* hex = "0123456789ABCDEF";
  return str("FF", hex[(m >> 4) & 15], hex[m & 15]);
}

// stb_image (Debian's 2.27) decodes a scan with the Huffman tables it names
// without checking that a DHT segment defined them (it reads uninitialised
// memory and indexes past its tables), and builds a DHT table of more than
// 256 codes past the end of its arrays. Both only come from damaged files;
// they are refused here from a walk over the segments as stb reads them:
// a marker after any bytes that are not one (stb skips them) and any FF
// fill, the segment's length, a scan's entropy-coded data up to the next
// marker other than a stuffed FF 00 or a restart, the end at end-of-image.
void check_jpeg_tables(const std::string& b, const std::string& path) {
  const auto* p = reinterpret_cast<const unsigned char*>(b.data());
  const size_t n = b.size();
  bool dc[4] = {}, ac[4] = {};
  bool progressive = false;
  size_t at = 2;  // after start-of-image
  while (true) {
    while (at < n && p[at] != 0xFF) ++at;
    while (at < n && p[at] == 0xFF) ++at;
    if (at >= n)
      fail(path, str("corrupt JPEG: its segments run to the end of the file (", n,
                     " bytes) without an end-of-image marker; the file is damaged"));
    const unsigned m = p[at++];
    const size_t seg = at - 2;
    if (m == 0xD9) return;
    if ((m >= 0xD0 && m <= 0xD8) || m == 0x01) continue;  // no length
    const size_t len = n - at < 2 ? 0 : size_t(p[at]) << 8 | p[at + 1];
    if (len < 2 || len > n - at)
      fail(path, str("truncated JPEG: the ", marker_name(m), " segment at byte ", seg,
                     " runs past the file's end (", n, " bytes); the file is incomplete, copy "
                     "or export it again"));
    const unsigned char* s = p + at + 2;
    const size_t sl = len - 2;
    at += len;
    if (m == 0xC0 || m == 0xC1 || m == 0xC2) {
      progressive = m == 0xC2;
    } else if (m == 0xC4) {
      for (size_t i = 0; i < sl;) {
        if (sl - i < 17)
          fail(path, str("corrupt JPEG: the Huffman table segment at byte ", seg,
                         " ends inside a table's code counts; the file is damaged"));
        const unsigned tc = s[i] >> 4, th = s[i] & 15;
        size_t codes = 0;
        for (int k = 1; k <= 16; ++k) codes += s[i + k];
        if (tc > 1 || th > 3)
          fail(path, str("corrupt JPEG: the Huffman table segment at byte ", seg, " defines "
                         "table class ", tc, " number ", th, "; JPEG has classes 0-1 and "
                         "numbers 0-3; the file is damaged"));
        if (codes > 256)
          fail(path, str("corrupt JPEG: ", tc ? "AC" : "DC", " Huffman table ", th,
                         " (segment at byte ", seg, ") has ", codes, " codes; a table holds at "
                         "most 256; the file is damaged"));
        if (sl - i - 17 < codes)
          fail(path, str("corrupt JPEG: ", tc ? "AC" : "DC", " Huffman table ", th,
                         " (segment at byte ", seg, ") has ", codes, " codes but its segment "
                         "ends before their values; the file is damaged"));
        (tc ? ac : dc)[th] = true;
        i += 17 + codes;
      }
    } else if (m == 0xDA) {
      const size_t ns = sl ? s[0] : 0;
      if (ns < 1 || ns > 4 || sl != 4 + 2 * ns)
        fail(path, str("corrupt JPEG: the scan header at byte ", seg, " is ", sl + 2,
                       " bytes for ", ns, " components; the file is damaged"));
      const unsigned ss = s[1 + 2 * ns], ah = s[3 + 2 * ns] >> 4;
      // Baseline scans decode with both tables; a progressive scan with the
      // DC table in a first DC pass, with the AC table in an AC pass.
      const bool uses_dc = !progressive || (ss == 0 && ah == 0);
      const bool uses_ac = !progressive || ss > 0;
      for (size_t c = 0; c < ns; ++c) {
        const unsigned td = s[2 + 2 * c] >> 4, ta = s[2 + 2 * c] & 15;
        const bool dc_missing = uses_dc && (td > 3 || !dc[td]);
        if (dc_missing || (uses_ac && (ta > 3 || !ac[ta])))
          fail(path, str("corrupt JPEG: the scan at byte ", seg, " decodes component ",
                         int(s[1 + 2 * c]), " with ", dc_missing ? "DC" : "AC",
                         " Huffman table ", dc_missing ? td : ta, ", which no segment "
                         "before it defines; the file is damaged"));
      }
      while (at + 1 < n && !(p[at] == 0xFF && p[at + 1] != 0 && p[at + 1] != 0xFF &&
                             (p[at + 1] < 0xD0 || p[at + 1] > 0xD7)))
        ++at;
    }
  }
}

// The uncompressed pixel array must lie inside the file (stb would read
// zeros past its end).
void check_bmp(const std::string& b, const std::string& path) {
  const auto* p = reinterpret_cast<const unsigned char*>(b.data());
  if (b.size() < 26)
    fail(path, str("truncated BMP: ", b.size(), " bytes, less than its headers"));
  const uint32_t offset = le32(p + 10), dib = le32(p + 14);
  int64_t w = 0, h = 0;
  uint32_t bpp = 0, compression = 0;
  if (dib == 12) {
    w = le16(p + 18), h = le16(p + 20), bpp = le16(p + 24);
  } else if (dib >= 40) {
    if (b.size() < 34) fail(path, str("truncated BMP: ", b.size(), " bytes, less than its headers"));
    w = int32_t(le32(p + 18)), h = int32_t(le32(p + 22)), bpp = le16(p + 28);
    compression = le32(p + 30);
  } else {
    fail(path, str("corrupt BMP: unknown header size ", dib));
  }
  // 0: BI_RGB, 3: BI_BITFIELDS, 6: BI_ALPHABITFIELDS; the rest are
  // compressed (which stb refuses with its own message).
  if (compression != 0 && compression != 3 && compression != 6) return;
  if (w <= 0 || h == 0 || h == INT32_MIN || bpp == 0 || bpp > 32)
    fail(path, str("corrupt BMP: ", w, "x", h, " pixels of ", bpp, " bits"));
  const uint64_t row = (uint64_t(w) * bpp + 31) / 32 * 4;
  const uint64_t need = offset + row * uint64_t(h < 0 ? -h : h);
  if (need > b.size())
    fail(path, str("truncated BMP: its ", w, "x", h < 0 ? -h : h, " pixels need ", need,
                   " bytes but the file holds ", b.size(), "; the file is incomplete, copy or "
                   "export it again"));
}

}  // namespace

const char* image_kind_name(ImageKind k) {
  switch (k) {
    case ImageKind::kPng:
      return "PNG";
    case ImageKind::kJpeg:
      return "JPEG";
    case ImageKind::kBmp:
      return "BMP";
  }
  return "?";
}

ImageHeader image_header(const std::string& b, const std::string& path, int64_t max_pixels) {
  if (b.empty()) fail(path, "the file is empty (0 bytes), not an image");
  ImageHeader h;
  if (starts_with(b, reinterpret_cast<const char*>(kPngSignature), sizeof kPngSignature)) {
    h.kind = ImageKind::kPng;
    check_png(b, path);
  } else if (starts_with(b, "\xFF\xD8\xFF", 3)) {
    h.kind = ImageKind::kJpeg;
    check_jpeg(b, path);
    check_jpeg_tables(b, path);
  } else if (starts_with(b, "BM", 2)) {
    h.kind = ImageKind::kBmp;
    check_bmp(b, path);
  } else {
    fail(path, str("not a PNG, JPEG or BMP image (", what_it_is(b),
                   "); hpmc reads those three: convert it, or move it out of the data"));
  }
  if (b.size() > size_t(INT_MAX))
    fail(path, str("the ", image_kind_name(h.kind), " file is ", b.size(),
                   " bytes, more than hpmc reads (2 GiB)"));
  const auto* p = reinterpret_cast<const stbi_uc*>(b.data());
  if (!stbi_info_from_memory(p, int(b.size()), &h.width, &h.height, &h.channels))
    fail(path, str("corrupt ", image_kind_name(h.kind), ": its header cannot be read (",
                   stbi_failure_reason(), ")"));
  if (h.width < 1 || h.height < 1 || h.channels < 1 || h.channels > 4)
    fail(path, str("corrupt ", image_kind_name(h.kind), ": ", h.width, "x", h.height, " pixels of ",
                   h.channels, " channels"));
  if (int64_t(h.width) * h.height > max_pixels)
    fail(path, str("the ", image_kind_name(h.kind), " image is ", h.width, "x", h.height,
                   " pixels, more than the ", max_pixels, " hpmc decodes; shrink it first"));
  return h;
}

DecodedImage decode_image(const std::string& b, const std::string& path, int64_t max_pixels) {
  const ImageHeader h = image_header(b, path, max_pixels);
  int w = 0, hh = 0, c = 0;
  stbi_uc* px = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(b.data()), int(b.size()),
                                      &w, &hh, &c, 0);
  if (!px)
    fail(path, str("corrupt ", image_kind_name(h.kind), ": it cannot be decoded (",
                   stbi_failure_reason(), "); the file is damaged"));
  DecodedImage img;
  img.width = w, img.height = hh, img.channels = c;
  if (w != h.width || hh != h.height || c != h.channels) {
    stbi_image_free(px);
    fail(path, str("corrupt ", image_kind_name(h.kind), ": its header says ", h.width, "x",
                   h.height, "x", h.channels, " but it decodes to ", w, "x", hh, "x", c));
  }
  img.pixels.assign(px, px + size_t(w) * size_t(hh) * size_t(c));
  stbi_image_free(px);
  return img;
}

std::string read_image_bytes(const std::string& path) {
  RegularFile f(path);
  if (!f.ok()) {
    if (f.missing()) fail(path, "no such image file");
    fail(path, str(f.why(), "; give image files (PNG, JPEG, BMP)"));
  }
  std::string b;
  b.reserve(size_t(f.size()));
  if (!f.read_up_to(b, std::string::npos))
    fail(path, str("cannot read it: ", std::strerror(errno)));
  return b;
}

int model_channels(int stored) { return stored <= 2 ? 1 : 3; }

void to_chw(const DecodedImage& img, int channels, int height, int width, uint8_t* dst) {
  HPMC_CHECK((channels == 1 || channels == 3) && height > 0 && width > 0 && img.channels >= 1 &&
                 img.channels <= 4 &&
                 img.pixels.size() == size_t(img.width) * img.height * img.channels,
             "to_chw of a ", img.width, "x", img.height, "x", img.channels, " image to ",
             channels, "x", height, "x", width);
  const size_t n = size_t(img.width) * size_t(img.height);
  const int sc = img.channels;
  const uint8_t* in = img.pixels.data();
  // Channels first (so a colour image shrinks to grey before it is resized).
  std::vector<uint8_t> converted;
  const uint8_t* hwc = in;
  if (sc != channels) {
    converted.resize(n * size_t(channels));
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* s = in + i * size_t(sc);
      uint8_t* d = converted.data() + i * size_t(channels);
      if (channels == 1) {
        d[0] = sc <= 2 ? s[0] : uint8_t((299u * s[0] + 587u * s[1] + 114u * s[2] + 500u) / 1000u);
      } else if (sc <= 2) {
        d[0] = d[1] = d[2] = s[0];
      } else {
        d[0] = s[0], d[1] = s[1], d[2] = s[2];
      }
    }
    hwc = converted.data();
  }
  std::vector<uint8_t> resized;
  if (img.height != height || img.width != width) {
    resized.resize(size_t(height) * size_t(width) * size_t(channels));
    if (!stbir_resize_uint8_generic(hwc, img.width, img.height, 0, resized.data(), width, height,
                                    0, channels, STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP,
                                    STBIR_FILTER_TRIANGLE, STBIR_COLORSPACE_LINEAR, nullptr))
      throw std::bad_alloc();  // its only failure is an allocation
    hwc = resized.data();
  }
  const size_t plane = size_t(height) * size_t(width);
  for (int k = 0; k < channels; ++k)
    for (size_t i = 0; i < plane; ++i) dst[size_t(k) * plane + i] = hwc[i * size_t(channels) + size_t(k)];
}

}  // namespace hpmc
