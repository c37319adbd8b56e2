// File: fsdp/text/corpus_split.cc
#include "fsdp/text/corpus_split.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fsdp {
namespace text {

absl::StatusOr<CorpusSplit> SplitCorpus(absl::string_view text, double val_fraction,
                                        int64_t chunk_bytes, uint64_t shuffle_seed) {
  if (!(val_fraction > 0.0 && val_fraction < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--val_fraction=", val_fraction, " must be between 0 and 1 (e.g. 0.1)"));
  }
  if (chunk_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("chunk_bytes=", chunk_bytes, " must be >= 1"));
  }
  CorpusSplit split;
  const int64_t n = static_cast<int64_t>(text.size());
  int64_t begin = 0;
  while (begin < n) {
    int64_t end = std::min(n, begin + chunk_bytes);
    while (end < n && text[end - 1] != '\n') ++end;
    split.chunks.push_back({begin, end, false});
    begin = end;
  }
  int64_t num_val = 0;
  for (size_t i = 0; i < split.chunks.size(); ++i) {
    const bool val = std::floor((i + 1) * val_fraction) > std::floor(i * val_fraction);
    split.chunks[i].val = val;
    num_val += val;
    absl::string_view piece = text.substr(split.chunks[i].begin,
                                          split.chunks[i].end - split.chunks[i].begin);
    if (val) {
      split.val.append(piece.data(), piece.size());
    } else {
      split.train_order.push_back(static_cast<int64_t>(i));
    }
  }
  if (shuffle_seed != 0) {
    uint64_t state = shuffle_seed;
    auto next = [&state] {  // SplitMix64
      uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      return z ^ (z >> 31);
    };
    for (size_t i = split.train_order.size(); i > 1; --i) {
      std::swap(split.train_order[i - 1], split.train_order[next() % i]);
    }
  }
  for (int64_t index : split.train_order) {
    const CorpusSplit::Chunk& chunk = split.chunks[index];
    split.train.append(text.data() + chunk.begin, chunk.end - chunk.begin);
  }
  const int64_t num_train = static_cast<int64_t>(split.chunks.size()) - num_val;
  if (num_val == 0 || num_train == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the corpus (", n, " bytes) gives ", split.chunks.size(), " chunk(s) of about ",
        chunk_bytes, " bytes: ", num_train, " for training and ", num_val,
        " for validation; both need at least one: give more text or a larger --val_fraction"));
  }
  return split;
}

}  // namespace text
}  // namespace fsdp
