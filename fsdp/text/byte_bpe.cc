// File: fsdp/text/byte_bpe.cc
#include "fsdp/text/byte_bpe.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fsdp {
namespace text {
namespace {

enum class ByteClass { kLetter, kDigit, kSpace, kOther };

ByteClass ClassOf(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return ByteClass::kLetter;
  if (c >= '0' && c <= '9') return ByteClass::kDigit;
  if (c == ' ' || c == '\n' || c == '\t' || c == '\r') return ByteClass::kSpace;
  return ByteClass::kOther;
}

uint32_t PairKey(uint16_t left, uint16_t right) {
  return (static_cast<uint32_t>(left) << 16) | right;
}

// One distinct piece during training: its current tokens and its count.
struct Word {
  std::vector<uint16_t> tokens;
  int64_t count = 0;
};

// Replaces every (left, right) in `tokens` by `merged`, left to right.
void ApplyMerge(std::vector<uint16_t>& tokens, uint16_t left, uint16_t right, uint16_t merged) {
  size_t out = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i + 1 < tokens.size() && tokens[i] == left && tokens[i + 1] == right) {
      tokens[out++] = merged;
      ++i;
    } else {
      tokens[out++] = tokens[i];
    }
  }
  tokens.resize(out);
}

}  // namespace

std::vector<absl::string_view> SplitIntoPieces(absl::string_view text) {
  std::vector<absl::string_view> pieces;
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const size_t start = i;
    size_t run_start = i;
    if (bytes[i] == ' ' && i + 1 < n &&
        (ClassOf(bytes[i + 1]) == ByteClass::kLetter || ClassOf(bytes[i + 1]) == ByteClass::kDigit)) {
      run_start = i + 1;  // a leading space joins the word
    }
    const ByteClass cls = ClassOf(bytes[run_start]);
    i = run_start + 1;
    if (cls == ByteClass::kLetter || cls == ByteClass::kDigit) {
      while (i < n && ClassOf(bytes[i]) == cls) ++i;
    } else if (cls == ByteClass::kSpace) {
      while (i < n && bytes[i] == bytes[run_start]) ++i;
    }
    pieces.push_back(text.substr(start, i - start));
  }
  return pieces;
}

ByteBpe::ByteBpe(std::vector<std::pair<uint16_t, uint16_t>> merges) : merges_(std::move(merges)) {
  BuildTables();
}

void ByteBpe::BuildTables() {
  rank_.clear();
  token_bytes_.assign(kByteVocab, std::string());
  for (int b = 0; b < kByteVocab; ++b) token_bytes_[b] = std::string(1, static_cast<char>(b));
  for (size_t i = 0; i < merges_.size(); ++i) {
    rank_[PairKey(merges_[i].first, merges_[i].second)] = static_cast<int>(i);
    token_bytes_.push_back(token_bytes_[merges_[i].first] + token_bytes_[merges_[i].second]);
  }
}

absl::StatusOr<ByteBpe> ByteBpe::Train(absl::string_view corpus, int vocab) {
  if (vocab < kByteVocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab=", vocab, " is below 256: a byte-level tokenizer needs one token per byte value"));
  }
  if (vocab > kMaxVocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab=", vocab, " does not fit uint16 tokens (llm.c token files hold at most 65536 "
        "token ids); use --vocab=65536 or less"));
  }
  if (corpus.empty()) {
    return absl::InvalidArgumentError("the corpus is empty: there is no text to train a tokenizer on");
  }
  absl::flat_hash_map<absl::string_view, int64_t> piece_counts;
  for (absl::string_view piece : SplitIntoPieces(corpus)) ++piece_counts[piece];
  std::vector<std::pair<absl::string_view, int64_t>> sorted(piece_counts.begin(),
                                                            piece_counts.end());
  std::sort(sorted.begin(), sorted.end());  // a fixed order: deterministic sums
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [piece, count] : sorted) {
    if (piece.size() < 2) continue;  // nothing to merge inside
    Word word;
    word.count = count;
    for (char c : piece) word.tokens.push_back(static_cast<unsigned char>(c));
    words.push_back(std::move(word));
  }

  std::vector<std::pair<uint16_t, uint16_t>> merges;
  std::vector<int> token_length(kByteVocab, 1);  // bytes per token: [Note: tokenizer limits]
  absl::flat_hash_map<uint32_t, int64_t> pair_counts;
  while (kByteVocab + static_cast<int>(merges.size()) < vocab) {
    pair_counts.clear();
    for (const Word& word : words) {
      for (size_t i = 0; i + 1 < word.tokens.size(); ++i) {
        pair_counts[PairKey(word.tokens[i], word.tokens[i + 1])] += word.count;
      }
    }
    uint32_t best_key = 0;
    int64_t best_count = 0;
    for (const auto& [key, count] : pair_counts) {
      if (token_length[key >> 16] + token_length[key & 0xffff] > kMaxTokenBytes) continue;
      if (count > best_count || (count == best_count && key < best_key)) {
        best_key = key;
        best_count = count;
      }
    }
    if (best_count < 2) break;  // nothing repeats: more merges would learn nothing
    const auto left = static_cast<uint16_t>(best_key >> 16);
    const auto right = static_cast<uint16_t>(best_key & 0xffff);
    const auto merged = static_cast<uint16_t>(kByteVocab + merges.size());
    merges.emplace_back(left, right);
    token_length.push_back(token_length[left] + token_length[right]);
    for (Word& word : words) ApplyMerge(word.tokens, left, right, merged);
    words.erase(std::remove_if(words.begin(), words.end(),
                               [](const Word& w) { return w.tokens.size() < 2; }),
                words.end());
  }
  return ByteBpe(std::move(merges));
}

