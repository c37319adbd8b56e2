// File: fsdp/data/batcher.h
//
// Which sequences each rank trains on. Global step g uses the `global_batch`
// sequences [g * global_batch, (g + 1) * global_batch) of a TokenSource. Each
// of the R ranks runs `accumulation_steps` micro-steps of `micro_batch`
// sequences, and (micro-step k, rank r) reads the slice starting at
//   g * global_batch + (k * R + r) * micro_batch
// so the concatenation over (micro-step, rank), micro-step outer, is exactly
// the global batch: ranks take disjoint slices, and what the model sees per
// global step does not depend on the world size (R = 1, 2, 4 agree).
//
//   BatchLayout layout{/*global_batch=*/8, /*seq_len=*/64, /*world_size=*/2,
//                      /*rank=*/1, /*micro_batch=*/2, /*accumulation_steps=*/2};
//   FSDP_ASSIGN_OR_RETURN(Batch batch, MakeMicroBatch(source, layout, step, k));
#ifndef FSDP_DATA_BATCHER_H_
#define FSDP_DATA_BATCHER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fsdp/data/token_source.h"
#include "fsdp/nn/model.h"

namespace fsdp {

struct BatchLayout {
  int64_t global_batch = 1;  // sequences per optimizer step, over all ranks
  int seq_len = 1;           // input tokens per sequence
  int world_size = 1;
  int rank = 0;
  int micro_batch = 1;       // sequences per forward/backward on one rank
  int accumulation_steps = 1;
};

// InvalidArgument unless all sizes are positive, 0 <= rank < world_size and
// global_batch == world_size * micro_batch * accumulation_steps (the message
// suggests a fitting accumulation_steps when there is one).
absl::Status ValidateBatchLayout(const BatchLayout& layout);

// Index of the first sequence of (global_step, micro_step) on layout.rank.
int64_t FirstSequenceIndex(const BatchLayout& layout, int64_t global_step, int micro_step);

// The micro-batch this rank trains on at (global_step, micro_step): inputs are
// tokens [0, seq_len) of each sequence and targets tokens [1, seq_len].
absl::StatusOr<Batch> MakeMicroBatch(const TokenSource& source, const BatchLayout& layout,
                                     int64_t global_step, int micro_step);

}  // namespace fsdp

#endif  // FSDP_DATA_BATCHER_H_
