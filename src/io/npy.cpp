// npy.cpp — .npy writing (one-shot and streaming) and a strict reader.
//
// The data bytes are written exactly as they lie in memory, which matches the
// '<' (little-endian) descr only on a little-endian machine; the
// static_assert below stops a big-endian build rather than writing wrong files.
#include "io/npy.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/regular_file.h"

namespace hpmc {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "npy.cpp writes native bytes under a little-endian descr");

namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes, then the version
constexpr size_t kMagicLen = 6;

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw RuntimeError(str("npy shape has a negative dimension (", d, ")"));
    if (__builtin_mul_overflow(n, d, &n))
      throw RuntimeError("npy shape has more elements than fit in 64 bits");
  }
  return n;
}

// Python tuple syntax: "()", "(5,)", "(2, 3)".
std::string shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

template <typename T>
void write_whole(const std::string& path, NpyDtype dtype, const T* data,
                 const std::vector<int64_t>& shape) {
  std::string header = npy_header(dtype, shape);  // validates the shape
  size_t n = size_t(element_count(shape));
  HPMC_CHECK(data || n == 0, "write_npy of ", n, " values from a null pointer");
  AtomicFile f(path);
  f.write(header);
  f.write(data, n * sizeof(T));
  f.commit();
}

// ---- reading ---------------------------------------------------------------

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw DataError(str(path, ": not a valid .npy file: ", what));
}

// A parser for the one Python literal a .npy header holds: a dict whose
// values are strings, True/False or tuples of integers.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, std::string text) : path_(path), s_(std::move(text)) {}

  NpyArray parse() {
    NpyArray a;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!peek('}')) {
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        a.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        a.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        a.shape = int_tuple();
        have_shape = true;
      } else {
        bad(path_, str("unexpected header key '", printable(key), "'"));
      }
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != s_.size()) bad(path_, "text after the header dict");
    if (!have_descr || !have_order || !have_shape)
      bad(path_, "header lacks one of 'descr', 'fortran_order', 'shape'");
    return a;
  }

 private:
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) bad(path_, str("expected '", c, "' at header offset ", pos_));
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      bad(path_, str("expected a string at header offset ", pos_));
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == std::string::npos) bad(path_, "unterminated string in the header");
    std::string v = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return v;
  }
  bool boolean() {
    skip_space();
    for (const char* word : {"True", "False"}) {
      if (s_.compare(pos_, std::char_traits<char>::length(word), word) == 0) {
        pos_ += std::char_traits<char>::length(word);
        return word[0] == 'T';
      }
    }
    bad(path_, "fortran_order is neither True nor False");
  }
  std::vector<int64_t> int_tuple() {
    std::vector<int64_t> v;
    expect('(');
    while (!peek(')')) {
      size_t start = pos_;
      int64_t d = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        if (__builtin_mul_overflow(d, 10, &d) || __builtin_add_overflow(d, s_[pos_] - '0', &d))
          bad(path_, "shape dimension too large");
        ++pos_;
      }
      if (pos_ == start) bad(path_, str("expected a dimension at header offset ", pos_));
      v.push_back(d);
      if (!peek(')')) expect(',');
    }
    expect(')');
    return v;
  }

  const std::string& path_;
  std::string s_;
  size_t pos_ = 0;
};

// Bytes per element from a descr such as "<f4", "|u1" or "<U8" (UCS-4 text).
int64_t item_size(const std::string& path, const std::string& descr) {
  bool ok = descr.size() >= 3 && std::string("<>|=").find(descr[0]) != std::string::npos &&
            std::isalpha(static_cast<unsigned char>(descr[1])) &&
            descr.find_first_not_of("0123456789", 2) == std::string::npos && descr.size() <= 12;
  if (!ok) bad(path, str("unsupported dtype '", printable(descr), "'"));
  int64_t size = std::stoll(descr.substr(2));
  return descr[1] == 'U' ? 4 * size : size;
}

uint32_t little_endian(const std::string& b, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + size_t(i)]);
  return v;
}

}  // namespace

const char* npy_descr(NpyDtype dtype) { return dtype == NpyDtype::kFloat32 ? "<f4" : "<i4"; }

std::string npy_header(NpyDtype dtype, const std::vector<int64_t>& shape) {
  element_count(shape);  // rejects negative dimensions
  std::string dict = str("{'descr': '", npy_descr(dtype),
                         "', 'fortran_order': False, 'shape': ", shape_tuple(shape), ", }");
  // Pad so the data starts 64-byte aligned (NEP 1); the padding ends in '\n'.
  const size_t prefix = kMagicLen + 2 + 2;
  size_t total = prefix + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 65535)
    throw RuntimeError(str("npy header for shape ", shape_tuple(shape), " is too long"));
  std::string out(kMagic, kMagicLen);
  out += '\x01';
  out += '\x00';
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  return out + dict;
}

void write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  write_whole(path, NpyDtype::kFloat32, data, shape);
}

void write_npy(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape) {
  write_whole(path, NpyDtype::kInt32, data, shape);
}

// ---- NpyWriter ---------------------------------------------------------------

NpyWriter::NpyWriter(const std::string& path, NpyDtype dtype, std::vector<int64_t> shape)
    : path_(path), dtype_(dtype), shape_(std::move(shape)) {
  std::string header = npy_header(dtype_, shape_);
  expected_ = element_count(shape_);
  file_ = std::make_unique<AtomicFile>(path_);
  try {
    file_->write(header);
  } catch (...) {
    file_.reset();
    throw;
  }
}

NpyWriter::~NpyWriter() = default;

void NpyWriter::fail(const std::string& msg) {
  file_.reset();  // removes the temporary file now, not when the writer dies
  throw RuntimeError(str(path_, ": ", msg, "; nothing was written"));
}

