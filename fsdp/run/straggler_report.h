// File: fsdp/run/straggler_report.h
//
// Stragglers named (issue 37). In synchronous data parallelism every rank
// waits for the slowest at each collective, so a slow rank shows up on the
// others as comm wait, and on itself as more *busy* time (time not blocked in
// a collective: computing, reading data, stepping the optimizer). Every N
// steps each rank's busy time per step, split into phases, is all-gathered
// (fsdp/run/train_run.cc); this pure detector compares the ranks:
//
//   - a window's straggler candidate is the rank with the most busy time per
//     step; it is slower than the fastest rank by (its busy / the least busy
//     rank's busy) - 1;
//   - it is *named* when the same rank exceeds the threshold in
//     `consistent_windows` windows in a row (one noisy window names nobody);
//   - the phase named is the one in which it exceeds the fastest rank's same
//     phase by the most seconds;
//   - its score is relative to the fastest rank (busy ratio) and to its own
//     best window (its busy now / its least busy window so far), the two
//     scores NVRx reports.
//
//   StragglerDetector detector(world_size, {.threshold = 0.2});
//   std::optional<Straggler> named = detector.AddWindow(per_rank_phases);
//   // ... at the end: detector.SkewLines() for the summary.
#ifndef FSDP_RUN_STRAGGLER_REPORT_H_
#define FSDP_RUN_STRAGGLER_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fsdp {

// One rank's mean seconds per step over a window, by phase. busy = compute +
// data + optimizer; comm_wait is the symptom a straggler causes on the
// *other* ranks.
struct RankPhases {
  double compute_s = 0;    // the step outside collectives, data and the
                           // optimizer (forward, backward, reductions' math)
  double data_s = 0;       // fetching the step's batches
  double comm_wait_s = 0;  // blocked in collectives
  double optimizer_s = 0;  // the optimizer step on this rank's shard
  // Of compute_s, the time in each unit's forward and backward math, by
  // plan unit (empty: not measured). What is left of compute_s is the step's
  // other work (loss, gradient norms, the reductions' kernels).
  std::vector<double> unit_compute_s;
  double busy_s() const { return compute_s + data_s + optimizer_s; }
};

struct Straggler {
  int rank = -1;
  std::string phase;  // "compute", "data" or "optimizer"
  // For "compute": the plan unit in which it exceeds the fastest rank's same
  // unit by the most, when units were timed; else -1.
  int unit = -1;
  double vs_fastest = 1.0;   // its busy time / the least busy rank's
  double vs_own_best = 1.0;  // its busy time / its own least busy window's
};

struct StragglerOptions {
  // A rank is slower when its busy time exceeds the fastest rank's by more
  // than this fraction (0.2: 20%).
  double threshold = 0.2;
  // In this many windows in a row, the same rank.
  int consistent_windows = 2;
};

// kInvalidArgument naming the value when threshold is not positive and
// finite or consistent_windows < 1.
absl::Status ValidateStragglerOptions(const StragglerOptions& options);

class StragglerDetector {
 public:
  StragglerDetector(int world_size, StragglerOptions options);

  // One window's phases, per rank (size world_size). The straggler named by
  // this window and the ones before, or nullopt.
  std::optional<Straggler> AddWindow(const std::vector<RankPhases>& per_rank);

  // The per-rank skew over every window so far, one line per rank:
  //   "rank 2: busy 31.2 ms/step (1.45x the fastest), compute 28.1 ms (the
  //    most over the fastest rank in unit 3: +8.9 ms), data 1.1 ms, optimizer
  //    2.0 ms, comm wait 2.0 ms; named the straggler in 4 of 6 windows"
  // (the unit part when units were timed and the rank is not the fastest).
  std::vector<std::string> SkewLines() const;

  int windows() const { return windows_; }

 private:
  int world_size_;
  StragglerOptions options_;
  int windows_ = 0;
  std::vector<RankPhases> total_;    // summed over windows
  std::vector<double> best_busy_s_;  // least busy window per rank
  std::vector<int> times_named_;
  int candidate_ = -1;     // the last window's slow rank, if over threshold
  int candidate_run_ = 0;  // windows in a row it was
};

}  // namespace fsdp

#endif  // FSDP_RUN_STRAGGLER_REPORT_H_
