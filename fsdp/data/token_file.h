// File: fsdp/data/token_file.h
//
// llm.c's tokenized data files (.bin), e.g. fineweb/tinyshakespeare shards:
//   header: 256 little-endian int32: [0] magic 20240520, [1] version 1,
//           [2] number of tokens N, the rest unused (zero)
//   body:   N little-endian uint16 tokens
// TokenFileSource::Open reads a whole file into memory (the files this
// project trains on are small) and checks it: wrong magic, wrong version,
// a header or body shorter than announced, trailing bytes, or a token outside
// the vocabulary are InvalidArgument (DataLoss for truncation) naming the file
// and what to do. The file's size is compared with the header's count before
// anything is allocated, so memory never exceeds the file's size (issue #39);
// the file must therefore be a regular file (not a pipe).
//
// Sequence i of length L+1 is the window starting at token (i mod W) * L,
// W = (N - 1) / L: consecutive windows overlap by one token, exactly as
// llm.c's loader reads inputs and targets, wrapping around at the end.
#ifndef FSDP_DATA_TOKEN_FILE_H_
#define FSDP_DATA_TOKEN_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fsdp/data/token_source.h"

namespace fsdp {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr int kTokenFileHeaderInts = 256;

// Writes `tokens` in the format above (for tests and data preparation).
absl::Status WriteTokenFile(const std::string& path, absl::Span<const uint16_t> tokens);

class TokenFileSource : public TokenSource {
 public:
  static absl::StatusOr<std::unique_ptr<TokenFileSource>> Open(const std::string& path,
                                                               int vocab);

  // InvalidArgument if the file holds fewer than out.size() tokens.
  absl::Status ReadSequence(int64_t index, absl::Span<int32_t> out) const override;
  int vocab_size() const override { return vocab_; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  TokenFileSource(std::string path, int vocab, std::vector<uint16_t> tokens)
      : path_(std::move(path)), vocab_(vocab), tokens_(std::move(tokens)) {}

  std::string path_;
  int vocab_;
  std::vector<uint16_t> tokens_;
};

}  // namespace fsdp

#endif  // FSDP_DATA_TOKEN_FILE_H_
