// safetensors.cpp — the safetensors writer and validating reader (format in
// safetensors.h).
//
// Reading goes: length prefix -> header text -> JSON -> tensor entries ->
// coverage of the data buffer -> comparison with the real file size, and only
// then allocates and reads the data. Every size derived from the file is
// checked for overflow, since a hostile header may hold any 64-bit number.
#include "io/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "io/json.h"

namespace hpmc {

static_assert(sizeof(size_t) == 8, "safetensors offsets are 64-bit; hpmc needs a 64-bit size_t");
// Tensor bytes are passed through unchanged, which is right only because the
// host, like the format, is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace {

// The reference implementation's limit too: no real header comes near it.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A parsed JSON value takes ~100 bytes, so 100 MB of "0,0,..." would expand
// to gigabytes. A tensor needs about 8 values: this allows ~100k tensors,
// far more than any hpmc model, in at most a few hundred MB.
constexpr size_t kMaxHeaderValues = 1'000'000;
constexpr size_t kLengthPrefixBytes = 8;
const char* const kMetadataKey = "__metadata__";

struct DtypeInfo {
  const char* name;
  size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
    {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},     {"U16", 2},
    {"U8", 1},  {"BOOL", 1}, {"C64", 8},
};

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// product(shape), or false if it overflows 64 bits or a dimension is negative.
bool element_count(const std::vector<int64_t>& shape, uint64_t* count) {
  uint64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || !checked_mul(n, static_cast<uint64_t>(d), &n)) return false;
  *count = n;
  return true;
}

// A name as it appears in messages: quoted and escaped, so one line stays one line.
std::string quoted(const std::string& s) { return json_quote(s); }

void put_u64_le(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t get_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// ---- writing ---------------------------------------------------------------

// Entry problems are caller bugs (the checkpoint code builds the entries), so
// they are internal errors, raised before the file is touched.
void check_entries(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                   const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  for (const SafetensorsEntry& e : tensors) {
    std::string where = str("writing ", path, ": tensor ", quoted(e.name));
    size_t size = safetensors_dtype_size(e.dtype);
    HPMC_CHECK(size > 0, where, " has unknown dtype ", quoted(e.dtype));
    HPMC_CHECK(is_valid_utf8(e.name), where, ": the name is not valid UTF-8");
    HPMC_CHECK(e.name != kMetadataKey, where, ": the name is reserved");
    HPMC_CHECK(names.insert(e.name).second, where, " appears twice");
    uint64_t count = 0, bytes = 0;
    HPMC_CHECK(element_count(e.shape, &count) && checked_mul(count, size, &bytes), where,
               ": invalid shape ", shape_str(e.shape));
    HPMC_CHECK(bytes == e.bytes, where, ": shape ", shape_str(e.shape), " of ", e.dtype, " needs ", bytes,
               " bytes, given ", e.bytes);
    HPMC_CHECK(e.data || e.bytes == 0, where, ": no data");
  }
  for (const auto& [key, value] : metadata)
    HPMC_CHECK(is_valid_utf8(key) && is_valid_utf8(value), "writing ", path, ": metadata ", quoted(key),
               " is not valid UTF-8");
}

std::string metadata_json(const std::map<std::string, std::string>& metadata) {
  std::string s = json_quote(kMetadataKey) + ":{";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    s += (first ? "" : ",") + json_quote(key) + ":" + json_quote(value);
    first = false;
  }
  return s + "}";
}

std::string tensor_json(const SafetensorsEntry& e, uint64_t begin) {
  std::string shape;
  for (size_t i = 0; i < e.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(e.shape[i]);
  return str(json_quote(e.name), ":{\"dtype\":", json_quote(e.dtype), ",\"shape\":[", shape,
             "],\"data_offsets\":[", begin, ",", begin + e.bytes, "]}");
}

// The header text, padded with spaces so that 8 + its length is a multiple of
// 8: the data buffer then starts aligned for any dtype when the file is mapped.
std::string header_json(const std::vector<SafetensorsEntry>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::string s = "{";
  if (!metadata.empty()) s += metadata_json(metadata);
  uint64_t offset = 0;
  for (const SafetensorsEntry& e : tensors) {
    s += (s.size() > 1 ? "," : "") + tensor_json(e, offset);
    HPMC_CHECK(!__builtin_add_overflow(offset, e.bytes, &offset), "tensor data beyond 2^64 bytes");
  }
  s += "}";
  while ((kLengthPrefixBytes + s.size()) % 8 != 0) s += ' ';
  return s;
}

// ---- reading ---------------------------------------------------------------

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw DataError(str(path, ": ", what));
}

