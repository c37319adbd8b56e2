// File: tests/fsdp/checkpoint/safetensors_test.cc
//
// The file reader and writer. The byte-level test parses the file without
// the library (nlohmann's DOM parser and hand-decoded floats), so that the
// writer and reader cannot agree on a wrong format between themselves.
#include "fsdp/checkpoint/safetensors.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/base/scratch_dir.h"

namespace fsdp {
namespace checkpoint {
namespace {

using base_test::ListDir;

// A fresh, empty directory per test.
std::string TestDir() { return base_test::FreshTestDir(); }

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

std::string DirName(const std::string& path) { return path.substr(0, path.rfind('/')); }

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string LittleEndian64(uint64_t n) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return bytes;
}

// A file made by hand: length, header, data.
std::string RawFile(const std::string& json, const std::string& data) {
  return LittleEndian64(json.size()) + json + data;
}

// Distinct values that are exact in fp32 and differ in every byte lane.
std::vector<float> Values(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i) * 0.25f - 1000.0f;
  return v;
}

struct Tensor {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<float> values;
};

// Several tensors, an empty one and a scalar among them.
std::vector<Tensor> ModelTensors() {
  return {
      {"wte", {37, 11}, Values(37 * 11, 1.0f)},    {"empty", {4, 0}, {}},  {"ln.gain", {}, {3.5f}},
      {"h.0.attn", {5, 3, 7}, Values(105, -7.0f)}, {"bias", {1}, {-0.0f}},
  };
}

std::vector<SafetensorsTensorSpec> Specs(const std::vector<Tensor>& tensors) {
  std::vector<SafetensorsTensorSpec> specs;
  for (const Tensor& t : tensors) specs.push_back({t.name, t.shape});
  return specs;
}

// Writes `tensors` in pieces of the given sizes, cycling through them; a
// piece is cut short at the end of its tensor.
absl::Status WriteModel(const std::string& path, const std::vector<Tensor>& tensors,
                        const std::vector<size_t>& piece_sizes,
                        const std::map<std::string, std::string>& metadata = {}) {
  absl::StatusOr<std::unique_ptr<SafetensorsWriter>> writer =
      SafetensorsWriter::Create(path, Specs(tensors), metadata);
  if (!writer.ok()) return writer.status();
  size_t piece = 0;
  for (const Tensor& t : tensors) {
    absl::Span<const float> rest(t.values);
    while (!rest.empty()) {
      const size_t n = std::min(piece_sizes[piece++ % piece_sizes.size()], rest.size());
      absl::Status appended = (*writer)->Append(rest.first(n));
      if (!appended.ok()) return appended;
      rest.remove_prefix(n);
    }
  }
  return (*writer)->Finish();
}

void ExpectError(const absl::Status& status, absl::StatusCode code,
                 const std::vector<std::string>& needles) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), code) << status;
  for (const std::string& needle : needles) {
    EXPECT_NE(status.message().find(needle), std::string::npos)
        << "message: " << status.message() << "\nwanted: " << needle;
  }
}

TEST(SafetensorsTest, RoundTripsTensorsStreamedInOddPieces) {
  const std::string dir = TestDir();
  const std::vector<Tensor> tensors = ModelTensors();
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "120"}};
  for (const std::vector<size_t>& pieces :
       std::vector<std::vector<size_t>>{{1}, {7, 3, 13}, {1 << 20}, {406, 1}}) {
    const std::string path = absl::StrCat(dir, "/model_", pieces[0], ".safetensors");
    ASSERT_TRUE(WriteModel(path, tensors, pieces, metadata).ok());

    absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader = SafetensorsReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->metadata(), metadata);
    ASSERT_EQ((*reader)->tensors().size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      EXPECT_EQ((*reader)->tensors()[i].name, t.name);  // data order is write order
      const SafetensorsTensorInfo* info = (*reader)->Find(t.name);
      ASSERT_NE(info, nullptr) << t.name;
      EXPECT_EQ(info->shape, t.shape);
      EXPECT_EQ(info->numel, t.values.size());
      std::vector<float> out(t.values.size(), 12345.0f);
      ASSERT_TRUE((*reader)->ReadF32(t.name, absl::MakeSpan(out)).ok()) << t.name;
      // Bitwise, so -0.0 must come back as -0.0.
      // (An empty tensor has no buffer; memcmp on null is undefined even
      // for zero bytes.)
      if (!out.empty()) {
        ASSERT_EQ(std::memcmp(out.data(), t.values.data(), out.size() * 4), 0) << t.name;
      }
    }
  }
  EXPECT_EQ(ListDir(dir).size(), 4u);  // no temporary file left behind
}

