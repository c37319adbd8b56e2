// File: fsdp/run/straggler_report.cc
#include "fsdp/run/straggler_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fsdp {
namespace {

void AddUnitTimes(const std::vector<double>& add, std::vector<double>& sum) {
  if (sum.size() < add.size()) sum.resize(add.size(), 0.0);
  for (size_t u = 0; u < add.size(); ++u) sum[u] += add[u];
}

// The unit in which `slow` exceeds `fast` by the most, and by how much
// (seconds); {-1, 0} when either has no unit times or none exceeds.
std::pair<int, double> MostExcessUnit(const RankPhases& slow, const RankPhases& fast) {
  std::pair<int, double> most = {-1, 0.0};
  if (slow.unit_compute_s.size() != fast.unit_compute_s.size()) return most;
  for (size_t u = 0; u < slow.unit_compute_s.size(); ++u) {
    const double excess = slow.unit_compute_s[u] - fast.unit_compute_s[u];
    if (excess > most.second) most = {static_cast<int>(u), excess};
  }
  return most;
}

}  // namespace

absl::Status ValidateStragglerOptions(const StragglerOptions& options) {
  if (!(options.threshold > 0) || !std::isfinite(options.threshold)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the straggler threshold ", options.threshold,
        " must be a positive fraction (0.2: a rank 20% slower than the fastest is named)"));
  }
  if (options.consistent_windows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the straggler's consistent windows ", options.consistent_windows, " must be at least 1"));
  }
  return absl::OkStatus();
}

StragglerDetector::StragglerDetector(int world_size, StragglerOptions options)
    : world_size_(world_size),
      options_(options),
      total_(world_size),
      best_busy_s_(world_size, std::numeric_limits<double>::infinity()),
      times_named_(world_size, 0) {}

std::optional<Straggler> StragglerDetector::AddWindow(const std::vector<RankPhases>& per_rank) {
  if (static_cast<int>(per_rank.size()) != world_size_ || world_size_ < 2) return std::nullopt;
  ++windows_;
  int fastest = 0;
  int slowest = 0;
  for (int r = 0; r < world_size_; ++r) {
    const RankPhases& p = per_rank[r];
    total_[r].compute_s += p.compute_s;
    total_[r].data_s += p.data_s;
    total_[r].comm_wait_s += p.comm_wait_s;
    total_[r].optimizer_s += p.optimizer_s;
    AddUnitTimes(p.unit_compute_s, total_[r].unit_compute_s);
    best_busy_s_[r] = std::min(best_busy_s_[r], p.busy_s());
    if (p.busy_s() < per_rank[fastest].busy_s()) fastest = r;
    if (p.busy_s() > per_rank[slowest].busy_s()) slowest = r;
  }
  const double fastest_busy = per_rank[fastest].busy_s();
  const double ratio = fastest_busy > 0 ? per_rank[slowest].busy_s() / fastest_busy
                                        : std::numeric_limits<double>::infinity();
  if (slowest == fastest || !(ratio > 1.0 + options_.threshold)) {
    candidate_ = -1;
    candidate_run_ = 0;
    return std::nullopt;
  }
  candidate_run_ = slowest == candidate_ ? candidate_run_ + 1 : 1;
  candidate_ = slowest;
  if (candidate_run_ < options_.consistent_windows) return std::nullopt;
  ++times_named_[slowest];
  const RankPhases& slow = per_rank[slowest];
  const RankPhases& fast = per_rank[fastest];
  Straggler named;
  named.rank = slowest;
  // The phase with the largest excess over the fastest rank's same phase.
  const double excess[3] = {slow.compute_s - fast.compute_s, slow.data_s - fast.data_s,
                            slow.optimizer_s - fast.optimizer_s};
  const char* const kPhaseNames[3] = {"compute", "data", "optimizer"};
  named.phase = kPhaseNames[std::max_element(excess, excess + 3) - excess];
  if (named.phase == std::string("compute")) named.unit = MostExcessUnit(slow, fast).first;
  named.vs_fastest = ratio;
  named.vs_own_best = best_busy_s_[slowest] > 0 ? slow.busy_s() / best_busy_s_[slowest] : 1.0;
  return named;
}

std::vector<std::string> StragglerDetector::SkewLines() const {
  std::vector<std::string> lines;
  if (windows_ == 0) return lines;
  int fastest = 0;
  for (int r = 0; r < world_size_; ++r) {
    if (total_[r].busy_s() < total_[fastest].busy_s()) fastest = r;
  }
  const double fastest_busy = total_[fastest].busy_s();
  for (int r = 0; r < world_size_; ++r) {
    const RankPhases& t = total_[r];
    const double n = windows_;
    std::string unit_note;
    if (const std::pair<int, double> most = MostExcessUnit(t, total_[fastest]); most.first >= 0) {
      unit_note = absl::StrFormat(" (the most over the fastest rank in unit %d: +%.1f ms)",
                                  most.first, 1e3 * most.second / n);
    }
    lines.push_back(absl::StrFormat(
        "rank %d: busy %.1f ms/step (%.2fx the fastest), compute %.1f ms%s, data %.1f ms, "
        "optimizer %.1f ms, comm wait %.1f ms; named the straggler in %d of %d windows",
        r, 1e3 * t.busy_s() / n, fastest_busy > 0 ? t.busy_s() / fastest_busy : 1.0,
        1e3 * t.compute_s / n, unit_note, 1e3 * t.data_s / n, 1e3 * t.optimizer_s / n,
        1e3 * t.comm_wait_s / n, times_named_[r], windows_));
  }
  return lines;
}

}  // namespace fsdp