void ByteBpe::EncodePiece(absl::string_view piece, std::vector<uint16_t>& out) const {
  std::vector<uint16_t> tokens;
  tokens.reserve(piece.size());
  for (char c : piece) tokens.push_back(static_cast<unsigned char>(c));
  // Apply merges in the order they were learned: always the lowest-ranked
  // pair present next, as training created them.
  while (tokens.size() >= 2 && !rank_.empty()) {
    int best_rank = -1;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      auto it = rank_.find(PairKey(tokens[i], tokens[i + 1]));
      if (it != rank_.end() && (best_rank < 0 || it->second < best_rank)) best_rank = it->second;
    }
    if (best_rank < 0) break;
    const auto& [left, right] = merges_[best_rank];
    ApplyMerge(tokens, left, right, static_cast<uint16_t>(kByteVocab + best_rank));
  }
  out.insert(out.end(), tokens.begin(), tokens.end());
}

std::vector<uint16_t> ByteBpe::Encode(absl::string_view text) const {
  std::vector<uint16_t> out;
  out.reserve(text.size());
  if (merges_.empty()) {
    for (char c : text) out.push_back(static_cast<unsigned char>(c));
    return out;
  }
  absl::flat_hash_map<absl::string_view, std::vector<uint16_t>> cache;
  for (absl::string_view piece : SplitIntoPieces(text)) {
    auto [it, inserted] = cache.try_emplace(piece);
    if (inserted) EncodePiece(piece, it->second);
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

const std::string& ByteBpe::TokenBytes(int token) const {
  static const std::string* const kEmpty = new std::string();
  if (token < 0 || token >= static_cast<int>(token_bytes_.size())) return *kEmpty;
  return token_bytes_[token];
}

std::string ByteBpe::Decode(absl::Span<const uint16_t> tokens) const {
  std::string out;
  for (uint16_t t : tokens) out += TokenBytes(t);
  return out;
}

std::string ByteBpe::Serialize() const {
  std::string out = absl::StrCat("fsdp-byte-bpe 1\nmerges ", merges_.size(), "\n");
  for (const auto& [left, right] : merges_) absl::StrAppend(&out, left, " ", right, "\n");
  return out;
}

absl::StatusOr<ByteBpe> ByteBpe::Parse(absl::string_view contents) {
  if (contents.size() > static_cast<size_t>(kMaxTokenizerFileBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tokenizer file has ", contents.size(), " bytes, more than the limit of ",
        kMaxTokenizerFileBytes, " (a tokenizer of ", kMaxVocab,
        " tokens takes less); is it a tokenizer written by //examples:tokenize?"));
  }
  std::vector<absl::string_view> lines = absl::StrSplit(contents, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  auto bad = [](size_t line, absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer file line ", line + 1, ": ", what,
                     " (write a new one with //examples:tokenize)"));
  };
  if (lines.size() < 2 || lines[0] != "fsdp-byte-bpe 1") {
    return bad(0, "expected the header 'fsdp-byte-bpe 1'");
  }
  int64_t count = 0;
  if (!absl::ConsumePrefix(&lines[1], "merges ") || !absl::SimpleAtoi(lines[1], &count) ||
      count < 0 || count > kMaxVocab - kByteVocab) {
    return bad(1, "expected 'merges M' with 0 <= M <= 65280");
  }
  if (static_cast<int64_t>(lines.size()) != 2 + count) {
    return bad(1, absl::StrCat("announces ", count, " merges but the file has ",
                               lines.size() - 2, " merge lines"));
  }
  // Lengths first, so that a file defining long tokens is refused before
  // any token's bytes exist ([Note: tokenizer limits]).
  std::vector<int> token_length(kByteVocab, 1);
  token_length.reserve(kByteVocab + count);
  std::vector<std::pair<uint16_t, uint16_t>> merges;
  merges.reserve(count);
  for (int64_t i = 0; i < count; ++i) {
    std::vector<absl::string_view> parts = absl::StrSplit(lines[2 + i], ' ');
    int left = -1, right = -1;
    const int defined = kByteVocab + static_cast<int>(i);
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &left) ||
        !absl::SimpleAtoi(parts[1], &right) || left < 0 || right < 0 || left >= defined ||
        right >= defined) {
      return bad(2 + i, absl::StrCat("expected two tokens below ", defined,
                                     " (the tokens defined so far)"));
    }
    const int length = token_length[left] + token_length[right];
    if (length > kMaxTokenBytes) {
      return bad(2 + i, absl::StrCat("merge ", left, " ", right, " makes token ", defined, ", ",
                                     length, " bytes long, more than the limit of ",
                                     kMaxTokenBytes, " bytes per token"));
    }
    token_length.push_back(length);
    merges.emplace_back(static_cast<uint16_t>(left), static_cast<uint16_t>(right));
  }
  return ByteBpe(std::move(merges));
}

}  // namespace text
}  // namespace fsdp
