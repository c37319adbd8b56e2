// File: fsdp/report/rank_measurement.h
//
// What one rank measured while training: each MemoryTracker category's peak,
// the peak of the tracked total, and the process's resident set (peak, and
// before the model was built). A rank writes it as a small text file the
// launching parent reads back (one "key value" line per field):
//
//   parameters 4194560
//   ...
//   peak_total 12345678
//   peak_rss 98765432
//   baseline_rss 45678901
//
//   FSDP_RETURN_IF_ERROR(WriteFileAtomically(path, RankMeasurementToText(m)));
//   FSDP_ASSIGN_OR_RETURN(RankMeasurement back, ParseRankMeasurement(text));
#ifndef FSDP_REPORT_RANK_MEASUREMENT_H_
#define FSDP_REPORT_RANK_MEASUREMENT_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fsdp/memory/memory_tracker.h"

namespace fsdp {
namespace report {

struct RankMeasurement {
  std::array<int64_t, kNumMemoryCategories> peak_bytes{};  // by MemoryCategory
  int64_t peak_total_bytes = 0;   // peak of the tracked sum
  int64_t peak_rss_bytes = 0;     // VmHWM at the end of the run
  int64_t baseline_rss_bytes = 0; // VmRSS before the model was built

  int64_t peak(MemoryCategory category) const {
    return peak_bytes[static_cast<int>(category)];
  }
};

std::string RankMeasurementToText(const RankMeasurement& measurement);

// InvalidArgument naming the line for a malformed or incomplete text.
absl::StatusOr<RankMeasurement> ParseRankMeasurement(absl::string_view text);

// The per-rank peak of a job: each field's maximum over its ranks (all ranks
// of a data-parallel job allocate the same, so this is "bytes per rank").
// Requires at least one measurement.
RankMeasurement MaxOverRanks(absl::Span<const RankMeasurement> ranks);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_RANK_MEASUREMENT_H_