// A read-only file descriptor with its size taken once, at open. Only a
// regular file is opened: a FIFO would block, a device never end.
class InputFile {
 public:
  explicit InputFile(const std::string& path) : path_(path) {
    RegularFile f(path);
    if (f.problem() == FileProblem::kNotRegular || f.problem() == FileProblem::kBrokenLink)
      bad(path, f.why());
    if (!f.ok()) throw RuntimeError(str("cannot open ", path, ": it ", f.why()));
    size_ = f.size();
    fd_ = f.release();
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const { return size_; }

  void read_at(uint64_t offset, void* dst, size_t bytes) const {
    auto* p = static_cast<unsigned char*>(dst);
    while (bytes > 0) {
      ssize_t got = ::pread(fd_, p, std::min<size_t>(bytes, size_t(1) << 30), static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw RuntimeError(str("cannot read ", path_, ": ", std::strerror(errno)));
      if (got == 0) bad(path_, str("truncated while reading (the file shrank?) at byte ", offset));
      p += got;
      offset += static_cast<uint64_t>(got);
      bytes -= static_cast<size_t>(got);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// A short rendering of a JSON value for "found ..." in messages.
std::string render(const JsonValue& v) {
  switch (v.kind) {
    case JsonValue::Kind::kNumber: return v.text;
    case JsonValue::Kind::kString: return quoted(v.text.size() > 40 ? v.text.substr(0, 40) + "..." : v.text);
    case JsonValue::Kind::kBool: return v.boolean ? "true" : "false";
    case JsonValue::Kind::kNull: return "null";
    case JsonValue::Kind::kObject: return "an object";
    case JsonValue::Kind::kArray: {
      std::string s = "[";
      for (size_t i = 0; i < v.items.size() && i < 8; ++i) s += (i ? ", " : "") + render(v.items[i]);
      return s + (v.items.size() > 8 ? ", ...]" : "]");
    }
  }
  return "?";
}

// Turns the header's JSON object into metadata and tensor descriptions,
// checking each entry on its own; the checks across tensors come after.
class HeaderReader {
 public:
  explicit HeaderReader(const std::string& path) : path_(path) {}

  void read(const JsonValue& root, std::map<std::string, std::string>* metadata,
            std::vector<SafetensorsTensor>* tensors) {
    if (!root.is_object()) bad(path_, str("header is not a JSON object (found ", json_kind_name(root.kind), ")"));
    std::set<std::string> seen;
    for (const JsonMember& m : root.members) {
      if (!seen.insert(m.key).second)
        bad(path_, m.key == kMetadataKey ? std::string("duplicate __metadata__ in the header")
                                         : str("duplicate tensor name ", quoted(m.key), " in the header"));
      if (m.key == kMetadataKey)
        read_metadata(m.value, metadata);
      else
        tensors->push_back(read_tensor(m.key, m.value));
    }
  }

 private:
  void read_metadata(const JsonValue& v, std::map<std::string, std::string>* metadata) const {
    if (!v.is_object())
      bad(path_, str("__metadata__ must be an object of strings, found ", json_kind_name(v.kind)));
    for (const JsonMember& m : v.members) {
      if (!m.value.is_string())
        bad(path_, str("__metadata__ value for ", quoted(m.key), " must be a string, found ",
                       json_kind_name(m.value.kind), " ", render(m.value)));
      if (!metadata->emplace(m.key, m.value.text).second)
        bad(path_, str("duplicate __metadata__ key ", quoted(m.key)));
    }
  }

  SafetensorsTensor read_tensor(const std::string& name, const JsonValue& v) const {
    std::string where = str("tensor ", quoted(name));
    if (!v.is_object()) bad(path_, str(where, ": expected an object, found ", json_kind_name(v.kind)));
    const JsonValue *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (const JsonMember& m : v.members) {
      const JsonValue** slot = m.key == "dtype" ? &dtype : m.key == "shape" ? &shape
                               : m.key == "data_offsets" ? &offsets : nullptr;
      if (!slot)
        bad(path_, str(where, ": unexpected field ", quoted(m.key), " (expected dtype, shape, data_offsets)"));
      if (*slot) bad(path_, str(where, ": duplicate field ", quoted(m.key)));
      *slot = &m.value;
    }
    if (!dtype || !shape || !offsets)
      bad(path_, str(where, ": missing field \"", !dtype ? "dtype" : !shape ? "shape" : "data_offsets", "\""));
    SafetensorsTensor t;
    t.name = name;
    t.dtype = read_dtype(where, *dtype);
    t.shape = read_shape(where, *shape);
    read_offsets(where, *offsets, &t);
    check_size(where, t);
    return t;
  }

  std::string read_dtype(const std::string& where, const JsonValue& v) const {
    if (!v.is_string()) bad(path_, str(where, ": dtype must be a string, found ", render(v)));
    if (safetensors_dtype_size(v.text) == 0) {
      std::string known;
      for (const DtypeInfo& d : kDtypes) known += std::string(known.empty() ? "" : " ") + d.name;
      bad(path_, str(where, ": unknown dtype ", quoted(v.text), " (known: ", known, ")"));
    }
    return v.text;
  }

  std::vector<int64_t> read_shape(const std::string& where, const JsonValue& v) const {
    if (!v.is_array()) bad(path_, str(where, ": shape must be an array of integers, found ", render(v)));
    std::vector<int64_t> shape;
    for (size_t i = 0; i < v.items.size(); ++i) {
      const JsonValue& d = v.items[i];
      uint64_t n = 0;
      const char* problem = !d.is_integer()                     ? "is not an integer"
                            : d.text[0] == '-'                  ? "is negative"
                            : !d.as_uint64(&n) || n > uint64_t(std::numeric_limits<int64_t>::max())
                                ? "is too large"
                                : nullptr;
      if (problem)
        bad(path_, str(where, ": shape ", render(v), ": entry ", i, " (", render(d), ") ", problem,
                       "; expected non-negative integers"));
      shape.push_back(static_cast<int64_t>(n));
    }
    return shape;
  }

  void read_offsets(const std::string& where, const JsonValue& v, SafetensorsTensor* t) const {
    uint64_t begin = 0, end = 0;
    bool ok = v.is_array() && v.items.size() == 2 && v.items[0].as_uint64(&begin) &&
              v.items[1].as_uint64(&end) && begin <= end;
    if (!ok)
      bad(path_, str(where, ": data_offsets must be two non-decreasing non-negative integers [begin, end], found ",
                     render(v)));
    t->begin = begin;
    t->end = end;
  }

  void check_size(const std::string& where, const SafetensorsTensor& t) const {
    uint64_t count = 0, bytes = 0;
    std::string what = str("shape ", shape_str(t.shape), " of ", t.dtype);
    if (!element_count(t.shape, &count) || !checked_mul(count, safetensors_dtype_size(t.dtype), &bytes))
      bad(path_, str(where, ": ", what, " overflows: more than 2^64 bytes"));
    if (t.end - t.begin != bytes)
      bad(path_, str(where, ": data_offsets [", t.begin, ", ", t.end, "] hold ", t.end - t.begin, " bytes, but ",
                     what, " needs ", bytes));
  }

  const std::string& path_;
};

// With `tensors` sorted by offsets, checks that they tile [0, span) with no
// hole and no overlap, and returns span. Empty tensors may sit at any
// boundary: they occupy no bytes.
uint64_t check_coverage(const std::string& path, const std::vector<SafetensorsTensor>& tensors) {
  uint64_t cursor = 0;
  const SafetensorsTensor* prev = nullptr;
  for (const SafetensorsTensor& t : tensors) {
    if (t.begin > cursor)
      bad(path, str("hole in the data buffer: bytes [", cursor, ", ", t.begin, ") belong to no tensor (next is ",
                    quoted(t.name), " at [", t.begin, ", ", t.end, "))"));
    if (t.begin < cursor)
      bad(path, str("tensors ", quoted(prev->name), " [", prev->begin, ", ", prev->end, ") and ", quoted(t.name),
                    " [", t.begin, ", ", t.end, ") overlap"));
    cursor = t.end;
    prev = &t;
  }
  return cursor;
}

// The tensors cover [0, span); the file holds `found` bytes after the header.
void check_span(const std::string& path, const std::vector<SafetensorsTensor>& tensors, uint64_t span,
                uint64_t found) {
  if (span > found) {
    auto beyond = std::find_if(tensors.begin(), tensors.end(), [&](const auto& t) { return t.end > found; });
    bad(path, str("truncated: expected ", span, " bytes of tensor data, found ", found, " (tensor ",
                  quoted(beyond->name), " at data_offsets [", beyond->begin, ", ", beyond->end,
                  "] lies beyond the end)"));
  }
  if (span < found)
    bad(path, str("expected ", span, " bytes of tensor data, found ", found, ": ", found - span,
                  " bytes after the last tensor belong to none"));
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  for (const DtypeInfo& d : kDtypes)
    if (dtype == d.name) return d.size;
  return 0;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  check_entries(path, tensors, metadata);
  std::string header = header_json(tensors, metadata);
  unsigned char prefix[kLengthPrefixBytes];
  put_u64_le(prefix, header.size());
  AtomicFile f(path);
  f.write(prefix, sizeof prefix);
  f.write(header);
  for (const SafetensorsEntry& e : tensors) f.write(e.data, e.bytes);
  f.commit();
}

SafetensorsFile SafetensorsFile::read(const std::string& path) {
  InputFile in(path);
  if (in.size() < kLengthPrefixBytes)
    bad(path, str("file is ", in.size(), " bytes, shorter than the 8-byte header length of a safetensors file"));
  unsigned char prefix[kLengthPrefixBytes];
  in.read_at(0, prefix, sizeof prefix);
  uint64_t header_bytes = get_u64_le(prefix);
  if (header_bytes > in.size() - kLengthPrefixBytes)
    bad(path, str("header length ", header_bytes, " bytes is larger than the file (", in.size(),
                  " bytes): truncated, or not a safetensors file"));
  if (header_bytes > kMaxHeaderBytes)
    bad(path, str("header length ", header_bytes, " bytes is absurdly large (limit ", kMaxHeaderBytes,
                  "): not a safetensors file?"));

  std::string text(header_bytes, '\0');
  in.read_at(kLengthPrefixBytes, text.data(), text.size());
  JsonValue root;
  try {
    root = parse_json(text, kMaxHeaderValues);
  } catch (const JsonError& e) {
    bad(path, str("header is not valid JSON at byte ", e.offset(), " of the header (file byte ",
                  e.offset() + kLengthPrefixBytes, "): ", e.reason()));
  }

  SafetensorsFile file;
  file.path_ = path;
  HeaderReader(path).read(root, &file.metadata_, &file.tensors_);
  std::sort(file.tensors_.begin(), file.tensors_.end(),
            [](const auto& a, const auto& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t span = check_coverage(path, file.tensors_);
  check_span(path, file.tensors_, span, in.size() - kLengthPrefixBytes - header_bytes);

  // Everything is consistent with the real file size: only now allocate.
  try {
    file.buffer_.reset(new unsigned char[span]);
  } catch (const std::bad_alloc&) {
    throw RuntimeError(str("out of memory reading ", path, ": ", span, " bytes of tensor data"));
  }
  file.buffer_bytes_ = span;
  in.read_at(kLengthPrefixBytes + header_bytes, file.buffer_.get(), span);
  for (size_t i = 0; i < file.tensors_.size(); ++i) file.index_[file.tensors_[i].name] = i;
  return file;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const void* SafetensorsFile::data(const SafetensorsTensor& t) const {
  HPMC_CHECK(t.begin <= t.end && t.end <= buffer_bytes_, "tensor ", quoted(t.name), " is not from ", path_);
  return buffer_.get() + t.begin;
}

void SafetensorsFile::copy_to(const std::string& name, const std::string& dtype,
                              const std::vector<int64_t>& shape, void* dst) const {
  const SafetensorsTensor* t = find(name);
  if (!t) bad(path_, str("no tensor ", quoted(name), " (expected ", dtype, " ", shape_str(shape), ")"));
  uint64_t want = 0;
  HPMC_CHECK(element_count(shape, &want), "copy_to: invalid shape ", shape_str(shape));
  std::string where = str("tensor ", quoted(name), ": expected ", dtype, " ", shape_str(shape), " (", want,
                          " elements), found ", t->dtype, " ", shape_str(t->shape));
  if (t->dtype != dtype) bad(path_, where);
  uint64_t have = 0;
  element_count(t->shape, &have);  // validated in read()
  if (have != want) bad(path_, str(where, " (", have, " elements)"));
  if (t->end > t->begin) std::memcpy(dst, data(*t), t->end - t->begin);
}

}  // namespace hpmc
