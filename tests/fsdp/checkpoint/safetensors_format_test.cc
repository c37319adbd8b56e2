// File: tests/fsdp/checkpoint/safetensors_format_test.cc
//
// The pure header functions: every rule of safetensors_format.h has a valid
// case and a malformed case, and each malformed case is checked for the words
// that name its problem (not just for failing).
#include "fsdp/checkpoint/safetensors_format.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace checkpoint {
namespace {

// One tensor entry of a header, as JSON text.
std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  uint64_t begin, uint64_t end) {
  return absl::StrCat("\"", name, "\":{\"dtype\":\"", dtype, "\",\"shape\":", shape,
                      ",\"data_offsets\":[", begin, ",", end, "]}");
}

TEST(SafetensorsFormatTest, DtypeNamesAndBitsFollowTheStandard) {
  const std::vector<std::pair<std::string, int>> expected = {
      {"BOOL", 8}, {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},
      {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},
      {"U16", 16}, {"F16", 16},    {"BF16", 16},   {"I32", 32},    {"U32", 32},
      {"F32", 32}, {"C64", 64},    {"F64", 64},    {"I64", 64},    {"U64", 64}};
  for (const auto& [name, bits] : expected) {
    absl::StatusOr<SafetensorsDtype> dtype = ParseSafetensorsDtype(name);
    ASSERT_TRUE(dtype.ok()) << name << ": " << dtype.status();
    EXPECT_EQ(SafetensorsDtypeName(*dtype), name);
    EXPECT_EQ(SafetensorsDtypeBits(*dtype), bits) << name;
  }
  absl::StatusOr<SafetensorsDtype> lower = ParseSafetensorsDtype("f32");
  ASSERT_FALSE(lower.ok());
  EXPECT_NE(lower.status().message().find("unknown dtype \"f32\""), std::string::npos)
      << lower.status();
  EXPECT_NE(lower.status().message().find("BF16"), std::string::npos) << lower.status();
}

