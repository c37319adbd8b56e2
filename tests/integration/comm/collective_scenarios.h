// File: tests/integration/comm/collective_scenarios.h
//
// What one rank of the multi-process collective tests runs
// (collective_worker.cc): the grid, collectives in flight together, and
// sub-communicators. Each scenario posts collectives on deterministic inputs
// (collective_reference.h), waits, and checks every element against the
// reference. A Wait() error ends the scenario and is returned (ranks may now
// disagree on what is in flight); a data mismatch is printed as
//   [rank R/N] FAIL <case>: <first wrong element ...>
// and counted, and the scenario goes on, so one run lists every wrong case.
//
// Example:
//   ScenarioRunner runner(*world, absl::Seconds(60), Bf16Rounding::kOnce);
//   FSDP_RETURN_IF_ERROR(runner.RunGrid({Algorithm::kAuto, Algorithm::kRing}));
//   if (runner.failures() > 0) ...
#ifndef TESTS_INTEGRATION_COMM_COLLECTIVE_SCENARIOS_H_
#define TESTS_INTEGRATION_COMM_COLLECTIVE_SCENARIOS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "tests/integration/comm/collective_reference.h"

namespace comm_test {

// Elements of the grid's largest count: more than one 1 MiB segment.
inline constexpr size_t kLargeCount = (size_t{1} << 20) + 3;

// A posted collective plus everything needed to check it once it finished.
// Buffers live here so they outlive the Work.
struct PendingCheck {
  std::string name;
  comm::WorkHandle work;
  std::vector<std::byte> input;
  std::vector<std::byte> output;  // with guard bytes after `output_bytes`
  size_t output_bytes = 0;
  // Returns "" if `output` is right.
  std::function<std::string(const PendingCheck&)> check;
  // True when `check` verifies the guard bytes itself (in-place cases whose
  // guard does not follow `output_bytes`).
  bool guard_checked_by_check = false;
};

// Runs the scenarios on `world`; every rank of `world` must run the same
// scenarios in the same order.
class ScenarioRunner {
 public:
  // `timeout` bounds every Wait() and Split(); `rounding` is how bf16
  // reductions are checked (collective_reference.h).
  ScenarioRunner(comm::Communicator& world, absl::Duration timeout, Bf16Rounding rounding);

  // Collectives checked so far, and how many of them had wrong data.
  int checks() const { return checks_; }
  int failures() const { return failures_; }
  // "[rank R/N]", the prefix of every line this rank prints.
  std::string prefix() const;

  // Every collective x counts {0, 1, 7, 4096, kLargeCount} x {fp32, bf16} x
  // `algorithms`, in-place variants, broadcasts from several roots, bf16
  // rounding cases, and a barrier rank 0 enters late.
  absl::Status RunGrid(const std::vector<comm::Algorithm>& algorithms);
  // Eight different collectives posted back to back, waited in reverse
  // order; then again, polled with Test().
  absl::Status RunInflight();
  // Split by parity and into blocks of three (reversed keys); collectives on
  // child and parent in flight together.
  absl::Status RunSplit();

 private:
  // Posting helpers. `comm` is the group, `sources[p]` the global rank at
  // group rank p; the salt comes from next_salt_, so every rank (which posts
  // the same sequence) uses the same one.
  absl::StatusOr<PendingCheck> PostAllGather(comm::Communicator& comm,
                                             std::vector<int> sources, comm::Dtype dtype,
                                             size_t count, comm::Algorithm algorithm,
                                             bool in_place);
  // `in_place`: the output is chunk r of the input itself, which
  // comm/communicator.h allows.
  absl::StatusOr<PendingCheck> PostReduceScatter(comm::Communicator& comm,
                                                 std::vector<int> sources,
                                                 comm::Dtype dtype, comm::ReduceOp op,
                                                 ValueMode mode, size_t count,
                                                 comm::Algorithm algorithm,
                                                 bool in_place = false);
  absl::StatusOr<PendingCheck> PostAllReduce(comm::Communicator& comm,
                                             std::vector<int> sources, comm::Dtype dtype,
                                             comm::ReduceOp op, ValueMode mode,
                                             size_t count, comm::Algorithm algorithm);
  absl::StatusOr<PendingCheck> PostBroadcast(comm::Communicator& comm,
                                             std::vector<int> sources, comm::Dtype dtype,
                                             size_t count, int root);
  absl::StatusOr<PendingCheck> PostBarrier(comm::Communicator& comm, std::string name);

  // Waits for the collective, then checks its data. A Wait() error is
  // returned (and ends the scenario: ranks may now disagree on what is in
  // flight); a data mismatch is printed and counted, and the run continues.
  absl::Status Finish(PendingCheck& pending);
  absl::Status PostAndFinish(absl::StatusOr<PendingCheck> posted);

  // Rank 0 arrives late; the others must not leave the barrier before it.
  absl::Status CheckBarrierWaitsForLateRank();

  comm::Communicator& world_;
  absl::Duration timeout_;
  Bf16Rounding rounding_;
  std::vector<int> world_sources_;
  uint64_t next_salt_ = 1;
  int checks_ = 0;
  int failures_ = 0;
};

}  // namespace comm_test

#endif  // TESTS_INTEGRATION_COMM_COLLECTIVE_SCENARIOS_H_