TEST(SafetensorsTest, BytesMatchTheFormatParsedIndependently) {
  const std::string path = TestDir() + "/model.safetensors";
  const std::vector<Tensor> tensors = ModelTensors();
  ASSERT_TRUE(WriteModel(path, tensors, {5}, {{"note", "hi"}}).ok());
  const std::string bytes = ReadBytes(path);

  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u) << "the data section must start 8-aligned";
  ASSERT_LE(8 + n, bytes.size());
  const std::string json_text = bytes.substr(8, n);
  const nlohmann::json json = nlohmann::json::parse(json_text);  // throws on bad JSON
  EXPECT_EQ(json["__metadata__"], nlohmann::json({{"note", "hi"}}));
  ASSERT_EQ(json.size(), tensors.size() + 1);

  // Offsets by formula: the tensors back to back in write order, 4 bytes each.
  uint64_t offset = 0;
  const std::string data = bytes.substr(8 + n);
  for (const Tensor& t : tensors) {
    SCOPED_TRACE(t.name);
    const nlohmann::json& entry = json.at(t.name);
    EXPECT_EQ(entry.size(), 3u);
    EXPECT_EQ(entry.at("dtype"), "F32");
    EXPECT_EQ(entry.at("shape").get<std::vector<uint64_t>>(), t.shape);
    const uint64_t end = offset + 4 * t.values.size();
    EXPECT_EQ(entry.at("data_offsets"), nlohmann::json({offset, end}));
    for (size_t i = 0; i < t.values.size(); ++i) {
      const unsigned char* p = reinterpret_cast<const unsigned char*>(data.data()) + offset + 4 * i;
      const uint32_t bits = p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
      uint32_t expected;
      std::memcpy(&expected, &t.values[i], 4);
      ASSERT_EQ(bits, expected) << "element " << i;
    }
    offset = end;
  }
  EXPECT_EQ(data.size(), offset) << "nothing after the last tensor";
}

TEST(SafetensorsTest, RangedReadsStreamATensorInPieces) {
  const std::string path = TestDir() + "/model.safetensors";
  const std::vector<Tensor> tensors = ModelTensors();
  ASSERT_TRUE(WriteModel(path, tensors, {64}).ok());
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const Tensor& wte = tensors[0];  // 407 elements
  for (size_t piece : {1, 2, 10, 406, 407}) {
    std::vector<float> whole;
    std::vector<float> buffer(piece);
    for (uint64_t begin = 0; begin < wte.values.size(); begin += piece) {
      const size_t n = std::min<uint64_t>(piece, wte.values.size() - begin);
      ASSERT_TRUE((*reader)->ReadF32Range("wte", begin, absl::MakeSpan(buffer).first(n)).ok());
      whole.insert(whole.end(), buffer.begin(), buffer.begin() + n);
    }
    EXPECT_EQ(whole, wte.values) << "piece " << piece;
  }
  std::vector<float> one(1);
  ASSERT_TRUE((*reader)->ReadF32Range("h.0.attn", 104, absl::MakeSpan(one)).ok());
  EXPECT_EQ(one[0], tensors[3].values[104]);
  EXPECT_TRUE((*reader)->ReadF32Range("empty", 0, {}).ok());
  EXPECT_TRUE((*reader)->ReadF32Range("wte", 407, {}).ok());

  std::vector<float> two(2);
  ExpectError((*reader)->ReadF32Range("wte", 406, absl::MakeSpan(two)),
              absl::StatusCode::kOutOfRange,
              {path, "tensor \"wte\"", "elements [406, 406 + 2) are outside its 407 elements"});
  ExpectError((*reader)->ReadF32Range("wte", 408, {}), absl::StatusCode::kOutOfRange,
              {"elements [408, 408 + 0)"});
  ExpectError((*reader)->ReadF32Range("wte", ~uint64_t{0}, absl::MakeSpan(two)),
              absl::StatusCode::kOutOfRange, {"outside its 407 elements"});
  ExpectError((*reader)->ReadF32("nope", absl::MakeSpan(two)), absl::StatusCode::kNotFound,
              {path, "no tensor \"nope\" among its 5 tensors"});
  ExpectError((*reader)->ReadF32("wte", absl::MakeSpan(two)), absl::StatusCode::kInvalidArgument,
              {path, "tensor \"wte\" has 407 elements, but the output holds 2"});
}

