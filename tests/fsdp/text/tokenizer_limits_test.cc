// File: tests/fsdp/text/tokenizer_limits_test.cc
//
// [Note: tokenizer limits] (fsdp/text/byte_bpe.h), issue #39: a tokenizer
// file whose merges double a token's length on every line, or one that is
// simply too large, is refused at load with the limit and the line named,
// measured to stay under 100 MB of peak memory; training never learns a
// token it could not load again.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fsdp/text/byte_bpe.h"
#include "fsdp/text/tokenizer_file.h"
#include "gtest/gtest.h"
#include "tests/testing/child_peak_memory.h"

namespace fsdp::text {
namespace {

using ::fsdp_test::ChildRun;
using ::fsdp_test::RunInChild;

constexpr int64_t kPeakLimitBytes = int64_t{100} << 20;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

// The file: 65 65, then each merge joins the last token with itself,
// so merge i defines a token of 2^(i+1) bytes.
std::string DoublingTokenizer(int merges) {
  std::string out = absl::StrCat("fsdp-byte-bpe 1\nmerges ", merges, "\n65 65\n");
  for (int i = 1; i < merges; ++i) {
    absl::StrAppend(&out, kByteVocab + i - 1, " ", kByteVocab + i - 1, "\n");
  }
  return out;
}

// The first merge index whose token, 2^(i+1) bytes, passes the limit.
int FirstTooLongMerge() {
  int i = 0;
  while ((int64_t{2} << i) <= kMaxTokenBytes) ++i;
  return i;
}

TEST(TokenizerLimitsTest, DoublingMergesAreRefusedAtTheirLineUnder100MB) {
  const std::string path = TempPath("doubling.tokenizer");
  WriteFile(path, DoublingTokenizer(38));  // 40 lines, as in the issue
  const ChildRun run = RunInChild([&] { return LoadByteBpe(path).status(); });
  ASSERT_TRUE(run.finished) << run.failure;
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument);
  // Line numbers count the two header lines.
  const int line = 2 + FirstTooLongMerge() + 1;
  EXPECT_TRUE(absl::StrContains(run.status.message(), path)) << run.status.message();
  EXPECT_TRUE(absl::StrContains(run.status.message(), absl::StrCat("line ", line, ":")))
      << run.status.message();
  EXPECT_TRUE(absl::StrContains(run.status.message(),
                                absl::StrCat(int64_t{2} << FirstTooLongMerge(), " bytes long")))
      << run.status.message();
  EXPECT_TRUE(absl::StrContains(run.status.message(), absl::StrCat("limit of ", kMaxTokenBytes)))
      << run.status.message();
  EXPECT_LT(run.peak_rss_growth_bytes, kPeakLimitBytes);
}

TEST(TokenizerLimitsTest, TokensUpToTheLimitLoad) {
  absl::StatusOr<ByteBpe> bpe = ByteBpe::Parse(DoublingTokenizer(FirstTooLongMerge()));
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  const int longest = bpe->vocab_size() - 1;
  EXPECT_EQ(bpe->TokenBytes(longest), std::string(kMaxTokenBytes, 'A'));
  const std::vector<uint16_t> tokens = bpe->Encode(std::string(3 * kMaxTokenBytes, 'A'));
  EXPECT_EQ(tokens, std::vector<uint16_t>(3, static_cast<uint16_t>(longest)));
}

TEST(TokenizerLimitsTest, OversizedFilesAreRefusedFromTheirSizeUnder100MB) {
  // Sparse: 8 GiB announced by the file system, nothing on disk.
  const std::string sparse = TempPath("sparse.tokenizer");
  WriteFile(sparse, "fsdp-byte-bpe 1\n");
  ASSERT_EQ(truncate(sparse.c_str(), int64_t{8} << 30), 0);
  const ChildRun huge = RunInChild([&] { return LoadByteBpe(sparse).status(); });
  ASSERT_TRUE(huge.finished) << huge.failure;
  EXPECT_EQ(huge.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      absl::StrContains(huge.status.message(), absl::StrCat("limit of ", kMaxTokenizerFileBytes)))
      << huge.status.message();
  EXPECT_LT(huge.peak_rss_growth_bytes, kPeakLimitBytes);

  // A device of endless bytes: the read stops one byte past the limit.
  const ChildRun endless = RunInChild([&] { return LoadByteBpe("/dev/zero").status(); });
  ASSERT_TRUE(endless.finished) << endless.failure;
  EXPECT_EQ(endless.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(endless.status.message(), "/dev/zero")) << endless.status.message();
  EXPECT_TRUE(absl::StrContains(endless.status.message(), "limit")) << endless.status.message();
  EXPECT_LT(endless.peak_rss_growth_bytes, kPeakLimitBytes);

  // Parse itself refuses contents over the limit, whatever gave them.
  const std::string newlines(kMaxTokenizerFileBytes + 1, '\n');
  absl::StatusOr<ByteBpe> parsed = ByteBpe::Parse(newlines);
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), "limit")) << parsed.status().message();
}

TEST(TokenizerLimitsTest, TheLargestValidFileFitsTheLimits) {
  // Every merge joins two bytes: 65280 lines of the widest numbers.
  std::string contents = absl::StrCat("fsdp-byte-bpe 1\nmerges ", kMaxVocab - kByteVocab, "\n");
  for (int i = 0; i < kMaxVocab - kByteVocab; ++i) absl::StrAppend(&contents, "255 255\n");
  EXPECT_LE(contents.size() + (kMaxVocab - kByteVocab) * 4, kMaxTokenizerFileBytes);
  absl::StatusOr<ByteBpe> bpe = ByteBpe::Parse(contents);
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  EXPECT_EQ(bpe->vocab_size(), kMaxVocab);
}

TEST(TokenizerLimitsTest, TrainingNeverLearnsATokenItCannotLoad) {
  // One long word, repeated: without the limit the merges would keep
  // doubling up to the word's 1000 bytes.
  std::string corpus;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&corpus, std::string(1000, 'x'), " ");
  absl::StatusOr<ByteBpe> bpe = ByteBpe::Train(corpus, 1024);
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  size_t longest = 0;
  for (int t = 0; t < bpe->vocab_size(); ++t)
    longest = std::max(longest, bpe->TokenBytes(t).size());
  EXPECT_EQ(longest, static_cast<size_t>(kMaxTokenBytes));
  absl::StatusOr<ByteBpe> loaded = ByteBpe::Parse(bpe->Serialize());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->merges(), bpe->merges());
  EXPECT_EQ(loaded->Decode(loaded->Encode(corpus)), corpus);
}

TEST(TokenizerLimitsTest, LoadErrorsNameThePath) {
  const absl::Status missing = LoadByteBpe(TempPath("missing.tokenizer")).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.message(), "missing.tokenizer")) << missing.message();
  const std::string garbage = TempPath("garbage.tokenizer");
  WriteFile(garbage, "not a tokenizer\n");
  const absl::Status bad = LoadByteBpe(garbage).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.message(), garbage)) << bad.message();
  EXPECT_TRUE(absl::StrContains(bad.message(), "line 1")) << bad.message();
}

}  // namespace
}  // namespace fsdp::text
