// File: fsdp/report/measure_training.cc
#include "fsdp/report/measure_training.h"

#include "base/status_macros.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/run/train_run.h"

namespace fsdp {
namespace report {

absl::StatusOr<RankMeasurement> MeasureTrainingMemory(const TrainOptions& options,
                                                      comm::Communicator& world) {
  RankMeasurement measurement;
  FSDP_ASSIGN_OR_RETURN(measurement.baseline_rss_bytes, CurrentRssBytes());
  FSDP_ASSIGN_OR_RETURN(RunSummary summary, RunTraining(options, world, /*log=*/nullptr));
  // summary.memory is the tracker after the last step, before the parameter
  // digest's transient gather (which is not part of training).
  measurement.peak_bytes = summary.memory.peak_bytes;
  measurement.peak_total_bytes = summary.memory.peak_total_bytes;
  FSDP_ASSIGN_OR_RETURN(measurement.peak_rss_bytes, PeakRssBytes());
  return measurement;
}

}  // namespace report
}  // namespace fsdp