TEST(SafetensorsTest, ReadsFilesLaidOutByOtherWriters) {
  // Header keys in name order, not data order; data order b then a; padding
  // with spaces; a BF16 tensor alongside.
  const std::string path = TestDir() + "/other.safetensors";
  const std::string json =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
      "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16]}}   ";
  // b = 1.0 (0x3f800000), a = {2.0, -3.0} (0x40000000, 0xc0400000), c = 4 bytes.
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\xc0\x80\x3f\x00\x40", 16);
  WriteBytes(path, RawFile(json, data));
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->tensors()[0].name, "b");
  EXPECT_EQ((*reader)->data_section_offset(), 8 + json.size());
  std::vector<float> a(2), b(1);
  ASSERT_TRUE((*reader)->ReadF32("a", absl::MakeSpan(a)).ok());
  ASSERT_TRUE((*reader)->ReadF32("b", absl::MakeSpan(b)).ok());
  EXPECT_EQ(a, (std::vector<float>{2.0f, -3.0f}));
  EXPECT_EQ(b[0], 1.0f);
  std::vector<float> c(2);
  ExpectError((*reader)->ReadF32("c", absl::MakeSpan(c)), absl::StatusCode::kInvalidArgument,
              {path, "tensor \"c\" is BF16; only F32 tensors can be read"});
}

TEST(SafetensorsTest, MalformedFilesGiveErrorsNamingFileAndProblem) {
  const std::string dir = TestDir();
  const std::string ok_json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  struct Case {
    const char* name;
    std::string bytes;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"empty", "", "the file has 0 bytes, fewer than the 8-byte header length"},
      {"short", std::string("\x05\x00\x00", 3), "the file has 3 bytes"},
      {"length past the end", LittleEndian64(100) + "{}", "header length 100 exceeds the 2"},
      {"length past the cap", LittleEndian64(uint64_t{1} << 40) + "{}",
       "exceeds the limit of 100000000 bytes"},
      {"data missing", RawFile(ok_json, std::string(7, '\0')),
       "the tensors cover 8 bytes, but the data section holds 7 bytes"},
      {"data left over", RawFile(ok_json, std::string(9, '\0')),
       "the data section holds 9 bytes (trailing bytes)"},
      {"bad JSON", RawFile("{\"a\":", ""), "not valid JSON"},
      {"unknown dtype",
       RawFile("{\"a\":{\"dtype\":\"Q8\",\"shape\":[2],\"data_offsets\":[0,2]}}", "xx"),
       "tensor \"a\": unknown dtype \"Q8\""},
  };
  for (const Case& c : cases) {
    const std::string path = absl::StrCat(dir, "/", c.name, ".safetensors");
    WriteBytes(path, c.bytes);
    SCOPED_TRACE(c.name);
    auto reader = SafetensorsReader::Open(path);
    ASSERT_FALSE(reader.ok());
    ExpectError(reader.status(), absl::StatusCode::kInvalidArgument,
                {absl::StrCat("safetensors file ", path, ": "), c.needle});
  }
  ExpectError(SafetensorsReader::Open(dir + "/missing.safetensors").status(),
              absl::StatusCode::kNotFound, {dir + "/missing.safetensors"});
  ExpectError(SafetensorsReader::Open(dir).status(), absl::StatusCode::kInvalidArgument,
              {dir, "not a regular file"});
}

TEST(SafetensorsTest, ReadOfAFileTruncatedAfterOpenIsDataLoss) {
  const std::string path = TestDir() + "/model.safetensors";
  ASSERT_TRUE(WriteModel(path, ModelTensors(), {100}).ok());
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ(::truncate(path.c_str(), (*reader)->data_section_offset() + 40), 0);
  std::vector<float> wte(407);
  ExpectError((*reader)->ReadF32("wte", absl::MakeSpan(wte)), absl::StatusCode::kDataLoss,
              {path, "tensor \"wte\"", "the file ends at byte"});
}

TEST(SafetensorsTest, WriterDestroyedBeforeFinishLeavesNoFile) {
  const std::string dir = TestDir();
  const std::string path = dir + "/model.safetensors";
  {
    auto writer = SafetensorsWriter::Create(path, {{"a", {1000}}});
    ASSERT_TRUE(writer.ok()) << writer.status();
    EXPECT_EQ(DirName((*writer)->temp_path()), dir);
    EXPECT_TRUE(Exists((*writer)->temp_path()));
    std::vector<float> half(500, 1.0f);
    ASSERT_TRUE((*writer)->Append(half).ok());
  }
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{});
  {
    // Complete but never finished: still nothing.
    auto writer = SafetensorsWriter::Create(path, {{"a", {3}}});
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(std::vector<float>{1, 2, 3}).ok());
  }
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{});
}

