// fuzz_json.cpp — the strict JSON parser (io/json.h) on arbitrary bytes.
//
// Beyond "no crash, a one-line error": text that parses is valid UTF-8 as a
// whole, every decoded string is valid UTF-8 and survives json_quote and a
// second parse unchanged, and a number that as_uint64() accepts is an integer.
#include "fuzz_common.h"
#include "io/json.h"

namespace {

using hpmc::JsonValue;
using hpmc::fuzz::finding;

void check_string(const std::string& s) {
  if (!hpmc::is_valid_utf8(s)) finding("a decoded string is not valid UTF-8");
  JsonValue again = hpmc::parse_json(hpmc::json_quote(s));
  if (!again.is_string() || again.text != s) finding("a string changed through json_quote");
}

void check(const JsonValue& v) {
  switch (v.kind) {
    case JsonValue::Kind::kString: check_string(v.text); break;
    case JsonValue::Kind::kNumber: {
      uint64_t x = 0;
      if (v.as_uint64(&x) && !v.is_integer()) finding("as_uint64 took a non-integer: " + v.text);
      break;
    }
    case JsonValue::Kind::kArray:
      for (const JsonValue& item : v.items) check(item);
      break;
    case JsonValue::Kind::kObject:
      for (const hpmc::JsonMember& m : v.members) {
        check_string(m.key);
        check(m.value);
      }
      break;
    default: break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  JsonValue v;
  // The bound safetensors uses, scaled to fuzz inputs.
  if (!hpmc::fuzz::expect_clean([&] { v = hpmc::parse_json(text, 100000); })) return 0;
  if (!hpmc::is_valid_utf8(text)) finding("text that is not valid UTF-8 parsed");
  hpmc::fuzz::expect_clean([&] { check(v); });
  return 0;
}
