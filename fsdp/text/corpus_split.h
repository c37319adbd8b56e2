// File: fsdp/text/corpus_split.h
//
// The train/validation split: the text is cut into chunks that end at a
// newline once they reach `chunk_bytes` (the last chunk takes the rest), and
// chunk i goes to validation when floor((i + 1) f) > floor(i f), f =
// val_fraction: an even spread of held-out chunks through the corpus (not
// only its last files), deterministic, every byte in exactly one split.
// The training chunks are concatenated in an order shuffled by
// `shuffle_seed` (Fisher-Yates over SplitMix64; 0 keeps the corpus order),
// so that consecutive training batches mix the corpus's files instead of
// walking through them one topic at a time; validation keeps corpus order.
//
//   FSDP_ASSIGN_OR_RETURN(CorpusSplit split, SplitCorpus(text, 0.1));
#ifndef FSDP_TEXT_CORPUS_SPLIT_H_
#define FSDP_TEXT_CORPUS_SPLIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fsdp {
namespace text {

struct CorpusSplit {
  std::string train;
  std::string val;
  // Each chunk's [begin, end) in the input and whether it is held out, in
  // corpus order; train_order: the training chunks' indices as concatenated.
  struct Chunk {
    int64_t begin = 0;
    int64_t end = 0;
    bool val = false;
  };
  std::vector<Chunk> chunks;
  std::vector<int64_t> train_order;
};

// InvalidArgument for val_fraction outside (0, 1), chunk_bytes < 1, or a text
// too short to give both splits at least one chunk (the message says how many
// chunks it has and what to change).
absl::StatusOr<CorpusSplit> SplitCorpus(absl::string_view text, double val_fraction,
                                        int64_t chunk_bytes = 2048,
                                        uint64_t shuffle_seed = 1);

}  // namespace text
}  // namespace fsdp

#endif  // FSDP_TEXT_CORPUS_SPLIT_H_
