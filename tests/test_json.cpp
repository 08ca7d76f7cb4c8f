// The strict JSON parser behind the safetensors header: what it accepts,
// what it refuses, and that every refusal says where.
#include <gtest/gtest.h>

#include <string>

#include "io/json.h"

namespace hpmc {
namespace {

// The parse error for `text`, or a test failure if it parses.
JsonError error_of(const std::string& text) {
  try {
    parse_json(text);
  } catch (const JsonError& e) {
    return e;
  }
  ADD_FAILURE() << "parsed, but should not have: " << text;
  return JsonError(0, "");
}

JsonError error_of_limited(const std::string& text, size_t max_values) {
  try {
    parse_json(text, max_values);
  } catch (const JsonError& e) {
    return e;
  }
  ADD_FAILURE() << "parsed within " << max_values << " values: " << text;
  return JsonError(0, "");
}

std::string string_of(const std::string& json) {
  JsonValue v = parse_json(json);
  EXPECT_TRUE(v.is_string()) << json;
  return v.text;
}

TEST(Json, ParsesScalars) {
  EXPECT_EQ(parse_json("true").kind, JsonValue::Kind::kBool);
  EXPECT_TRUE(parse_json("true").boolean);
  EXPECT_FALSE(parse_json(" false ").boolean);
  EXPECT_EQ(parse_json("null").kind, JsonValue::Kind::kNull);
  EXPECT_EQ(parse_json("-12.5e3").text, "-12.5e3");
  EXPECT_EQ(string_of("\"abc\""), "abc");
  EXPECT_EQ(string_of("\"\""), "");
  for (const char* bad : {"tru", "nul", "True", "falsey", "NaN", "Infinity", "'a'"})
    error_of(bad);
}

TEST(Json, StringEscapes) {
  EXPECT_EQ(string_of(R"("\"\\\/\b\f\n\r\t")"), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(string_of(R"("\u0041\u00e9\u20AC")"), "A\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(string_of(R"("a\u0000b")"), std::string("a\0b", 3));
  for (const char* bad : {R"("\x")", R"("\U0041")", R"("\u00g1")", R"("\u12")", R"("\)", "\"\\'\""})
    error_of(bad);
}

TEST(Json, SurrogatePairsBecomeUtf8) {
  EXPECT_EQ(string_of(R"("\ud83d\ude00")"), "\xF0\x9F\x98\x80");  // U+1F600
  EXPECT_EQ(string_of(R"("\uD800\uDC00")"), "\xF0\x90\x80\x80");  // U+10000, the first
  EXPECT_EQ(string_of(R"("\udbff\udfff")"), "\xF4\x8F\xBF\xBF");  // U+10FFFF, the last
  EXPECT_NE(error_of(R"("\ud83d")").reason().find("surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"("\ud83dx")").reason().find("surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"("\ud83d\u0041")").reason().find("surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"("\ude00")").reason().find("surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"("\ud83d\ud83d")").reason().find("surrogate"), std::string::npos);
}

TEST(Json, RawUtf8PassesThroughAndInvalidIsRejected) {
  EXPECT_EQ(string_of("\"h\xC3\xA9llo \xF0\x9F\x98\x80\""), "h\xC3\xA9llo \xF0\x9F\x98\x80");
  for (const char* bad : {"\"\xFF\"", "\"\xC0\xAF\"", "\"\xE0\x80\xAF\"", "\"\xED\xA0\x80\"",
                          "\"\xF4\x90\x80\x80\"", "\"\xE2\x82\"", "\"\x80\""}) {
    EXPECT_NE(error_of(bad).reason().find("UTF-8"), std::string::npos) << bad;
    EXPECT_EQ(error_of(bad).offset(), 1u);
  }
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo"));
  EXPECT_FALSE(is_valid_utf8("\xC3"));
}

TEST(Json, ControlCharactersMustBeEscaped) {
  EXPECT_NE(error_of("\"a\nb\"").reason().find("control character"), std::string::npos);
  EXPECT_NE(error_of(std::string("\"a\0b\"", 5)).reason().find("control character"), std::string::npos);
  EXPECT_EQ(string_of("\"\x7F\""), "\x7F");  // DEL is not a control character to JSON
}

TEST(Json, NestedStructuresKeepOrderAndDuplicates) {
  JsonValue v = parse_json(R"({"z": [1, {"b": [[], {}]}], "a": {"d": null}, "z": "again"})");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.members.size(), 3u);
  EXPECT_EQ(v.members[0].key, "z");
  EXPECT_EQ(v.members[1].key, "a");
  EXPECT_EQ(v.members[2].key, "z");
  const JsonValue& arr = v.members[0].value;
  ASSERT_TRUE(arr.is_array());
  ASSERT_EQ(arr.items.size(), 2u);
  EXPECT_EQ(arr.items[0].text, "1");
  ASSERT_TRUE(arr.items[1].is_object());
  const JsonValue& b = arr.items[1].members.at(0).value;
  ASSERT_EQ(b.items.size(), 2u);
  EXPECT_TRUE(b.items[0].is_array());
  EXPECT_TRUE(b.items[1].is_object());
  EXPECT_EQ(v.members[1].value.members.at(0).value.kind, JsonValue::Kind::kNull);
  EXPECT_EQ(v.members[2].value.text, "again");
}

TEST(Json, WhitespaceIsOnlyTheFourKinds) {
  EXPECT_EQ(parse_json(" \t\r\n{ \"a\" : [ 1 , 2 ] } \n\t ").members.at(0).value.items.size(), 2u);
  error_of("\f{}");
  error_of("{}\v");
}

TEST(Json, Numbers) {
  for (const char* ok : {"0", "-0", "12", "-12", "1.5", "1e10", "1E+2", "1.5e-3", "-0.0e0"})
    EXPECT_EQ(parse_json(ok).text, ok);
  for (const char* bad : {"01", "-01", "1.", ".5", "-", "+1", "1e", "1e+", "--1", "0x10", "1.e3", "- 1"})
    error_of(bad);

  uint64_t n = 0;
  EXPECT_TRUE(parse_json("18446744073709551615").as_uint64(&n));
  EXPECT_EQ(n, 18446744073709551615ull);
  EXPECT_TRUE(parse_json("0").as_uint64(&n));
  EXPECT_EQ(n, 0u);
  EXPECT_FALSE(parse_json("18446744073709551616").as_uint64(&n));
  EXPECT_FALSE(parse_json("99999999999999999999999").as_uint64(&n));
  EXPECT_FALSE(parse_json("-1").as_uint64(&n));
  EXPECT_FALSE(parse_json("1.0").as_uint64(&n));
  EXPECT_FALSE(parse_json("1e2").as_uint64(&n));
  EXPECT_FALSE(parse_json("\"1\"").as_uint64(&n));
  EXPECT_TRUE(parse_json("-3").is_integer());
  EXPECT_FALSE(parse_json("3.0").is_integer());
}

TEST(Json, RejectsTrailingGarbageAndCommas) {
  EXPECT_NE(error_of("{} x").reason().find("after the end"), std::string::npos);
  EXPECT_EQ(error_of("{} x").offset(), 3u);
  error_of("{}{}");
  error_of("1 2");
  error_of("[1,]");
  error_of("[,1]");
  error_of(R"({"a":1,})");
  error_of(R"({"a":1 "b":2})");
  error_of(R"({"a" 1})");
  error_of(R"({a:1})");
  error_of("");
  error_of("   ");
  error_of("[1, 2");
  error_of(R"({"a":)");
}

TEST(Json, ErrorsSayWhere) {
  EXPECT_EQ(error_of(R"({"a": tru})").offset(), 6u);
  EXPECT_EQ(error_of("[1, 2,, 3]").offset(), 6u);
  EXPECT_EQ(error_of(R"({"a": "unterminated)").offset(), 6u);  // where the string starts
  EXPECT_EQ(error_of(R"(["\ud83d"])").offset(), 2u);           // where the escape starts
  JsonError e = error_of("[01]");
  EXPECT_EQ(e.offset(), 2u);
  EXPECT_EQ(std::string(e.what()), "at byte 2: " + e.reason());
}

TEST(Json, DepthIsLimited) {
  std::string ok = std::string(kJsonMaxDepth, '[') + std::string(kJsonMaxDepth, ']');
  EXPECT_NO_THROW(parse_json(ok));
  std::string deep = std::string(kJsonMaxDepth + 1, '[') + std::string(kJsonMaxDepth + 1, ']');
  EXPECT_NE(error_of(deep).reason().find("nesting"), std::string::npos);
  EXPECT_EQ(error_of(deep).offset(), size_t(kJsonMaxDepth));
  // Hostile depth fails at the limit instead of exhausting the stack.
  error_of(std::string(1'000'000, '['));
  std::string objects;
  for (int i = 0; i <= kJsonMaxDepth; ++i) objects += "{\"a\":";
  error_of(objects + "1" + std::string(kJsonMaxDepth + 1, '}'));
}

TEST(Json, ValueCountIsLimited) {
  EXPECT_EQ(parse_json("[1, [2], {\"a\": 3}]", 6).items.size(), 3u);
  JsonError e = error_of_limited("[1, [2], {\"a\": 3}]", 5);
  EXPECT_NE(e.reason().find("more than 5 values"), std::string::npos) << e.what();
  EXPECT_EQ(e.offset(), 15u);  // the sixth value, 3
}

TEST(Json, QuoteRoundTrips) {
  std::string all;
  for (int c = 0; c < 0x80; ++c) all += static_cast<char>(c);
  all += "\xC3\xA9\xF0\x9F\x98\x80";
  std::string q = json_quote(all);
  for (char c : q) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << "raw control character in " << q;
  EXPECT_EQ(string_of(q), all);
  EXPECT_EQ(json_quote("a\"b\\c\n"), R"("a\"b\\c\n")");
  EXPECT_EQ(json_quote(std::string("\x01", 1)), R"("\u0001")");
}

}  // namespace
}  // namespace hpmc
