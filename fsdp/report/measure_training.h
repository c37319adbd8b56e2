// File: fsdp/report/measure_training.h
//
// Measures one rank's memory while it really trains: runs fsdp::RunTraining
// (fsdp/run/train_run.h: the GPT, the optimizer and the DataParallelTrainer
// on one MemoryTracker, options.steps steps on this rank's batches) without
// logging, and returns every category's peak from its RunSummary and the
// process's peak RSS. The memory_report example runs it in each launched
// rank; the parent compares it with EstimateRankMemory.
//
//   FSDP_ASSIGN_OR_RETURN(auto world, comm::Communicator::CreateFromEnvironment());
//   FSDP_ASSIGN_OR_RETURN(RankMeasurement m, MeasureTrainingMemory(options, *world));
#ifndef FSDP_REPORT_MEASURE_TRAINING_H_
#define FSDP_REPORT_MEASURE_TRAINING_H_

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "fsdp/report/rank_measurement.h"
#include "fsdp/run/train_options.h"

namespace fsdp {
namespace report {

// Errors are RunTraining's: ValidateTrainOptions, a world size other than
// options.nproc, allocation failures, collective timeouts naming the ranks.
absl::StatusOr<RankMeasurement> MeasureTrainingMemory(const TrainOptions& options,
                                                      comm::Communicator& world);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_MEASURE_TRAINING_H_