TEST(SafetensorsFormatTest, ParsesTensorsInDataOrderWithMetadata) {
  // JSON order b, scalar, a, e1, e0; data order a [0,24), then e1 and e0
  // (empty, at 24, kept in JSON order), scalar [24,28), b [28,34).
  const std::string json = absl::StrCat(
      "  {", Entry("b", "BF16", "[3]", 28, 34), ",", Entry("scalar", "F32", "[]", 24, 28), ",",
      "\"__metadata__\":{\"format\":\"pt\",\"step\":\"12\"},", Entry("a", "F32", "[2, 3]", 0, 24),
      ",", Entry("e1", "F32", "[0]", 24, 24), ",", Entry("e0", "F32", "[5,0]", 24, 24), "}     ");
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(json, 34);
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(header->tensors.size(), 5u);
  const std::vector<std::string> order = {"a", "e1", "e0", "scalar", "b"};
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(header->tensors[i].name, order[i]);
  const SafetensorsTensorInfo& a = header->tensors[0];
  EXPECT_EQ(a.dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(a.shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(a.numel, 6u);
  EXPECT_EQ(a.data_begin, 0u);
  EXPECT_EQ(a.data_end, 24u);
  EXPECT_EQ(header->tensors[1].numel, 0u);
  EXPECT_EQ(header->tensors[2].numel, 0u);
  EXPECT_EQ(header->tensors[3].shape, std::vector<uint64_t>{});
  EXPECT_EQ(header->tensors[3].numel, 1u);
  EXPECT_EQ(header->tensors[4].dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(header->tensors[4].num_bytes(), 6u);
  EXPECT_EQ(header->metadata.size(), 2u);
  EXPECT_EQ(header->metadata.at("format"), "pt");
  EXPECT_EQ(header->metadata.at("step"), "12");
}

TEST(SafetensorsFormatTest, AcceptsTheEdgesOfValid) {
  struct Case {
    std::string json;
    uint64_t data_bytes;
  };
  const std::vector<Case> cases = {
      {"{}", 0},
      {"{}        ", 0},
      {"\n\t{ }\r\n", 0},
      {"{\"__metadata__\":null}", 0},
      {"{\"__metadata__\":{}}", 0},
      {absl::StrCat("{", Entry("x", "F4", "[2]", 0, 1), "}"), 1},       // two nibbles
      {absl::StrCat("{", Entry("x", "F6_E2M3", "[4]", 0, 3), "}"), 3},  // 24 bits
      {absl::StrCat("{", Entry("x", "C64", "[1]", 0, 8), "}"), 8},
      {absl::StrCat("{", Entry("", "U8", "[1]", 0, 1), "}"), 1},  // the empty name
      {absl::StrCat("{", Entry("\\u00e9\\u0000", "U8", "[1]", 0, 1), "}"), 1},
      // A dimension of 2^64 - 1 is fine when another dimension is 0.
      {absl::StrCat("{", Entry("x", "F64", "[18446744073709551615, 0]", 0, 0), "}"), 0},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(c.json, c.data_bytes);
    EXPECT_TRUE(header.ok()) << c.json << ": " << header.status();
  }
}

struct BadHeader {
  const char* what;
  std::string json;
  uint64_t data_bytes;
  std::string needle;  // must appear in the error message
};

TEST(SafetensorsFormatTest, EveryMalformedHeaderNamesItsProblem) {
  const std::string a = Entry("a", "F32", "[2]", 0, 8);
  const std::vector<BadHeader> cases = {
      {"empty", "", 0, "not valid JSON"},
      {"truncated", "{\"a\":", 0, "not valid JSON"},
      {"not an object", "[1, 2]", 0, "must be a JSON object, got an array"},
      {"trailing garbage", "{} x", 0, "not valid JSON"},
      {"trailing NUL padding", std::string("{}\0\0", 4), 0, "not valid JSON: NUL byte at offset 2"},
      {"NUL then more JSON", std::string("{}\0{\"a\":1}", 11), 0, "NUL byte at offset 2"},
      {"comment", "{/* c */}", 0, "not valid JSON"},
      {"invalid UTF-8", "{\"\xff\":1}", 0, "not valid JSON"},
      {"duplicate tensor", absl::StrCat("{", a, ",", a, "}"), 16, "duplicate tensor name \"a\""},
      {"duplicate __metadata__", "{\"__metadata__\":{},\"__metadata__\":{}}", 0,
       "duplicate key \"__metadata__\""},
      {"duplicate metadata key", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0,
       "duplicate \"__metadata__\" key \"k\""},
      {"metadata not an object", "{\"__metadata__\":3}", 0,
       "\"__metadata__\" must be an object of string to string"},
      {"metadata value not a string", "{\"__metadata__\":{\"k\":7}}", 0,
       "value of \"k\" must be a string, got the number 7"},
      {"metadata value nested", "{\"__metadata__\":{\"k\":{}}}", 0,
       "value of \"k\" must be a string, got an object"},
      {"tensor not an object", "{\"a\":[1]}", 0,
       "tensor \"a\" must be an object with \"dtype\", \"shape\" and \"data_offsets\""},
      {"unknown dtype", absl::StrCat("{", Entry("a", "F31", "[2]", 0, 8), "}"), 8,
       "tensor \"a\": unknown dtype \"F31\""},
      {"lower-case dtype", absl::StrCat("{", Entry("a", "f32", "[2]", 0, 8), "}"), 8,
       "unknown dtype \"f32\""},
      {"dtype not a string", "{\"a\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
       "tensor \"a\": \"dtype\" must be a string, got the number 32"},
      {"negative shape entry", absl::StrCat("{", Entry("a", "F32", "[-1]", 0, 8), "}"), 8,
       "\"shape\" must be an array of integers in [0, 2^64), got the negative number -1"},
      {"minus zero shape entry", absl::StrCat("{", Entry("a", "F32", "[-0]", 0, 0), "}"), 0,
       "negative number -0"},
      {"fractional shape entry", absl::StrCat("{", Entry("a", "F32", "[2.5]", 0, 8), "}"), 8,
       "got the number 2.5"},
      {"shape entry 2^64",
       absl::StrCat("{", Entry("a", "F32", "[18446744073709551616]", 0, 8), "}"), 8,
       "got the number 18446744073709551616, not an integer in [0, 2^64)"},
      {"shape not an array", "{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8,
       "\"shape\" must be an array of integers"},
      {"nested shape", absl::StrCat("{", Entry("a", "F32", "[[2]]", 0, 8), "}"), 8,
       "\"shape\" must be an array of integers in [0, 2^64), got an array"},
      {"numel overflow", absl::StrCat("{", Entry("a", "U8", "[4294967296, 4294967296]", 0, 8), "}"),
       8, "tensor \"a\": shape [4294967296, 4294967296] has 2^64 or more elements"},
      {"bit count overflow",
       absl::StrCat("{", Entry("a", "F32", "[1152921504606846976]", 0, 8), "}"), 8,
       "tensor \"a\": shape [1152921504606846976] of F32 needs 2^64 or more bits"},
      {"sub-byte remainder", absl::StrCat("{", Entry("a", "F4", "[3]", 0, 2), "}"), 2,
       "3 elements of F4 are 12 bits, not a whole number of bytes"},
      {"offsets backwards", absl::StrCat("{", Entry("a", "F32", "[0]", 8, 0), "}"), 0,
       "data_offsets [8, 0] end before they begin"},
      {"offsets disagree with shape", absl::StrCat("{", Entry("a", "F32", "[2]", 0, 4), "}"), 4,
       "data_offsets [0, 4] hold 4 bytes, but shape [2] of F32 needs 8 bytes"},
      {"one offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}", 8,
       "\"data_offsets\" must be [begin, end], got 1 number"},
      {"three offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8,
       "\"data_offsets\" must be [begin, end], got more than 2"},
      {"offsets not an array", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":\"0-8\"}}",
       8, "\"data_offsets\" must be [begin, end], integers in [0, 2^64), got the string"},
      {"negative offset",
       absl::StrCat("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                    "\"data_offsets\":[-8,0]}}"),
       8, "got the negative number -8"},
      {"missing shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8,
       "tensor \"a\": missing \"shape\""},
      {"missing dtype", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
       "tensor \"a\": missing \"dtype\""},
      {"missing offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8,
       "tensor \"a\": missing \"data_offsets\""},
      {"duplicate field",
       "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
       "tensor \"a\": duplicate field \"dtype\""},
      {"unknown field",
       "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"stride\":[1]}}", 8,
       "tensor \"a\": unknown field \"stride\""},
      {"hole between tensors", absl::StrCat("{", a, ",", Entry("b", "F32", "[1]", 12, 16), "}"), 16,
       "hole in the data section: bytes [8, 12) belong to no tensor (the next one is \"b\")"},
      {"hole at the start", absl::StrCat("{", Entry("a", "F32", "[1]", 4, 8), "}"), 8,
       "hole in the data section: bytes [0, 4)"},
      {"overlap", absl::StrCat("{", a, ",", Entry("b", "F32", "[1]", 4, 8), "}"), 8,
       "tensor \"b\": data_offsets [4, 8] overlap tensor \"a\", which ends at byte 8"},
      {"data section longer", absl::StrCat("{", a, "}"), 12,
       "the tensors cover 8 bytes, but the data section holds 12 bytes (trailing bytes)"},
      {"data section shorter", absl::StrCat("{", a, "}"), 4,
       "the tensors cover 8 bytes, but the data section holds 4 bytes (the file is too short)"},
      {"data without tensors", "{}", 4, "the tensors cover 0 bytes"},
      {"name with control bytes is escaped", "{\"a\\u0000\\nb\":5}", 0,
       "tensor \"a\\x00\\nb\" must be an object"},
      {"boolean", "{\"a\":{\"dtype\":true}}", 0, "got true"},
      {"null dtype", "{\"a\":{\"dtype\":null}}", 0, "got null"},
  };
  for (const BadHeader& c : cases) {
    absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(c.json, c.data_bytes);
    ASSERT_FALSE(header.ok()) << c.what;
    EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(header.status().message().find(c.needle), std::string::npos)
        << c.what << "\n  message: " << header.status().message() << "\n  wanted:  " << c.needle;
  }
}

std::string LengthPrefix(uint64_t n) {
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return prefix;
}

TEST(SafetensorsFormatTest, HeaderLengthIsLittleEndianAndBounded) {
  // 0x0102 = 258 proves the byte order.
  absl::StatusOr<uint64_t> n = ParseSafetensorsHeaderLength(LengthPrefix(258), 8 + 258);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 258u);
  EXPECT_EQ(*ParseSafetensorsHeaderLength(LengthPrefix(0), 8), 0u);
  EXPECT_EQ(
      *ParseSafetensorsHeaderLength(LengthPrefix(kSafetensorsMaxHeaderBytes), uint64_t{1} << 40),
      kSafetensorsMaxHeaderBytes);

  struct Case {
    std::string prefix;
    uint64_t file_bytes;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"", 0, "the file has 0 bytes, fewer than the 8-byte header length"},
      {std::string(7, '\0'), 7, "the file has 7 bytes"},
      {std::string(5, '\0'), 100, "only 5 of the 8 header-length bytes could be read"},
      {LengthPrefix(11), 18, "header length 11 exceeds the 10 bytes that follow it"},
      {LengthPrefix(kSafetensorsMaxHeaderBytes + 1), uint64_t{1} << 40,
       "header length 100000001 exceeds the limit of 100000000 bytes"},
      {LengthPrefix(std::numeric_limits<uint64_t>::max()), 64,
       "header length 18446744073709551615 exceeds the limit"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<uint64_t> length = ParseSafetensorsHeaderLength(c.prefix, c.file_bytes);
    ASSERT_FALSE(length.ok()) << c.needle;
    EXPECT_EQ(length.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(length.status().message().find(c.needle), std::string::npos)
        << length.status().message();
  }
}

TEST(SafetensorsFormatTest, SerializeIsPaddedAndParsesBackToTheSameHeader) {
  absl::StatusOr<SafetensorsHeader> laid_out =
      LayOutF32Tensors({{"w", {3, 5}}, {"empty", {0}}, {"s", {}}, {"b", {7}}}, {{"format", "pt"}});
  ASSERT_TRUE(laid_out.ok()) << laid_out.status();
  const std::vector<uint64_t> begins = {0, 60, 60, 64}, ends = {60, 60, 64, 92};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(laid_out->tensors[i].data_begin, begins[i]);
    EXPECT_EQ(laid_out->tensors[i].data_end, ends[i]);
  }
  absl::StatusOr<std::string> json = SerializeSafetensorsHeader(*laid_out);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->size() % 8, 0u);
  EXPECT_EQ(json->find("{\"__metadata__\":{\"format\":\"pt\"},\"w\":{"), 0u) << *json;
  const size_t last = json->find_last_not_of(' ');
  EXPECT_EQ((*json)[last], '}');
  EXPECT_LT(json->size() - last - 1, 8u);

  absl::StatusOr<SafetensorsHeader> parsed = ParseSafetensorsHeader(*json, 92);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->tensors.size(), laid_out->tensors.size());
  for (size_t i = 0; i < parsed->tensors.size(); ++i) {
    const SafetensorsTensorInfo &p = parsed->tensors[i], &l = laid_out->tensors[i];
    EXPECT_EQ(p.name, l.name);
    EXPECT_EQ(p.dtype, l.dtype);
    EXPECT_EQ(p.shape, l.shape);
    EXPECT_EQ(p.numel, l.numel);
    EXPECT_EQ(p.data_begin, l.data_begin);
    EXPECT_EQ(p.data_end, l.data_end);
  }
  EXPECT_EQ(parsed->metadata, laid_out->metadata);
}

