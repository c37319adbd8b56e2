// File: fsdp/report/measure_training.h
//
// Measures one rank's memory while it really trains: builds the GPT, the
// optimizer and the DataParallelTrainer of fsdp/train/ on one MemoryTracker,
// runs options.steps steps on this rank's batches, and returns every
// category's peak and the process's peak RSS. The memory_report example runs
// it in each launched rank; the parent compares it with EstimateRankMemory.
//
//   FSDP_ASSIGN_OR_RETURN(auto world, comm::Communicator::CreateFromEnvironment());
//   FSDP_ASSIGN_OR_RETURN(RankMeasurement m, MeasureTrainingMemory(options, *world));
//
// Why not fsdp::RunTraining: its RunSummary reports only the tracked total,
// and the report needs each category. This runs the same pieces in the same
// order (model, optimizer, trainer, batches, steps) without the logging,
// metrics and learning-rate schedule, which allocate nothing tracked.
#ifndef FSDP_REPORT_MEASURE_TRAINING_H_
#define FSDP_REPORT_MEASURE_TRAINING_H_

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "fsdp/report/rank_measurement.h"
#include "fsdp/train/train_options.h"

namespace fsdp {
namespace report {

// Errors are the runtime's: ValidateTrainOptions (including kUnimplemented
// for a strategy the runtime does not run yet), a world size other than
// options.nproc, allocation failures, collective timeouts naming the ranks.
absl::StatusOr<RankMeasurement> MeasureTrainingMemory(const TrainOptions& options,
                                                      comm::Communicator& world);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_MEASURE_TRAINING_H_
