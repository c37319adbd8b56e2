// File: tests/fsdp/data/token_file_test.cc
#include "fsdp/data/token_file.h"

#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/child_peak_memory.h"

namespace fsdp {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// Writes raw bytes: a header of the given fields, then `tokens`, then `extra`.
void WriteRaw(const std::string& path, int32_t magic, int32_t version, int32_t count,
              const std::vector<uint16_t>& tokens, int extra_bytes = 0) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  std::fwrite(header.data(), 4, 256, f);
  if (!tokens.empty()) std::fwrite(tokens.data(), 2, tokens.size(), f);
  for (int i = 0; i < extra_bytes; ++i) std::fputc(0, f);
  std::fclose(f);
}

TEST(TokenFileTest, RoundTripsAndReadsOverlappingWindowsLikeLlmC) {
  const std::string path = TempPath("round_trip.bin");
  std::vector<uint16_t> tokens(23);
  for (int i = 0; i < 23; ++i) tokens[i] = static_cast<uint16_t>(i * 3);
  ASSERT_TRUE(WriteTokenFile(path, tokens).ok());
  // Byte layout: 1024-byte header, then 2 bytes per token.
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::fseek(f, 0, SEEK_END);
  EXPECT_EQ(std::ftell(f), 1024 + 2 * 23);
  std::fclose(f);

  auto source = TokenFileSource::Open(path, 100);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->num_tokens(), 23);
  // seq_len 5: windows of 6 tokens starting at 0, 5, 10, 15 ((23 - 1) / 5 = 4), then wrap.
  std::vector<int32_t> seq(6);
  for (int64_t index : {0, 1, 3, 4, 9}) {
    ASSERT_TRUE((*source)->ReadSequence(index, absl::MakeSpan(seq)).ok());
    const int64_t start = (index % 4) * 5;
    for (int t = 0; t < 6; ++t) EXPECT_EQ(seq[t], tokens[start + t]) << index << " " << t;
  }
  std::vector<int32_t> too_long(24);
  EXPECT_EQ((*source)->ReadSequence(0, absl::MakeSpan(too_long)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokenFileTest, BadFilesGiveClearErrors) {
  const std::vector<uint16_t> tokens = {1, 2, 3, 4};
  struct Case {
    std::string name;
    int32_t magic, version, count;
    int extra;
    absl::StatusCode code;
    std::string needle;
  };
  const Case cases[] = {
      {"bad_magic.bin", 12345, 1, 4, 0, absl::StatusCode::kInvalidArgument, "magic 12345"},
      {"bad_version.bin", 20240520, 2, 4, 0, absl::StatusCode::kInvalidArgument, "version 2"},
      {"truncated.bin", 20240520, 1, 10, 0, absl::StatusCode::kDataLoss, "truncated"},
      {"trailing.bin", 20240520, 1, 4, 3, absl::StatusCode::kInvalidArgument, "bytes after"},
      {"negative.bin", 20240520, 1, -4, 0, absl::StatusCode::kInvalidArgument, "negative"},
  };
  for (const Case& c : cases) {
    const std::string path = TempPath(c.name);
    WriteRaw(path, c.magic, c.version, c.count, tokens, c.extra);
    auto source = TokenFileSource::Open(path, 100);
    ASSERT_FALSE(source.ok()) << c.name;
    EXPECT_EQ(source.status().code(), c.code) << c.name << ": " << source.status();
    EXPECT_NE(source.status().message().find(c.needle), std::string::npos) << source.status();
    EXPECT_NE(source.status().message().find(path), std::string::npos) << source.status();
  }
  // Shorter than the header.
  const std::string short_path = TempPath("short.bin");
  std::FILE* f = std::fopen(short_path.c_str(), "wb");
  std::fputs("tiny", f);
  std::fclose(f);
  EXPECT_EQ(TokenFileSource::Open(short_path, 100).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(TokenFileSource::Open(TempPath("missing.bin"), 100).status().code(),
            absl::StatusCode::kNotFound);
  // A token outside the vocabulary.
  const std::string vocab_path = TempPath("vocab.bin");
  ASSERT_TRUE(WriteTokenFile(vocab_path, tokens).ok());
  auto small_vocab = TokenFileSource::Open(vocab_path, 4);
  EXPECT_EQ(small_vocab.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(small_vocab.status().message().find("token 4 at position 3"), std::string::npos)
      << small_vocab.status();
}

// Issue #39: a header announcing 2^31 - 1 tokens with 100 behind it was
// refused only after 4.2 GB were allocated. The size is now checked first:
// the same error, measured under 100 MB of peak memory.
TEST(TokenFileTest, AHeaderAnnouncingMoreThanTheFileHoldsCostsNoMemory) {
  const std::string path = TempPath("announces_2g.bin");
  WriteRaw(path, kTokenFileMagic, kTokenFileVersion, INT32_MAX, std::vector<uint16_t>(100, 7));
  const fsdp_test::ChildRun run =
      fsdp_test::RunInChild([&] { return TokenFileSource::Open(path, 100).status(); });
  ASSERT_TRUE(run.finished) << run.failure;
  EXPECT_EQ(run.status.code(), absl::StatusCode::kDataLoss) << run.status;
  EXPECT_NE(run.status.message().find(
                absl::StrCat("announces ", INT32_MAX, " tokens but only 100 follow")),
            std::string::npos)
      << run.status;
  EXPECT_LT(run.peak_rss_growth_bytes, int64_t{100} << 20);

  // A file far longer than announced is refused from its size too (sparse:
  // 4 GiB without a byte on disk).
  const std::string long_path = TempPath("long_tail.bin");
  WriteRaw(long_path, kTokenFileMagic, kTokenFileVersion, 4, {1, 2, 3, 4});
  ASSERT_EQ(truncate(long_path.c_str(), int64_t{4} << 30), 0);
  const fsdp_test::ChildRun tail =
      fsdp_test::RunInChild([&] { return TokenFileSource::Open(long_path, 100).status(); });
  ASSERT_TRUE(tail.finished) << tail.failure;
  EXPECT_EQ(tail.status.code(), absl::StatusCode::kInvalidArgument) << tail.status;
  EXPECT_NE(tail.status.message().find(
                absl::StrCat((int64_t{4} << 30) - 1024 - 8, " bytes after the 4 tokens")),
            std::string::npos)
      << tail.status;
  EXPECT_LT(tail.peak_rss_growth_bytes, int64_t{100} << 20);
}

TEST(TokenFileTest, APipeIsRefusedBecauseItsSizeCannotBeChecked) {
  const std::string path = TempPath("tokens.fifo");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  // Opening a FIFO for reading waits for a writer: one that writes a good
  // header and closes.
  std::thread writer([&] {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return;
    std::vector<int32_t> header(kTokenFileHeaderInts, 0);
    header[0] = kTokenFileMagic;
    header[1] = kTokenFileVersion;
    header[2] = 4;
    std::fwrite(header.data(), sizeof(int32_t), header.size(), f);
    std::fclose(f);
  });
  auto source = TokenFileSource::Open(path, 100);
  writer.join();
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("not a regular file"), std::string::npos)
      << source.status();
}

}  // namespace
}  // namespace fsdp
