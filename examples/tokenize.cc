// File: examples/tokenize.cc
//
// Text to tokens: reads a corpus (a file, or a directory of text files),
// splits it into train and validation text (fsdp/text/corpus_split.h),
// trains a byte-level BPE on the training text (fsdp/text/byte_bpe.h; with
// --vocab=256 the plain byte-level tokenizer) and writes
//   PREFIX_train.bin, PREFIX_val.bin   llm.c token files (train_gpt --data, --val_data)
//   PREFIX.tokenizer                   the merges (train_gpt --tokenizer, generate)
//
//   bazel run -c opt //examples:tokenize -- --input=/usr/share/games/fortunes --out=/tmp/fortunes
//
// Every file is written whole or not at all (base::WriteFileAtomically).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "fsdp/text/byte_bpe.h"
#include "fsdp/text/corpus.h"
#include "fsdp/text/corpus_split.h"
#include "fsdp/text/token_file_bytes.h"

ABSL_FLAG(std::string, input, "/usr/share/games/fortunes",
          "a text file, or a directory whose regular files are read in name order");
ABSL_FLAG(std::string, out, "", "output prefix: writes PREFIX_train.bin, PREFIX_val.bin, "
          "PREFIX.tokenizer");
ABSL_FLAG(int, vocab, 512,
          "tokenizer vocabulary: 256 = bytes; more = byte-level BPE with vocab - 256 merges "
          "learned on the training text (at most 65536, uint16 tokens)");
ABSL_FLAG(double, val_fraction, 0.1, "share of the text held out for validation");

namespace {

// Entropy in nats of the tokens' unigram distribution.
double UnigramEntropy(const std::vector<uint16_t>& tokens, int vocab) {
  std::vector<int64_t> counts(vocab, 0);
  for (uint16_t t : tokens) ++counts[t];
  double h = 0.0;
  for (int64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / tokens.size();
    h -= p * std::log(p);
  }
  return h;
}

absl::Status Run() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    return absl::InvalidArgumentError("--out=PREFIX is required (e.g. --out=/tmp/fortunes)");
  }
  const int vocab = absl::GetFlag(FLAGS_vocab);
  if (vocab < fsdp::text::kByteVocab || vocab > fsdp::text::kMaxVocab) {
    // Train() says the same; checked first so nothing is read for nothing.
    FSDP_RETURN_IF_ERROR(fsdp::text::ByteBpe::Train("x", vocab).status());
  }
  const absl::Time start = absl::Now();
  FSDP_ASSIGN_OR_RETURN(fsdp::text::Corpus corpus,
                        fsdp::text::ReadCorpus(absl::GetFlag(FLAGS_input)));
  FSDP_ASSIGN_OR_RETURN(fsdp::text::CorpusSplit split,
                        fsdp::text::SplitCorpus(corpus.text, absl::GetFlag(FLAGS_val_fraction)));
  fsdp::text::ByteBpe bpe;
  if (vocab > fsdp::text::kByteVocab) {
    FSDP_ASSIGN_OR_RETURN(bpe, fsdp::text::ByteBpe::Train(split.train, vocab));
  }
  const double train_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const std::vector<uint16_t> train = bpe.Encode(split.train);
  const std::vector<uint16_t> val = bpe.Encode(split.val);
  if (bpe.Decode(train) != split.train || bpe.Decode(val) != split.val) {
    return absl::InternalError("the tokenizer does not round-trip this corpus (a bug)");
  }
  FSDP_ASSIGN_OR_RETURN(std::string train_bytes, fsdp::text::TokenFileBytes(train));
  FSDP_ASSIGN_OR_RETURN(std::string val_bytes, fsdp::text::TokenFileBytes(val));
  FSDP_RETURN_IF_ERROR(base::WriteFileAtomically(out + ".tokenizer", bpe.Serialize()));
  FSDP_RETURN_IF_ERROR(base::WriteFileAtomically(out + "_train.bin", train_bytes));
  FSDP_RETURN_IF_ERROR(base::WriteFileAtomically(out + "_val.bin", val_bytes));
  std::printf(
      "tokenize: %zu files, %zu bytes -> train %zu bytes, val %zu bytes (%zu chunks)\n"
      "tokenize: vocabulary %d (%zu merges, learned in %.2f s); train %zu tokens, val %zu "
      "tokens (%.2f bytes/token)\n"
      "tokenize: unigram entropy of the val tokens %.4f nats; ln(vocab) = %.4f\n"
      "tokenize: wrote %s_train.bin %s_val.bin %s.tokenizer\n",
      corpus.files.size(), corpus.text.size(), split.train.size(), split.val.size(),
      split.chunks.size(), bpe.vocab_size(), bpe.merges().size(), train_seconds, train.size(),
      val.size(), static_cast<double>(corpus.text.size()) / (train.size() + val.size()),
      UnigramEntropy(val, bpe.vocab_size()), std::log(static_cast<double>(bpe.vocab_size())),
      out.c_str(), out.c_str(), out.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Tokenizes a corpus for train_gpt.\n"
      "Example: tokenize --input=/usr/share/games/fortunes --out=/tmp/fortunes --vocab=512");
  absl::ParseCommandLine(argc, argv);
  absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "tokenize: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  return 0;
}
