// json.h — a small, strict JSON (RFC 8259) parser and string quoting, for
// file headers such as safetensors'.
//
// Strict means: one value, surrounded only by whitespace (space, \t, \n, \r);
// no trailing commas, comments, NaN, leading zeros or unescaped control
// characters; strings must be valid UTF-8 and \u escapes must pair their
// surrogates; nesting deeper than kJsonMaxDepth is refused (so hostile input
// cannot exhaust the stack). Every error says at which byte it was found.
//
// Numbers keep their literal text: a header's sizes and offsets are 64-bit
// integers that a double would round, so callers convert with as_uint64().
// Objects keep their members in document order, duplicates included, so a
// caller can report a duplicate key in its own terms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace hpmc {

constexpr int kJsonMaxDepth = 64;

// A parse failure; what() is "at byte N: reason". A DataError, since JSON
// reaches hpmc inside files.
class JsonError : public DataError {
 public:
  JsonError(size_t offset, const std::string& reason)
      : DataError(str("at byte ", offset, ": ", reason)), offset_(offset), reason_(reason) {}
  size_t offset() const { return offset_; }
  const std::string& reason() const { return reason_; }

 private:
  size_t offset_;
  std::string reason_;
};

struct JsonMember;

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Kind kind = Kind::kNull;
  bool boolean = false;            // kBool
  std::string text;                // kString: decoded UTF-8; kNumber: the literal as written
  std::vector<JsonValue> items;    // kArray
  std::vector<JsonMember> members; // kObject, in document order, duplicates kept
  size_t offset = 0;               // where the value starts in the parsed text

  bool is_object() const { return kind == Kind::kObject; }
  bool is_array() const { return kind == Kind::kArray; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kNumber; }
  // True for a number written as a plain integer (no fraction or exponent).
  bool is_integer() const;
  // A non-negative integer literal that fits in 64 bits; false otherwise.
  bool as_uint64(uint64_t* out) const;
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

// "object", "array", ... for messages.
const char* json_kind_name(JsonValue::Kind kind);

// Parses exactly one JSON value; throws JsonError. Each value costs about
// 100 bytes of memory however short its text ("0," is two bytes), so input
// from a file should bound their number with `max_values`.
JsonValue parse_json(std::string_view text, size_t max_values = std::numeric_limits<size_t>::max());

// `s` as a JSON string literal, quotes included. Escapes " \ and control
// characters; other bytes pass through, so `s` must be valid UTF-8 (checked
// by the caller with is_valid_utf8, since only it knows what `s` is).
std::string json_quote(std::string_view s);

// Well-formed UTF-8: no overlong forms, surrogates or code points > U+10FFFF.
bool is_valid_utf8(std::string_view s);
// Well-formed UTF-8 without ASCII control characters (U+0000..U+001F, U+007F):
// text fit to name a run, a layer or a tensor.
bool is_printable_utf8(std::string_view s);

}  // namespace hpmc
