// File: comm/fault_injection.h
//
// A Transport decorator that injects faults, seeded, for tests and for
// chaos runs of real jobs: sends held back a random time, sends lost, and a
// rank killed (SIGKILL) or stopped (SIGSTOP) at a chosen or random operation.
// Every multi-rank program gets it from the environment: with FSDP_FAULTS
// set, Communicator::CreateFromEnvironment wraps its UCX transport in it.
//
//   FSDP_FAULTS="seed=7,delay=0.2:1-20ms,kill=any@random:200-900" ./train_gpt ...
//
// The spec is comma-separated key=value:
//   seed=N             the seed of every random choice (default 1)
//   delay=P:A-Bms      each send, with probability P, is held back a time
//                      drawn from [A, B] milliseconds (a later send to the
//                      same peer waits behind it: per-(peer, tag) order holds)
//   drop=P             each send, with probability P, is lost: its sender
//                      sees it complete, its receiver waits for it until its
//                      deadline (what a network that eats a message does)
//   drop_rank=R        only rank R's sends are dropped (default: every rank's)
//   kill=R@N           rank R kills itself (SIGKILL) at its N-th operation
//   stop=R@N           rank R stops itself (SIGSTOP) at its N-th operation
//                      R may be `any` (drawn from the seed: the same rank on
//                      every rank), N may be `random:A-B` (drawn from the seed)
//   attempt=K          faults only in the job's attempt K (FSDP_RESTART_COUNT,
//                      comm/launcher/restarts.h); `any` for every attempt.
//                      Default 0: a restarted or resized job goes on clean.
// An operation is a posted send or receive, counted per rank from 1.
//
// What it changes is timing and liveness, never data: collectives are
// deterministic in their order of reduction, so a job with delays computes
// the bits of one without (tests/integration/train/train_gpt_faults_test).
#ifndef COMM_FAULT_INJECTION_H_
#define COMM_FAULT_INJECTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/transport.h"

namespace comm {

// The environment variable that turns fault injection on.
inline constexpr char kFaultsEnv[] = "FSDP_FAULTS";

enum class RankFaultAction { kKill, kStop };

struct RankFault {
  RankFaultAction action = RankFaultAction::kKill;
  int rank = -1;  // -1: `any`, drawn from the seed once the world size is known
  // The operation it strikes at, counted from 1; [first_op, last_op] when
  // drawn from the seed (equal when chosen).
  int64_t first_op = 1;
  int64_t last_op = 1;
};

struct FaultPlan {
  uint64_t seed = 1;
  double delay_probability = 0;
  absl::Duration min_delay;
  absl::Duration max_delay;
  double drop_probability = 0;
  int drop_rank = -1;  // -1: every rank
  std::vector<RankFault> rank_faults;
  int attempt = 0;  // -1: every attempt
};

// Parses FSDP_FAULTS's spec; an error names the part that is wrong and what
// is expected.
absl::StatusOr<FaultPlan> ParseFaultPlan(absl::string_view spec);

// The plan in the spec's words, e.g. for a rank's log line.
std::string DescribeFaultPlan(const FaultPlan& plan);

// Whether `plan` injects anything in attempt `attempt` of the job.
bool FaultsApply(const FaultPlan& plan, int attempt);

// What `plan` makes of rank `rank` in a world of `world_size`: the faults
// that strike it, their operations drawn. The same on every rank.
struct ResolvedRankFault {
  RankFaultAction action;
  int rank;
  int64_t op;
};
std::vector<ResolvedRankFault> ResolveRankFaults(const FaultPlan& plan, int world_size);

// `inner` with `plan`'s faults injected (the caller checked FaultsApply);
// an error when the plan names a rank the job does not have. The decorator
// keeps the Transport contract: one caller at a time, Interrupt() from
// anywhere.
absl::StatusOr<std::unique_ptr<Transport>> WithInjectedFaults(std::unique_ptr<Transport> inner,
                                                              const FaultPlan& plan);

}  // namespace comm

#endif  // COMM_FAULT_INJECTION_H_
