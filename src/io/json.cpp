// json.cpp — the strict recursive-descent JSON parser declared in json.h.
//
// Grammar (RFC 8259):
//   value  = object | array | string | number | true | false | null
//   object = '{' [ string ':' value *( ',' string ':' value ) ] '}'
//   array  = '[' [ value *( ',' value ) ] ']'
//   number = [ '-' ] ( '0' | [1-9][0-9]* ) [ '.' [0-9]+ ] [ ('e'|'E') ['+'|'-'] [0-9]+ ]
// Recursion is bounded by kJsonMaxDepth, so the C++ stack is too.
#include "io/json.h"

#include <limits>

namespace hpmc {

namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if the
// bytes there are not one (bad lead byte, truncated, overlong, surrogate,
// beyond U+10FFFF). The ranges are those of the Unicode standard, table 3-7.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = at(0);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  if (at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (!is_continuation(at(k))) return 0;
  return n;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A printable rendering of the byte at an error, for messages.
std::string describe_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7F) return str("'", c, "'");
  static const char* hex = "0123456789abcdef";
  return str("byte 0x", hex[u >> 4], hex[u & 15]);
}

class Parser {
 public:
  Parser(std::string_view s, size_t max_values) : s_(s), max_values_(max_values) {}

  JsonValue parse_document() {
    skip_whitespace();
    JsonValue v = parse_value(1);
    skip_whitespace();
    if (i_ != s_.size()) fail(str("unexpected ", describe_byte(s_[i_]), " after the end of the JSON value"));
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw JsonError(i_, why); }
  [[noreturn]] void fail_at(size_t at, const std::string& why) const { throw JsonError(at, why); }

  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return s_[i_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++i_;
  }

  void expect(char c, const char* context) {
    if (at_end()) fail(str("unexpected end of input, expected '", c, "' ", context));
    if (peek() != c) fail(str("expected '", c, "' ", context, ", found ", describe_byte(peek())));
    ++i_;
  }

  JsonValue parse_value(int depth) {
    if (at_end()) fail("unexpected end of input, expected a value");
    if (values_++ == max_values_) fail(str("more than ", max_values_, " values (a limit that bounds memory use)"));
    switch (peek()) {
      case '{': return parse_object(depth);
      case '[': return parse_array(depth);
      case '"': {
        JsonValue v = make(JsonValue::Kind::kString);
        v.text = parse_string();
        return v;
      }
      case 't': return parse_literal("true", JsonValue::Kind::kBool, true);
      case 'f': return parse_literal("false", JsonValue::Kind::kBool, false);
      case 'n': return parse_literal("null", JsonValue::Kind::kNull, false);
      default:
        if (peek() == '-' || is_digit(peek())) return parse_number();
        fail(str("unexpected ", describe_byte(peek()), ", expected a value"));
    }
  }

  JsonValue make(JsonValue::Kind kind) const {
    JsonValue v;
    v.kind = kind;
    v.offset = i_;
    return v;
  }

  void enter(int depth) const {
    if (depth > kJsonMaxDepth) fail(str("nesting deeper than ", kJsonMaxDepth, " levels"));
  }