TEST(SafetensorsTest, FinishReplacesAnExistingFileAtomically) {
  const std::string dir = TestDir();
  const std::string path = dir + "/model.safetensors";
  const std::vector<Tensor> old_tensors = {{"a", {3}, {1, 2, 3}}};
  ASSERT_TRUE(WriteModel(path, old_tensors, {3}).ok());
  const std::string old_bytes = ReadBytes(path);
  auto old_reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(old_reader.ok());

  const std::vector<Tensor> new_tensors = {{"a", {3}, {7, 8, 9}}, {"b", {2}, {5, 6}}};
  auto writer = SafetensorsWriter::Create(path, Specs(new_tensors));
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Append(new_tensors[0].values).ok());
  ASSERT_TRUE((*writer)->Append(new_tensors[1].values).ok());
  EXPECT_EQ(ReadBytes(path), old_bytes) << "path must not change before Finish";
  ASSERT_TRUE((*writer)->Finish().ok());
  EXPECT_FALSE(Exists((*writer)->temp_path()));
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});

  auto new_reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(new_reader.ok()) << new_reader.status();
  std::vector<float> b(2);
  ASSERT_TRUE((*new_reader)->ReadF32("b", absl::MakeSpan(b)).ok());
  EXPECT_EQ(b, new_tensors[1].values);
  // The reader opened before still sees the old file whole: Finish renamed a
  // new inode into place instead of rewriting the old one.
  std::vector<float> a(3);
  ASSERT_TRUE((*old_reader)->ReadF32("a", absl::MakeSpan(a)).ok());
  EXPECT_EQ(a, old_tensors[0].values);
  EXPECT_EQ((*old_reader)->Find("b"), nullptr);

  ExpectError((*writer)->Finish(), absl::StatusCode::kFailedPrecondition, {"already finished"});
  ExpectError((*writer)->Append(b), absl::StatusCode::kFailedPrecondition, {"already finished"});
}

TEST(SafetensorsTest, WritesAFileWithoutTensors) {
  const std::string path = TestDir() + "/empty.safetensors";
  auto writer = SafetensorsWriter::Create(path, {}, {{"k", "v"}});
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Append({}).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->tensors().empty());
  EXPECT_EQ((*reader)->metadata().at("k"), "v");
}

TEST(SafetensorsTest, AppendRejectsMoreThanATensorHoldsAndFailsTheWriter) {
  const std::string dir = TestDir();
  const std::string path = dir + "/model.safetensors";
  WriteBytes(path, "previous contents");
  const std::vector<float> five(5, 1.0f);
  {
    auto writer = SafetensorsWriter::Create(path, {{"a", {3}}, {"b", {2}}});
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(absl::MakeSpan(five).first(2)).ok());
    // Two more would spill one element of "a" into "b".
    ExpectError((*writer)->Append(absl::MakeSpan(five).first(2)),
                absl::StatusCode::kInvalidArgument,
                {path, "Append of 2 elements to tensor \"a\", which has 1 of its 3 elements left"});
    EXPECT_FALSE(Exists((*writer)->temp_path())) << "a failed writer removes its file at once";
    ExpectError((*writer)->Append(absl::MakeSpan(five).first(1)),
                absl::StatusCode::kFailedPrecondition,
                {"failed earlier", "Append of 2 elements to tensor \"a\""});
    ExpectError((*writer)->Finish(), absl::StatusCode::kFailedPrecondition, {"failed earlier"});
  }
  {
    auto writer = SafetensorsWriter::Create(path, {{"a", {3}}, {"b", {2}}});
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(absl::MakeSpan(five).first(3)).ok());
    ASSERT_TRUE((*writer)->Append(absl::MakeSpan(five).first(2)).ok());
    ExpectError((*writer)->Append(absl::MakeSpan(five).first(1)),
                absl::StatusCode::kInvalidArgument,
                {"Append of 1 elements after all 2 tensors are complete"});
  }
  EXPECT_EQ(ReadBytes(path), "previous contents");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});
}

TEST(SafetensorsTest, FinishOfAnIncompleteFileNamesTheTensorAndLeavesPathAlone) {
  const std::string dir = TestDir();
  const std::string path = dir + "/model.safetensors";
  WriteBytes(path, "previous contents");
  auto writer = SafetensorsWriter::Create(path, {{"a", {3}}, {"e", {0}}, {"b", {4}}, {"c", {1}}});
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Append(std::vector<float>{1, 2, 3}).ok());
  ASSERT_TRUE((*writer)->Append(std::vector<float>{4}).ok());
  ExpectError((*writer)->Finish(), absl::StatusCode::kFailedPrecondition,
              {path, "tensor \"b\" at 1 of its 4 elements (1 later tensors not started)"});
  EXPECT_EQ(ReadBytes(path), "previous contents");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});
}

