// File: fsdp/data/batcher.cc
#include "fsdp/data/batcher.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fsdp {

absl::Status ValidateBatchLayout(const BatchLayout& l) {
  if (l.global_batch < 1 || l.seq_len < 1 || l.world_size < 1 || l.micro_batch < 1 ||
      l.accumulation_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch layout sizes must be positive: global_batch=", l.global_batch,
        " seq_len=", l.seq_len, " world_size=", l.world_size, " micro_batch=", l.micro_batch,
        " accumulation_steps=", l.accumulation_steps));
  }
  if (l.rank < 0 || l.rank >= l.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", l.rank, " is outside [0, world_size = ", l.world_size, ")"));
  }
  const int64_t per_step = int64_t{l.world_size} * l.micro_batch;
  if (l.global_batch != per_step * l.accumulation_steps) {
    std::string hint;
    if (l.global_batch % per_step == 0) {
      hint = absl::StrCat("; use accumulation_steps=", l.global_batch / per_step);
    } else {
      hint = absl::StrCat("; global_batch must be a multiple of world_size * micro_batch = ",
                          per_step);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batch ", l.global_batch, " != world_size ", l.world_size, " * micro_batch ",
        l.micro_batch, " * accumulation_steps ", l.accumulation_steps, hint));
  }
  return absl::OkStatus();
}

int64_t FirstSequenceIndex(const BatchLayout& l, int64_t global_step, int micro_step) {
  return global_step * l.global_batch +
         (int64_t{micro_step} * l.world_size + l.rank) * l.micro_batch;
}

absl::StatusOr<Batch> MakeMicroBatch(const TokenSource& source, const BatchLayout& layout,
                                     int64_t global_step, int micro_step) {
  FSDP_RETURN_IF_ERROR(ValidateBatchLayout(layout));
  if (global_step < 0 || micro_step < 0 || micro_step >= layout.accumulation_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_step ", global_step, " must be >= 0 and micro_step ", micro_step,
        " must lie in [0, accumulation_steps = ", layout.accumulation_steps, ")"));
  }
  const int T = layout.seq_len;
  Batch batch;
  batch.batch_size = layout.micro_batch;
  batch.seq_len = T;
  batch.inputs.resize(static_cast<size_t>(layout.micro_batch) * T);
  batch.targets.resize(batch.inputs.size());
  std::vector<int32_t> sequence(T + 1);
  const int64_t first = FirstSequenceIndex(layout, global_step, micro_step);
  for (int b = 0; b < layout.micro_batch; ++b) {
    FSDP_RETURN_IF_ERROR(source.ReadSequence(first + b, absl::MakeSpan(sequence)));
    for (int t = 0; t < T; ++t) {
      batch.inputs[static_cast<size_t>(b) * T + t] = sequence[t];
      batch.targets[static_cast<size_t>(b) * T + t] = sequence[t + 1];
    }
  }
  return batch;
}

}  // namespace fsdp
