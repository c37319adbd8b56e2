// File: fsdp/run/elastic_world.h
//
// An elastic run (train_gpt --min_nproc/--max_nproc, docs/failures.md) at
// another world size than it was started with: the same global batch, so
// the same data order, schedule and (with --exact) the same bits, split as
// micro_batch x accum x world.
//
//   TrainOptions options = ...;  // --nproc=4 --micro_batch=2 --accum=3: 24 sequences
//   FSDP_ASSIGN_OR_RETURN(TrainOptions at3, OptionsForWorldSize(options, 3));
//   // at3: nproc 3, micro_batch 2, accum 4
#ifndef FSDP_RUN_ELASTIC_WORLD_H_
#define FSDP_RUN_ELASTIC_WORLD_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fsdp/run/train_options.h"

namespace fsdp {

// `options` (as started, at options.nproc ranks) at `world` ranks: the
// global batch re-split with the largest micro-batch not above
// options.micro_batch (what each rank's activation memory was sized for)
// that divides the rank's share. InvalidArgument when the global batch does
// not split over `world` ranks, or hybrid_shard's group does not divide it.
absl::StatusOr<TrainOptions> OptionsForWorldSize(const TrainOptions& options, int world);

// OK for a fixed world; for an elastic one, that min_nproc <= nproc <=
// max_nproc, that checkpoints are kept (the state a new world size goes on
// from), and that every size in [min_nproc, max_nproc] splits the global
// batch (the message names the sizes that do not, and the batches that
// would).
absl::Status ValidateElasticOptions(const TrainOptions& options);

}  // namespace fsdp

#endif  // FSDP_RUN_ELASTIC_WORLD_H_
