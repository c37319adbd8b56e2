// File: fsdp/data/token_source.h
//
// Where training tokens come from: an indexed collection of sequences. Any
// sequence can be read by index, so each rank reads exactly its own slice of
// a global batch (fsdp/data/batcher.h) without reading anyone else's, and the
// data seen does not depend on the world size.
#ifndef FSDP_DATA_TOKEN_SOURCE_H_
#define FSDP_DATA_TOKEN_SOURCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace fsdp {

class TokenSource {
 public:
  virtual ~TokenSource() = default;

  // Fills `out` (seq_len + 1 tokens: inputs plus the shifted-by-one targets)
  // with sequence `index` >= 0. Deterministic in (source, index, out.size()).
  virtual absl::Status ReadSequence(int64_t index, absl::Span<int32_t> out) const = 0;

  // Every token is in [0, vocab_size()).
  virtual int vocab_size() const = 0;
};

}  // namespace fsdp

#endif  // FSDP_DATA_TOKEN_SOURCE_H_
