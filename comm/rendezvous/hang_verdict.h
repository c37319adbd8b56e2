// File: comm/rendezvous/hang_verdict.h
//
// The rule by which the rendezvous store on rank 0 declares a rank hung: a
// pure function of the latest heartbeats (comm/liveness.h says what a beat
// carries), tested without processes (tests/comm/rendezvous/
// hang_verdict_test.cc). The store evaluates it every heartbeat interval.
//
// A rank is declared hung, with `bound` the job's hang bound, when
//
//   1. SILENT: nothing (no heartbeat, no other message) arrived from it for
//      longer than `bound`. Its heartbeat thread beats several times per
//      bound, so its process is stopped (SIGSTOP, a debugger, a suspended
//      job step) or not being scheduled, or its host is cut off. A stopped
//      process's TCP connection stays open, so without beats nobody would
//      notice.
//   2. STUCK: its latest beat says its caller has been outside the
//      communicator for longer than `bound` (neither called into it nor
//      blocked in a wait: stuck in a computation, or a deadlock of its own),
//      AND another rank's latest beat says that rank's oldest collective has
//      been in flight for longer than `bound` waiting for this rank (or for
//      an unknown rank, when no rank is silent). The second condition is what
//      keeps long computations legal while nobody waits: an evaluation phase
//      where every rank computes for a minute declares nobody; a rank that
//      others are blocked on for longer than the bound is declared.
//
// So the bound must exceed the longest computation between two
// communicator calls of a rank that others wait for; a training loop can call
// Communicator::KeepAlive() inside a long computation to stretch it.
//
// Ranks that said goodbye, or were already declared, are not judged again.
// A silent rank's last beat still counts as a waiter: it did wait that long
// before it went silent.
#ifndef COMM_RENDEZVOUS_HANG_VERDICT_H_
#define COMM_RENDEZVOUS_HANG_VERDICT_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace comm {

// What the store knows about one joined rank.
struct RankHeartbeat {
  int rank = 0;
  bool judged = true;     // false: said goodbye or already declared hung
  absl::Duration silent;  // since the last message from it
  // From its latest heartbeat (comm/liveness.h CallerLiveness::Snapshot).
  absl::Duration idle;
  absl::Duration pending;
  int awaited_rank = -1;
  std::string awaited_what;
};

struct HangVerdict {
  int rank = 0;
  // Why, for every rank's error message: "rank 3 is hung: no heartbeat ..."
  // or "rank 3 is hung: its caller has not called into the communicator ...".
  std::string reason;
};

// How often ranks and the store beat for a given bound: five beats per bound
// (a rank must miss five in a row to look silent), at most one per second,
// at least every 10 ms.
absl::Duration HeartbeatInterval(absl::Duration bound);

// The ranks to declare hung now, in rank order; see the rules above.
std::vector<HangVerdict> FindHungRanks(const std::vector<RankHeartbeat>& ranks,
                                       absl::Duration bound);

}  // namespace comm

#endif  // COMM_RENDEZVOUS_HANG_VERDICT_H_