void NpyWriter::append_bytes(NpyDtype dtype, const void* data, size_t n) {
  if (!file_)
    throw RuntimeError(str(path_, ": append to an NpyWriter already committed or abandoned"));
  if (dtype != dtype_)
    fail(str("appending ", npy_descr(dtype), " values to a ", npy_descr(dtype_), " array"));
  if (n > uint64_t(expected_ - written_))
    fail(str("appending ", n, " values after ", written_, " overruns shape ", shape_tuple(shape_),
             " (", expected_, " values)"));
  HPMC_CHECK(data || n == 0, "NpyWriter::append of ", n, " values from a null pointer");
  try {
    file_->write(data, n * 4);
  } catch (...) {
    file_.reset();
    throw;
  }
  written_ += int64_t(n);
}

void NpyWriter::append(const float* data, size_t n) { append_bytes(NpyDtype::kFloat32, data, n); }
void NpyWriter::append(const int32_t* data, size_t n) { append_bytes(NpyDtype::kInt32, data, n); }

void NpyWriter::commit() {
  if (!file_)
    throw RuntimeError(str(path_, ": commit of an NpyWriter already committed or abandoned"));
  if (written_ != expected_)
    fail(str("only ", written_, " of the ", expected_, " values of shape ", shape_tuple(shape_),
             " were appended"));
  try {
    file_->commit();
  } catch (...) {
    file_.reset();
    throw;
  }
  file_.reset();
}

// ---- reading -------------------------------------------------------------------

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// The header of an open file: parsed, checked against the file's size, and
// the file left positioned at the first data byte.
NpyHeader read_header(RegularFile& f, const std::string& path) {
  if (!f.ok()) throw DataError(str("cannot open ", path, ": it ", f.why()));
  std::string b;
  if (!f.read_up_to(b, 10)) throw DataError(str("cannot read ", path));
  if (b.size() < 10 || b.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    bad(path, "no \\x93NUMPY magic");
  int major = static_cast<unsigned char>(b[6]);
  if (major < 1 || major > 3) bad(path, str("unknown format version ", major));
  size_t len_bytes = major == 1 ? 2 : 4;
  size_t start = kMagicLen + 2 + len_bytes;
  if (!f.read_up_to(b, start - b.size())) throw DataError(str("cannot read ", path));
  if (b.size() < start) bad(path, "truncated header");
  size_t header_len = little_endian(b, kMagicLen + 2, int(len_bytes));
  // No real header comes near this; it keeps a corrupt length from
  // allocating gigabytes before the file's size is looked at.
  if (header_len > f.size()) bad(path, "truncated header");
  std::string text;
  if (!f.read_up_to(text, header_len)) throw DataError(str("cannot read ", path));
  if (text.size() < header_len) bad(path, "truncated header");

  NpyArray a = HeaderParser(path, text).parse();
  NpyHeader h;
  h.descr = a.descr;
  h.fortran_order = a.fortran_order;
  h.shape = a.shape;
  h.item_size = item_size(path, a.descr);
  int64_t count = 0, bytes = 0;
  try {
    count = element_count(a.shape);
  } catch (const RuntimeError& e) {
    bad(path, e.what());
  }
  if (__builtin_mul_overflow(count, h.item_size, &bytes)) bad(path, "shape too large");
  h.data_offset = start + header_len;
  h.data_bytes = uint64_t(bytes);
  if (f.size() - h.data_offset != h.data_bytes)
    bad(path, str("shape ", shape_tuple(a.shape), " of ", a.descr, " needs ", bytes,
                  " data bytes, the file has ", f.size() - h.data_offset));
  return h;
}

}  // namespace

int64_t NpyHeader::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NpyHeader read_npy_header(const std::string& path) {
  RegularFile f(path);  // a FIFO would block, a device never end
  return read_header(f, path);
}

void read_npy_data(const std::string& path, const NpyHeader& h, uint64_t offset, void* dst,
                   size_t bytes) {
  HPMC_CHECK(offset <= h.data_bytes && bytes <= h.data_bytes - offset, "read_npy_data: bytes [",
             offset, ", ", offset + bytes, ") outside the ", h.data_bytes, " data bytes of ", path);
  RegularFile f(path);
  if (!f.ok()) throw DataError(str("cannot open ", path, ": it ", f.why()));
  if (f.size() != h.data_offset + h.data_bytes)
    throw DataError(str(path, ": the file changed while it was being read (it is ", f.size(),
                        " bytes, its header said ", h.data_offset + h.data_bytes, ")"));
  auto* p = static_cast<uint8_t*>(dst);
  uint64_t at = h.data_offset + offset;
  while (bytes > 0) {
    ssize_t got = ::pread(f.fd(), p, std::min<size_t>(bytes, size_t(1) << 30), off_t(at));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw DataError(str("cannot read ", path, got < 0 ? str(": ", std::strerror(errno))
                                                        : std::string(": it ended early")));
    p += got;
    at += uint64_t(got);
    bytes -= size_t(got);
  }
}

NpyArray read_npy(const std::string& path) {
  RegularFile f(path);  // a FIFO would block, a device never end
  NpyHeader h = read_header(f, path);
  NpyArray a;
  a.descr = h.descr;
  a.fortran_order = h.fortran_order;
  a.shape = h.shape;
  std::string b;
  if (!f.read_up_to(b, size_t(h.data_bytes))) throw DataError(str("cannot read ", path));
  if (b.size() != h.data_bytes)
    bad(path, str("shape ", shape_tuple(h.shape), " of ", h.descr, " needs ", h.data_bytes,
                  " data bytes, the file has ", b.size()));
  a.data.assign(b.begin(), b.end());
  return a;
}

}  // namespace hpmc