TEST(SafetensorsFormatTest, SerializeEscapesNamesAndKeepsEveryDtype) {
  SafetensorsHeader header;
  header.tensors.push_back({"quote\"back\\slash\nnew\x01", SafetensorsDtype::kBF16, {3}, 3, 0, 6});
  header.tensors.push_back({"caf\xc3\xa9", SafetensorsDtype::kF4, {2, 2}, 4, 6, 8});
  absl::StatusOr<std::string> json = SerializeSafetensorsHeader(header);
  ASSERT_TRUE(json.ok()) << json.status();
  absl::StatusOr<SafetensorsHeader> parsed = ParseSafetensorsHeader(*json, 8);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << *json;
  EXPECT_EQ(parsed->tensors[0].name, header.tensors[0].name);
  EXPECT_EQ(parsed->tensors[0].dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(parsed->tensors[1].name, header.tensors[1].name);
  EXPECT_EQ(parsed->tensors[1].dtype, SafetensorsDtype::kF4);
}

TEST(SafetensorsFormatTest, SerializeAndLayOutRejectWhatCouldNotBeReadBack) {
  auto expect_error = [](const absl::Status& status, const std::string& needle) {
    ASSERT_FALSE(status.ok()) << needle;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(needle), std::string::npos) << status.message();
  };
  expect_error(LayOutF32Tensors({{"a", {1}}, {"a", {2}}}, {}).status(),
               "duplicate tensor name \"a\"");
  expect_error(LayOutF32Tensors({{"__metadata__", {1}}}, {}).status(),
               "cannot be named \"__metadata__\"");
  expect_error(LayOutF32Tensors({{"a", {uint64_t{1} << 62}}}, {}).status(),
               "tensor \"a\": shape [4611686018427387904] of F32 needs 2^64 or more bits");
  // Each fits (its bit count too: below 2^64), nine of them pass 2^64 bytes.
  std::vector<SafetensorsTensorSpec> huge;
  for (char name = 'a'; name <= 'i'; ++name) {
    huge.push_back({std::string(1, name), {(uint64_t{1} << 59) - 1}});
  }
  expect_error(LayOutF32Tensors(huge, {}).status(),
               "the data section would reach 2^64 bytes at tensor \"i\"");
  huge.pop_back();
  EXPECT_TRUE(LayOutF32Tensors(huge, {}).ok());

  SafetensorsHeader bad_utf8;
  bad_utf8.tensors.push_back({"a\xff", SafetensorsDtype::kF32, {1}, 1, 0, 4});
  expect_error(SerializeSafetensorsHeader(bad_utf8).status(),
               "tensor name \"a\\xff\" is not valid UTF-8");
  SafetensorsHeader bad_metadata;
  bad_metadata.metadata["k"] = "\xc3";
  expect_error(SerializeSafetensorsHeader(bad_metadata).status(),
               "metadata value \"\\xc3\" is not valid UTF-8");
  SafetensorsHeader wrong_numel;
  wrong_numel.tensors.push_back({"a", SafetensorsDtype::kF32, {2}, 3, 0, 8});
  expect_error(SerializeSafetensorsHeader(wrong_numel).status(),
               "numel 3 is not the product of shape [2]");
  SafetensorsHeader out_of_order;
  out_of_order.tensors.push_back({"b", SafetensorsDtype::kF32, {1}, 1, 4, 8});
  out_of_order.tensors.push_back({"a", SafetensorsDtype::kF32, {1}, 1, 0, 4});
  expect_error(SerializeSafetensorsHeader(out_of_order).status(), "hole in the data section");
}

}  // namespace
}  // namespace checkpoint
}  // namespace fsdp
