// File: fsdp/report/batch_sweep.h
//
// The arithmetic of a batch-size sweep (examples/batch_report.cc): how a
// global batch is split into ranks and accumulation, how many steps a token
// budget buys, when a run first reaches a target loss, and where more batch
// stops helping.
//
// McCandlish et al. (2018) model the steps to reach a loss as
//   S(B) = S_min (1 + B_crit / B),
// so doubling the batch from B/2 to B divides the steps by
//   S(B/2) / S(B) = (1 + 2 B_crit / B) / (1 + B_crit / B),
// 2 for B << B_crit, 1 for B >> B_crit, and exactly 1.5 at B = B_crit. The
// sweep reports both: the least-squares fit of S against 1 / B, and the
// first batch in the sweep whose doubling saved less than a third of the
// steps (ratio below 1.5).
#ifndef FSDP_REPORT_BATCH_SWEEP_H_
#define FSDP_REPORT_BATCH_SWEEP_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace fsdp {
namespace report {

struct BatchSplit {
  int ranks = 1;
  int accum = 1;
};

// The most ranks up to `max_ranks` that split `global_batch` sequences into
// whole micro-batches of `micro_batch`, the rest as accumulation.
// InvalidArgument when global_batch is not a positive multiple of
// micro_batch, naming both.
absl::StatusOr<BatchSplit> SplitGlobalBatch(int64_t global_batch, int micro_batch,
                                            int max_ranks);

// Steps of `global_batch` sequences of `seq_len` tokens to train on at least
// `tokens` tokens (at least 1).
int StepsForTokens(int64_t tokens, int64_t global_batch, int seq_len);

// One measured point of a loss curve.
struct LossPoint {
  int step = 0;
  int64_t tokens = 0;
  double loss = 0;
};

// The first point whose loss is at or below `target`; nullopt when none is.
std::optional<LossPoint> FirstReaching(const std::vector<LossPoint>& curve, double target);

// The step at which `curve` crosses `target`, interpolated linearly between
// the last point above it and the first at or below it (that point's step
// when it is the first point): validations are sparse, and the first one
// under the target overstates the steps by up to their spacing. nullopt
// when the curve never reaches the target.
std::optional<double> StepsToReach(const std::vector<LossPoint>& curve, double target);

// Steps needed against the batch size, for the runs that reached the target.
struct StepsAtBatch {
  int64_t batch = 0;
  double steps = 0;
};

struct CriticalBatchFit {
  double min_steps = 0;       // S_min
  double critical_batch = 0;  // B_crit, in the batches' unit (sequences)
};

// Least squares of S = S_min + S_min B_crit / B over the points.
// InvalidArgument with fewer than two distinct batch sizes, or when the
// steps do not fall with the batch; OutOfRange when they fall as fast as
// 1 / B throughout (S_min <= 0: the critical batch is beyond the sweep).
absl::StatusOr<CriticalBatchFit> FitCriticalBatch(const std::vector<StepsAtBatch>& points);

// The smallest batch B of the sweep whose half B/2 is in it too and
// S(B/2) / S(B) < 1.5: where doubling stopped (nearly) halving the steps.
// nullopt when every doubling in the sweep still saved a third or more.
std::optional<int64_t> DiminishingReturnsBatch(const std::vector<StepsAtBatch>& points);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_BATCH_SWEEP_H_