  JsonValue parse_object(int depth) {
    enter(depth);
    JsonValue v = make(JsonValue::Kind::kObject);
    ++i_;  // '{'
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++i_;
      return v;
    }
    for (;;) {
      skip_whitespace();
      if (at_end()) fail("unexpected end of input inside an object");
      if (peek() != '"') fail(str("expected a string key, found ", describe_byte(peek())));
      JsonMember m;
      m.key = parse_string();
      skip_whitespace();
      expect(':', "after an object key");
      skip_whitespace();
      m.value = parse_value(depth + 1);
      v.members.push_back(std::move(m));
      skip_whitespace();
      if (at_end()) fail("unexpected end of input inside an object, expected ',' or '}'");
      if (peek() == '}') break;
      expect(',', "or '}' after an object member");
    }
    ++i_;  // '}'
    return v;
  }

  JsonValue parse_array(int depth) {
    enter(depth);
    JsonValue v = make(JsonValue::Kind::kArray);
    ++i_;  // '['
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++i_;
      return v;
    }
    for (;;) {
      skip_whitespace();
      v.items.push_back(parse_value(depth + 1));
      skip_whitespace();
      if (at_end()) fail("unexpected end of input inside an array, expected ',' or ']'");
      if (peek() == ']') break;
      expect(',', "or ']' after an array element");
    }
    ++i_;  // ']'
    return v;
  }

  JsonValue parse_literal(std::string_view word, JsonValue::Kind kind, bool b) {
    if (s_.substr(i_, word.size()) != word) fail(str("invalid literal, expected '", word, "'"));
    JsonValue v = make(kind);
    v.boolean = b;
    i_ += word.size();
    return v;
  }

  void digits(const char* what) {
    if (at_end() || !is_digit(peek())) fail(str("expected a digit ", what));
    while (!at_end() && is_digit(peek())) ++i_;
  }

  JsonValue parse_number() {
    JsonValue v = make(JsonValue::Kind::kNumber);
    if (peek() == '-') ++i_;
    if (!at_end() && peek() == '0') {
      ++i_;
      if (!at_end() && is_digit(peek())) fail("leading zeros are not allowed in numbers");
    } else {
      digits("in a number");
    }
    if (!at_end() && peek() == '.') {
      ++i_;
      digits("after the decimal point");
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      ++i_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++i_;
      digits("in the exponent");
    }
    v.text = std::string(s_.substr(v.offset, i_ - v.offset));
    return v;
  }

  uint32_t hex4() {
    if (s_.size() - i_ < 4) fail_at(i_, "truncated \\u escape");
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_];
      int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) fail(str("invalid hex digit ", describe_byte(c), " in a \\u escape"));
      cp = cp * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    return cp;
  }

  // After "\u": one code point, joining a UTF-16 surrogate pair.
  uint32_t unicode_escape(size_t escape_start) {
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at(escape_start, "unpaired low surrogate in a \\u escape");
    if (cp < 0xD800 || cp > 0xDBFF) return cp;
    if (s_.substr(i_, 2) != "\\u") fail_at(escape_start, "high surrogate not followed by a \\u low surrogate");
    size_t low_start = i_;
    i_ += 2;
    uint32_t low = hex4();
    if (low < 0xDC00 || low > 0xDFFF) fail_at(low_start, "high surrogate not followed by a low surrogate");
    return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
  }

  void escape(std::string& out) {
    size_t start = i_;
    ++i_;  // '\'
    if (at_end()) fail("unterminated string");
    char c = peek();
    ++i_;
    switch (c) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': append_utf8(out, unicode_escape(start)); break;
      default: fail_at(start, str("invalid escape \\", describe_byte(c)));
    }
  }

  std::string parse_string() {
    size_t start = i_;
    ++i_;  // '"'
    std::string out;
    for (;;) {
      if (at_end()) fail_at(start, "unterminated string");
      auto c = static_cast<unsigned char>(peek());
      if (c == '"') break;
      if (c == '\\') {
        escape(out);
      } else if (c < 0x20) {
        fail(str("unescaped control character ", describe_byte(peek()), " in a string"));
      } else {
        size_t n = utf8_sequence_length(s_, i_);
        if (n == 0) fail("invalid UTF-8 in a string");
        out.append(s_.substr(i_, n));
        i_ += n;
      }
    }
    ++i_;  // '"'
    return out;
  }

  std::string_view s_;
  size_t i_ = 0;
  size_t max_values_;
  size_t values_ = 0;
};

}  // namespace

bool JsonValue::is_integer() const {
  return kind == Kind::kNumber && text.find_first_of(".eE") == std::string::npos;
}

bool JsonValue::as_uint64(uint64_t* out) const {
  if (!is_integer() || text.empty() || text[0] == '-') return false;
  uint64_t v = 0;
  for (char c : text) {
    auto d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

const char* json_kind_name(JsonValue::Kind kind) {
  switch (kind) {
    case JsonValue::Kind::kNull: return "null";
    case JsonValue::Kind::kBool: return "boolean";
    case JsonValue::Kind::kNumber: return "number";
    case JsonValue::Kind::kString: return "string";
    case JsonValue::Kind::kArray: return "array";
    case JsonValue::Kind::kObject: return "object";
  }
  return "?";
}

JsonValue parse_json(std::string_view text, size_t max_values) {
  return Parser(text, max_values).parse_document();
}

std::string json_quote(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool is_printable_utf8(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return is_valid_utf8(s);
}

}  // namespace hpmc
