// File: comm/rendezvous/hang_verdict.cc
#include "comm/rendezvous/hang_verdict.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace comm {
namespace {

// "3.2s": tenths are enough for people, and stable for tests.
std::string Seconds(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(100)));
}

}  // namespace

absl::Duration HeartbeatInterval(absl::Duration bound) {
  return std::max(absl::Milliseconds(10), std::min(bound / 5, absl::Seconds(1)));
}

std::vector<HangVerdict> FindHungRanks(const std::vector<RankHeartbeat>& ranks,
                                       absl::Duration bound) {
  std::vector<HangVerdict> verdicts;
  bool any_silent = false;
  for (const RankHeartbeat& r : ranks) {
    if (!r.judged || r.silent <= bound) continue;
    any_silent = true;
    verdicts.push_back(
        {r.rank, absl::StrCat("rank ", r.rank, " is hung: no heartbeat from it reached the "
                              "rendezvous store on rank 0 for ",
                              Seconds(r.silent), " (hang bound ", Seconds(bound),
                              "): its process is stopped (SIGSTOP, a debugger) or not "
                              "being scheduled")});
  }
  for (const RankHeartbeat& r : ranks) {
    if (!r.judged || r.silent > bound || r.idle <= bound) continue;
    // Who has waited longer than the bound for it?
    const RankHeartbeat* waiter = nullptr;
    for (const RankHeartbeat& other : ranks) {
      if (other.rank == r.rank || other.pending <= bound) continue;
      if (other.awaited_rank == r.rank || (other.awaited_rank < 0 && !any_silent)) {
        waiter = &other;
        break;
      }
    }
    if (waiter == nullptr) continue;
    verdicts.push_back(
        {r.rank,
         absl::StrCat("rank ", r.rank, " is hung: its caller has not called into the "
                      "communicator for ",
                      Seconds(r.idle), " while rank ", waiter->rank, " has waited ",
                      Seconds(waiter->pending), " for it",
                      waiter->awaited_what.empty() ? "" : absl::StrCat(" in ", waiter->awaited_what),
                      " (hang bound ", Seconds(bound),
                      "): stuck in a computation? The bound must exceed the longest "
                      "computation between two communicator calls; raise it "
                      "(--hang_timeout_s, FSDP_HANG_TIMEOUT_S) or call "
                      "Communicator::KeepAlive() during the computation")});
  }
  // Rank order, whichever rule declared it.
  std::sort(verdicts.begin(), verdicts.end(),
            [](const HangVerdict& a, const HangVerdict& b) { return a.rank < b.rank; });
  return verdicts;
}

}  // namespace comm
