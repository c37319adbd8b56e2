// File: fsdp/run/rank_batches.h
//
// This rank's micro-batches, step after step: the synthetic Markov stream
// (fsdp/data/markov_source.h, seeded by options.seed) or an llm.c .bin file
// (options.data), sliced by fsdp/data/batcher.h so that rank r reads its
// disjoint part of every global batch and the global batch is the same for
// any world size.
//
//   FSDP_ASSIGN_OR_RETURN(auto batches, RankBatches::Create(options, rank));
//   FSDP_ASSIGN_OR_RETURN(std::vector<Batch> micro_batches, batches->NextStep());
#ifndef FSDP_RUN_RANK_BATCHES_H_
#define FSDP_RUN_RANK_BATCHES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "fsdp/data/batcher.h"
#include "fsdp/data/token_source.h"
#include "fsdp/nn/model.h"
#include "fsdp/run/train_options.h"

namespace fsdp {

// Opens the data source and checks the batch layout once, so the launching
// parent can report a bad --data file (wrong magic, truncated, tokens outside
// the vocabulary, ...) before any rank starts. Same errors as Create().
absl::Status ValidateTrainingData(const TrainOptions& options);

class RankBatches {
 public:
  // Errors from the data source (a bad .bin file names the file and the
  // problem) or the batch layout.
  static absl::StatusOr<std::unique_ptr<RankBatches>> Create(const TrainOptions& options,
                                                             int rank);

  // The options.accum micro-batches of the next optimizer step.
  absl::StatusOr<std::vector<Batch>> NextStep();

  // Continue with global step `step` (0-based): the data position of a run
  // that already took `step` optimizer steps.
  void SeekToStep(int64_t step) { next_step_ = step; }

 private:
  RankBatches(std::unique_ptr<TokenSource> source, BatchLayout layout)
      : source_(std::move(source)), layout_(layout) {}

  std::unique_ptr<TokenSource> source_;
  BatchLayout layout_;
  int64_t next_step_ = 0;
};

}  // namespace fsdp

#endif  // FSDP_RUN_RANK_BATCHES_H_
