// File: fsdp/text/byte_bpe.h
//
// A byte-level BPE tokenizer (GPT-2's idea, without its regex or byte-to-
// unicode table): tokens 0..255 are the bytes themselves, and merge i makes
// token 256 + i from a pair of earlier tokens. Any byte string encodes, and
// Decode(Encode(s)) == s exactly, UTF-8 or not. With no merges it is the
// plain byte-level tokenizer (vocabulary 256).
//
//   FSDP_ASSIGN_OR_RETURN(ByteBpe bpe, ByteBpe::Train(corpus, /*vocab=*/512));
//   std::vector<uint16_t> tokens = bpe.Encode("Hello, world\n");
//   std::string text = bpe.Decode(tokens);            // "Hello, world\n"
//   FSDP_RETURN_IF_ERROR(base::WriteFileAtomically("x.tokenizer", bpe.Serialize()));
//
// [Note: BPE pieces] Training and encoding first cut the text into pieces
// and merge only within a piece, so a token never spans a word boundary:
// a piece is an optional single space followed by a run of letters (ASCII
// letters and every byte >= 0x80, so UTF-8 sequences stay together), or by
// a run of digits; otherwise a run of one repeated whitespace byte, or one
// other byte. Cutting only partitions the bytes, so it never loses any.
//
// Training is deterministic: each round merges the most frequent adjacent
// pair (summed over distinct pieces weighted by their counts), ties broken
// by the smaller (left, right) token pair; it stops early when no pair
// occurs twice.
//
// The tokenizer file (Serialize / Parse) is text:
//   fsdp-byte-bpe 1
//   merges M
//   <left> <right>        M lines; line i defines token 256 + i
//
// [Note: tokenizer limits] Each merge concatenates two tokens, so a file of
// a few lines can define tokens of gigabytes (merges 65 65, 256 256,
// 257 257, ... double the length every line: issue #39). Parse therefore
// checks, before it builds any table, that the file is at most
// kMaxTokenizerFileBytes and that no token is longer than kMaxTokenBytes;
// Train never learns a longer token, so what it writes always loads. With at
// most 65280 merges the token table then holds at most kMaxTokenTableBytes,
// and a decoded sample at most kMaxTokenBytes bytes per token.
#ifndef FSDP_TEXT_BYTE_BPE_H_
#define FSDP_TEXT_BYTE_BPE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fsdp {
namespace text {

inline constexpr int kByteVocab = 256;
// Token files hold uint16 tokens (fsdp/data/token_file.h).
inline constexpr int kMaxVocab = 65536;
// See [Note: tokenizer limits]. GPT-2's longest token is 128 bytes; ours
// come from pieces (words, digit runs, whitespace runs) of real text.
inline constexpr int kMaxTokenBytes = 256;
// "merges 65280\n" and 65280 lines "65535 65535\n" after the header: 784 KB.
inline constexpr int64_t kMaxTokenizerFileBytes = int64_t{1} << 20;
inline constexpr int64_t kMaxTokenTableBytes = int64_t{kMaxVocab} * kMaxTokenBytes;

class ByteBpe {
 public:
  // The byte-level tokenizer: 256 tokens, no merges.
  ByteBpe() { BuildTables(); }

  // Learns vocab - 256 merges from `corpus` (see the note above).
  // InvalidArgument for vocab < 256 or > 65536 (the message says why), or
  // an empty corpus. The result may hold fewer merges when the corpus runs
  // out of repeated pairs; vocab_size() tells. No merge makes a token
  // longer than kMaxTokenBytes (the pair is skipped).
  static absl::StatusOr<ByteBpe> Train(absl::string_view corpus, int vocab);

  // Reads what Serialize wrote. InvalidArgument naming the line that is
  // wrong (bad header, count, a merge naming a token not yet defined, a
  // merge making a token longer than kMaxTokenBytes), or naming the limit
  // for contents longer than kMaxTokenizerFileBytes; nothing is allocated
  // before those checks beyond one length per token.
  static absl::StatusOr<ByteBpe> Parse(absl::string_view contents);
  std::string Serialize() const;

  int vocab_size() const { return kByteVocab + static_cast<int>(merges_.size()); }
  const std::vector<std::pair<uint16_t, uint16_t>>& merges() const { return merges_; }

  std::vector<uint16_t> Encode(absl::string_view text) const;
  // Tokens >= vocab_size() decode to nothing (callers validate tokens).
  std::string Decode(absl::Span<const uint16_t> tokens) const;
  // The bytes of one token ("" outside the vocabulary).
  const std::string& TokenBytes(int token) const;

 private:
  explicit ByteBpe(std::vector<std::pair<uint16_t, uint16_t>> merges);
  void BuildTables();
  void EncodePiece(absl::string_view piece, std::vector<uint16_t>& out) const;

  std::vector<std::pair<uint16_t, uint16_t>> merges_;
  // (left << 16 | right) -> merge rank; token bytes by id.
  absl::flat_hash_map<uint32_t, int> rank_;
  std::vector<std::string> token_bytes_;
};

// The pieces of `text` (see [Note: BPE pieces]); they concatenate to `text`.
std::vector<absl::string_view> SplitIntoPieces(absl::string_view text);

}  // namespace text
}  // namespace fsdp

#endif  // FSDP_TEXT_BYTE_BPE_H_
