// File: tests/fsdp/text/byte_bpe_test.cc
//
// The tokenizer round-trips any bytes exactly (byte-level and BPE, on the
// fortunes corpus and on random bytes), trains deterministically, saves and
// loads its merges, and refuses bad input with a message saying what to do.
#include "fsdp/text/byte_bpe.h"

#include <sys/stat.h>

#include <cstdlib>
#include <random>
#include <string>

#include "fsdp/text/corpus.h"
#include "gtest/gtest.h"

namespace fsdp::text {
namespace {

// tools/setup.sh installs the Debian package fortunes.
constexpr char kFortunes[] = "/usr/share/games/fortunes";

std::string Fortunes() {
  absl::StatusOr<Corpus> corpus = ReadCorpus(kFortunes);
  EXPECT_TRUE(corpus.ok()) << corpus.status() << " (run tools/setup.sh: it installs fortunes)";
  return corpus.ok() ? corpus->text : std::string();
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng() & 0xff);
  return out;
}

TEST(ByteBpeTest, ByteLevelIsTheBytes) {
  ByteBpe bytes;
  EXPECT_EQ(bytes.vocab_size(), 256);
  const std::string text = RandomBytes(5000, 1);
  const std::vector<uint16_t> tokens = bytes.Encode(text);
  ASSERT_EQ(tokens.size(), text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    EXPECT_EQ(tokens[i], static_cast<unsigned char>(text[i]));
  }
  EXPECT_EQ(bytes.Decode(tokens), text);
}

TEST(ByteBpeTest, PiecesPartitionTheText) {
  const std::string text = "Hello,  world 42x\n\n\tcaf\xc3\xa9 \xff\xfe!";
  std::string joined;
  for (absl::string_view piece : SplitIntoPieces(text)) {
    EXPECT_FALSE(piece.empty());
    joined.append(piece.data(), piece.size());
  }
  EXPECT_EQ(joined, text);
  const std::vector<absl::string_view> pieces = SplitIntoPieces("the cat");
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1], " cat");
}

TEST(ByteBpeTest, RoundTripsTheCorpusAndRandomBytes) {
  const std::string corpus = Fortunes();
  ASSERT_GT(corpus.size(), 1000000u);
  absl::StatusOr<ByteBpe> bpe = ByteBpe::Train(corpus, 512);
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  EXPECT_EQ(bpe->vocab_size(), 512);
  const std::vector<uint16_t> tokens = bpe->Encode(corpus);
  // Compresses English: fewer tokens than bytes (about 1.9 bytes per token).
  EXPECT_LT(tokens.size(), corpus.size() * 2 / 3);
  for (uint16_t t : tokens) ASSERT_LT(t, 512);
  EXPECT_EQ(bpe->Decode(tokens), corpus);
  for (uint32_t seed = 0; seed < 5; ++seed) {
    const std::string random = RandomBytes(20000, seed);
    EXPECT_EQ(bpe->Decode(bpe->Encode(random)), random) << "seed " << seed;
    EXPECT_EQ(ByteBpe().Decode(ByteBpe().Encode(random)), random);
  }
  // A BPE trained on random bytes round-trips them too.
  const std::string random = RandomBytes(100000, 9);
  absl::StatusOr<ByteBpe> random_bpe = ByteBpe::Train(random, 300);
  ASSERT_TRUE(random_bpe.ok());
  EXPECT_EQ(random_bpe->Decode(random_bpe->Encode(random)), random);
  EXPECT_EQ(random_bpe->Decode(random_bpe->Encode(corpus.substr(0, 50000))),
            corpus.substr(0, 50000));
}

TEST(ByteBpeTest, TrainingIsDeterministicAndSaves) {
  const std::string corpus = Fortunes().substr(0, 400000);
  absl::StatusOr<ByteBpe> a = ByteBpe::Train(corpus, 400);
  absl::StatusOr<ByteBpe> b = ByteBpe::Train(corpus, 400);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->merges(), b->merges());
  EXPECT_EQ(a->Serialize(), b->Serialize());
  absl::StatusOr<ByteBpe> loaded = ByteBpe::Parse(a->Serialize());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->merges(), a->merges());
  EXPECT_EQ(loaded->Encode(corpus), a->Encode(corpus));
  // The first merge is the most frequent pair: in English text, one with 'e' or a space.
  const auto& [left, right] = a->merges()[0];
  const std::string first = a->TokenBytes(256);
  EXPECT_EQ(first, a->TokenBytes(left) + a->TokenBytes(right));
}

TEST(ByteBpeTest, StopsWhenNothingRepeats) {
  absl::StatusOr<ByteBpe> bpe = ByteBpe::Train("abcdef", 1000);
  ASSERT_TRUE(bpe.ok());
  EXPECT_EQ(bpe->vocab_size(), 256);
  absl::StatusOr<ByteBpe> some = ByteBpe::Train("abab abab abab", 1000);
  ASSERT_TRUE(some.ok());
  EXPECT_GT(some->vocab_size(), 256);
  EXPECT_LT(some->vocab_size(), 1000);
}

TEST(ByteBpeTest, RefusesBadInput) {
  absl::StatusOr<ByteBpe> empty = ByteBpe::Train("", 512);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos) << empty.status();
  absl::StatusOr<ByteBpe> huge = ByteBpe::Train("text", 70000);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("uint16"), std::string::npos) << huge.status();
  EXPECT_FALSE(ByteBpe::Train("text", 100).ok());
  EXPECT_FALSE(ByteBpe::Parse("").ok());
  EXPECT_FALSE(ByteBpe::Parse("fsdp-byte-bpe 1\nmerges 2\n97 98\n").ok());
  absl::StatusOr<ByteBpe> forward_ref = ByteBpe::Parse("fsdp-byte-bpe 1\nmerges 1\n97 256\n");
  ASSERT_FALSE(forward_ref.ok());
  EXPECT_NE(forward_ref.status().message().find("line 3"), std::string::npos)
      << forward_ref.status();
}

TEST(CorpusTest, ReadErrorsNameThePath) {
  absl::StatusOr<Corpus> missing = ReadCorpus("/nonexistent/corpus.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("/nonexistent/corpus.txt"), std::string::npos);
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/empty_dir";
  mkdir(dir.c_str(), 0755);
  absl::StatusOr<Corpus> empty_dir = ReadCorpus(dir);
  ASSERT_FALSE(empty_dir.ok());
  EXPECT_NE(empty_dir.status().message().find("no regular files"), std::string::npos);
  absl::StatusOr<Corpus> fortunes = ReadCorpus(kFortunes);
  ASSERT_TRUE(fortunes.ok());
  for (const std::string& file : fortunes->files) {
    EXPECT_EQ(file.find(".dat"), std::string::npos) << file;  // fortune's binary indexes
    EXPECT_EQ(file.find(".u8"), std::string::npos) << file;   // symbolic links
  }
}

}  // namespace
}  // namespace fsdp::text
