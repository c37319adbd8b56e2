// File: fsdp/run/rank_batches.cc
#include "fsdp/run/rank_batches.h"

#include <utility>

#include "base/status_macros.h"
#include "fsdp/data/markov_source.h"
#include "fsdp/data/token_file.h"

namespace fsdp {

absl::StatusOr<std::unique_ptr<RankBatches>> RankBatches::Create(const TrainOptions& options,
                                                                 int rank) {
  BatchLayout layout;
  layout.global_batch = options.global_batch();
  layout.seq_len = options.seq_len;
  layout.world_size = options.nproc;
  layout.rank = rank;
  layout.micro_batch = options.micro_batch;
  layout.accumulation_steps = options.accum;
  FSDP_RETURN_IF_ERROR(ValidateBatchLayout(layout));
  std::unique_ptr<TokenSource> source;
  if (options.data.empty()) {
    FSDP_ASSIGN_OR_RETURN(source, MarkovTokenSource::Create(options.vocab, options.seed));
  } else {
    FSDP_ASSIGN_OR_RETURN(source, TokenFileSource::Open(options.data, options.vocab));
  }
  return std::unique_ptr<RankBatches>(new RankBatches(std::move(source), layout));
}

absl::Status ValidateTrainingData(const TrainOptions& options) {
  return RankBatches::Create(options, /*rank=*/0).status();
}

absl::StatusOr<std::vector<Batch>> RankBatches::NextStep() {
  std::vector<Batch> micro_batches;
  micro_batches.reserve(layout_.accumulation_steps);
  for (int k = 0; k < layout_.accumulation_steps; ++k) {
    FSDP_ASSIGN_OR_RETURN(Batch batch, MakeMicroBatch(*source_, layout_, next_step_, k));
    micro_batches.push_back(std::move(batch));
  }
  ++next_step_;
  return micro_batches;
}

}  // namespace fsdp
