// File: fsdp/text/byte_bpe_fuzz.cc
//
// libFuzzer target for the tokenizer (byte_bpe.h): its file parser, which
// reads files users pass with --tokenizer, and the encoder and trainer
// behind it. The first input byte picks what the rest is:
//   even: a tokenizer file, then optionally a NUL and text to encode. A
//         file that parses must keep [Note: tokenizer limits] (every token
//         at most kMaxTokenBytes), load again from what Serialize writes,
//         and encode the text to in-vocabulary tokens that decode to it.
//   odd:  a corpus (at most 1 KB: training is the slow mode) to train on,
//         for 256 + (first byte / 4) tokens at most; what Train learns
//         must obey the same rules.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "fsdp/text/byte_bpe.h"

namespace {

using ::fsdp::text::ByteBpe;

void Check(bool condition) {
  if (!condition) std::abort();
}

// The properties every tokenizer has, with `text` as the sample.
void CheckTokenizer(const ByteBpe& bpe, absl::string_view text) {
  Check(bpe.vocab_size() == fsdp::text::kByteVocab + static_cast<int>(bpe.merges().size()));
  Check(bpe.vocab_size() <= fsdp::text::kMaxVocab);
  int64_t total = 0;
  for (int t = 0; t < bpe.vocab_size(); ++t) {
    const size_t length = bpe.TokenBytes(t).size();
    Check(length >= 1 && length <= static_cast<size_t>(fsdp::text::kMaxTokenBytes));
    total += static_cast<int64_t>(length);
  }
  Check(total <= fsdp::text::kMaxTokenTableBytes);
  absl::StatusOr<ByteBpe> again = ByteBpe::Parse(bpe.Serialize());
  Check(again.ok());
  Check(again->merges() == bpe.merges());
  const std::vector<uint16_t> tokens = bpe.Encode(text);
  for (uint16_t t : tokens) Check(t < bpe.vocab_size());
  Check(tokens.size() <= text.size());
  Check(bpe.Decode(tokens) == text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    const size_t nul = rest.find('\0');
    const absl::string_view file = rest.substr(0, nul);
    const absl::string_view text =
        nul == absl::string_view::npos ? absl::string_view() : rest.substr(nul + 1);
    absl::StatusOr<ByteBpe> bpe = ByteBpe::Parse(file);
    if (bpe.ok()) CheckTokenizer(*bpe, text);
    return 0;
  }
  if (rest.empty() || rest.size() > 1024) return 0;
  const int vocab = fsdp::text::kByteVocab + data[0] / 4;
  absl::StatusOr<ByteBpe> bpe = ByteBpe::Train(rest, vocab);
  Check(bpe.ok());
  Check(bpe->vocab_size() <= vocab);
  CheckTokenizer(*bpe, rest);
  return 0;
}