TEST(SafetensorsTest, CreateRejectsBadTensorListsAndUnwritablePaths) {
  const std::string dir = TestDir();
  ExpectError(SafetensorsWriter::Create(dir + "/x.safetensors", {{"a", {1}}, {"a", {1}}}).status(),
              absl::StatusCode::kInvalidArgument,
              {dir + "/x.safetensors", "duplicate tensor name \"a\""});
  ExpectError(SafetensorsWriter::Create(dir + "/x.safetensors", {{"__metadata__", {1}}}).status(),
              absl::StatusCode::kInvalidArgument, {"cannot be named \"__metadata__\""});
  ExpectError(SafetensorsWriter::Create(dir + "/x.safetensors", {{"a\xff", {1}}}).status(),
              absl::StatusCode::kInvalidArgument, {"tensor name \"a\\xff\" is not valid UTF-8"});
  ExpectError(SafetensorsWriter::Create(dir + "/no/such/dir/x.safetensors", {}).status(),
              absl::StatusCode::kNotFound,
              {"cannot create safetensors file " + dir + "/no/such/dir/x.safetensors",
               "No such file or directory"});
  WriteBytes(dir + "/file", "");
  ExpectError(SafetensorsWriter::Create(dir + "/file/x.safetensors", {}).status(),
              absl::StatusCode::kFailedPrecondition,
              {dir + "/file/x.safetensors", "Not a directory"});
  ExpectError(SafetensorsWriter::Create(dir + "/", {}).status(), absl::StatusCode::kInvalidArgument,
              {"must name a file"});
  ExpectError(SafetensorsWriter::Create("", {}).status(), absl::StatusCode::kInvalidArgument,
              {"must name a file"});
  // A directory in the way of the rename: the error comes from Finish.
  ASSERT_EQ(::mkdir((dir + "/taken").c_str(), 0755), 0);
  auto writer = SafetensorsWriter::Create(dir + "/taken", {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  ExpectError((*writer)->Finish(), absl::StatusCode::kFailedPrecondition,
              {"cannot rename", "onto " + dir + "/taken"});
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"file", "taken"}));
}

TEST(SafetensorsTest, TwoWritersOfOnePathUseDistinctTemporaryFiles) {
  const std::string path = TestDir() + "/model.safetensors";
  auto first = SafetensorsWriter::Create(path, {{"a", {1}}});
  auto second = SafetensorsWriter::Create(path, {{"a", {1}}});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE((*first)->temp_path(), (*second)->temp_path());
  ASSERT_TRUE((*first)->Append(std::vector<float>{1}).ok());
  ASSERT_TRUE((*second)->Append(std::vector<float>{2}).ok());
  ASSERT_TRUE((*first)->Finish().ok());
  ASSERT_TRUE((*second)->Finish().ok());
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok());
  std::vector<float> a(1);
  ASSERT_TRUE((*reader)->ReadF32("a", absl::MakeSpan(a)).ok());
  EXPECT_EQ(a[0], 2.0f);  // the last Finish wins, whole
}

// A full disk, simulated with RLIMIT_FSIZE: past the limit write(2) fails with
// EFBIG exactly as it fails with ENOSPC on a full file system (SIGXFSZ, which
// would kill the process, is ignored for the test).
TEST(SafetensorsTest, AFullDiskIsAnErrorNamingThePathAndLeavesNothing) {
  const std::string dir = TestDir();
  const std::string path = dir + "/model.safetensors";
  WriteBytes(path, "previous contents");
  base_test::FileSizeLimit limit(64 * 1024);
  ASSERT_TRUE(limit.ok());

  absl::Status status;
  std::string temp_path;
  {
    auto writer = SafetensorsWriter::Create(path, {{"big", {1 << 20}}});
    ASSERT_TRUE(writer.ok()) << writer.status();
    temp_path = (*writer)->temp_path();
    const std::vector<float> piece(100 * 1000, 0.5f);
    for (int i = 0; i < 11 && status.ok(); ++i) status = (*writer)->Append(piece);
    if (status.ok()) status = (*writer)->Finish();
  }
  ASSERT_TRUE(limit.Restore());

  ExpectError(status, absl::StatusCode::kOutOfRange,
              {"cannot write safetensors file " + path, temp_path, "File too large"});
  EXPECT_EQ(ReadBytes(path), "previous contents");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});
}

}  // namespace
}  // namespace checkpoint
}  // namespace fsdp
