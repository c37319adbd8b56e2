// File: comm/fault_injection.cc
#include "comm/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace comm {
namespace {

absl::Status BadSpec(absl::string_view part, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat(kFaultsEnv, ": '", part, "': ", expected));
}

absl::StatusOr<double> ParseProbability(absl::string_view part, absl::string_view text) {
  double p = 0;
  if (!absl::SimpleAtod(text, &p) || !(p >= 0 && p <= 1)) {
    return BadSpec(part, "expected a probability from 0 to 1");
  }
  return p;
}

// "A-B": two non-negative integers, A <= B.
absl::StatusOr<std::pair<int64_t, int64_t>> ParseRange(absl::string_view part,
                                                       absl::string_view text) {
  std::vector<absl::string_view> ends = absl::StrSplit(text, absl::MaxSplits('-', 1));
  int64_t a = 0, b = 0;
  if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &a) || !absl::SimpleAtoi(ends[1], &b) ||
      a < 0 || b < a) {
    return BadSpec(part, "expected a range A-B of whole numbers with A <= B");
  }
  return std::make_pair(a, b);
}

// "R@N": R a rank or `any`; N an operation from 1 or `random:A-B`.
absl::StatusOr<RankFault> ParseRankFault(absl::string_view part, absl::string_view text,
                                         RankFaultAction action) {
  constexpr char kExpected[] =
      "expected RANK@OPERATION: RANK a rank or 'any', OPERATION a count from 1 or "
      "'random:A-B' (e.g. kill=any@random:100-900)";
  std::vector<absl::string_view> halves = absl::StrSplit(text, absl::MaxSplits('@', 1));
  if (halves.size() != 2) return BadSpec(part, kExpected);
  RankFault fault;
  fault.action = action;
  if (halves[0] != "any" && (!absl::SimpleAtoi(halves[0], &fault.rank) || fault.rank < 0)) {
    return BadSpec(part, kExpected);
  }
  if (absl::ConsumePrefix(&halves[1], "random:")) {
    absl::StatusOr<std::pair<int64_t, int64_t>> range = ParseRange(part, halves[1]);
    if (!range.ok()) return range.status();
    fault.first_op = range->first;
    fault.last_op = range->second;
  } else if (!absl::SimpleAtoi(halves[1], &fault.first_op)) {
    return BadSpec(part, kExpected);
  } else {
    fault.last_op = fault.first_op;
  }
  if (fault.first_op < 1) return BadSpec(part, "operations are counted from 1");
  return fault;
}

const char* ActionName(RankFaultAction action) {
  return action == RankFaultAction::kKill ? "kill" : "stop";
}

class FaultInjectingTransport : public Transport {
 public:
  FaultInjectingTransport(std::unique_ptr<Transport> inner, const FaultPlan& plan)
      : inner_(std::move(inner)),
        plan_(plan),
        // Each rank its own stream of choices, all from the one seed.
        rng_(plan.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(inner_->rank()) + 1),
        held_(inner_->world_size()) {
    for (const ResolvedRankFault& fault : ResolveRankFaults(plan_, inner_->world_size())) {
      if (fault.rank == inner_->rank()) mine_.push_back(fault);
    }
  }

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  int HostIndex(int rank) const override { return inner_->HostIndex(rank); }

  absl::Status PostSend(int peer, uint64_t tag, const void* data, size_t num_bytes,
                        Completion* completion) override {
    // What the inner transport would refuse, it refuses now.
    if (peer < 0 || peer >= world_size() || tag > kMaxTransportTag || !inner_->health().ok()) {
      return inner_->PostSend(peer, tag, data, num_bytes, completion);
    }
    StrikeIfDue();
    const absl::Time now = absl::Now();
    std::deque<HeldSend>& queue = held_[peer];
    HeldSend send{now, tag, data, num_bytes, completion, /*dropped=*/false};
    const bool drops_here = plan_.drop_rank < 0 || plan_.drop_rank == rank();
    if (drops_here && plan_.drop_probability > 0 && Chance(plan_.drop_probability)) {
      send.dropped = true;
    } else if (plan_.delay_probability > 0 && Chance(plan_.delay_probability)) {
      send.due = now + DrawDelay();
    } else if (queue.empty()) {
      return inner_->PostSend(peer, tag, data, num_bytes, completion);
    }
    // Behind every send to this peer still held: order per (peer, tag) holds.
    if (!queue.empty()) send.due = std::max(send.due, queue.back().due);
    queue.push_back(send);
    return absl::OkStatus();
  }

  absl::Status PostRecv(int peer, uint64_t tag, void* data, size_t num_bytes,
                        Completion* completion) override {
    if (peer >= 0 && peer < world_size() && tag <= kMaxTransportTag && inner_->health().ok()) {
      StrikeIfDue();
    }
    return inner_->PostRecv(peer, tag, data, num_bytes, completion);
  }

  bool Progress() override {
    const bool released = ReleaseDueSends();
    const bool inner_progress = inner_->Progress();
    return released || inner_progress;
  }

  absl::Status BlockUntilActivity(absl::Duration timeout) override {
    absl::Time wake = absl::InfiniteFuture();
    for (const std::deque<HeldSend>& queue : held_) {
      if (!queue.empty()) wake = std::min(wake, queue.front().due);
    }
    if (wake != absl::InfiniteFuture()) {
      const absl::Duration until = wake - absl::Now();
      if (until <= absl::ZeroDuration()) return absl::OkStatus();
      timeout = std::min(timeout, until);
    }
    return inner_->BlockUntilActivity(timeout);
  }

  void Interrupt() override { inner_->Interrupt(); }
  absl::Status health() const override { return inner_->health(); }

  void Abort(const absl::Status& why) override {
    for (std::deque<HeldSend>& queue : held_) {
      for (HeldSend& send : queue) Finish(send, why);
      queue.clear();
    }
    inner_->Abort(why);
  }

  CallerLiveness* caller_liveness() override { return inner_->caller_liveness(); }

 private:
  struct HeldSend {
    absl::Time due;
    uint64_t tag;
    const void* data;
    size_t num_bytes;
    Completion* completion;
    bool dropped;
  };

  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  absl::Duration DrawDelay() {
    const double lo = absl::ToDoubleMilliseconds(plan_.min_delay);
    const double hi = absl::ToDoubleMilliseconds(plan_.max_delay);
    return absl::Milliseconds(lo == hi ? lo : std::uniform_real_distribution<double>(lo, hi)(rng_));
  }

  static void Finish(HeldSend& send, absl::Status status) {
    send.completion->status = std::move(status);
    send.completion->done = true;
  }

  // Posts (or, for a lost one, completes) every held send that is due, in
  // order per peer.
  bool ReleaseDueSends() {
    bool any = false;
    const absl::Time now = absl::Now();
    for (int peer = 0; peer < static_cast<int>(held_.size()); ++peer) {
      std::deque<HeldSend>& queue = held_[peer];
      while (!queue.empty() && queue.front().due <= now) {
        HeldSend send = queue.front();
        queue.pop_front();
        any = true;
        if (send.dropped) {
          Finish(send, absl::OkStatus());
          continue;
        }
        absl::Status posted =
            inner_->PostSend(peer, send.tag, send.data, send.num_bytes, send.completion);
        if (!posted.ok()) Finish(send, std::move(posted));
      }
    }
    return any;
  }

  // Counts this operation; kills or stops this rank if the plan says so.
  void StrikeIfDue() {
    ++operations_;
    for (const ResolvedRankFault& fault : mine_) {
      if (fault.op != operations_) continue;
      std::fprintf(stderr, "fault injection (%s): rank %d %s at its operation %lld\n", kFaultsEnv,
                   rank(),
                   fault.action == RankFaultAction::kKill ? "kills itself (SIGKILL)"
                                                          : "stops itself (SIGSTOP)",
                   static_cast<long long>(operations_));
      std::fflush(stderr);
      if (fault.action == RankFaultAction::kKill) {
        kill(getpid(), SIGKILL);
      } else {
        raise(SIGSTOP);
      }
    }
  }

  std::unique_ptr<Transport> inner_;
  FaultPlan plan_;
  std::mt19937_64 rng_;
  std::vector<ResolvedRankFault> mine_;
  int64_t operations_ = 0;
  std::vector<std::deque<HeldSend>> held_;  // per peer, in posting order
};

}  // namespace

absl::StatusOr<FaultPlan> ParseFaultPlan(absl::string_view spec) {
  FaultPlan plan;
  if (spec.empty()) return BadSpec(spec, "empty; leave the variable unset for no faults");
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    std::vector<absl::string_view> key_value = absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (key_value.size() != 2) return BadSpec(part, "expected key=value");
    const absl::string_view key = key_value[0];
    absl::string_view value = key_value[1];
    if (key == "seed") {
      if (!absl::SimpleAtoi(value, &plan.seed)) return BadSpec(part, "expected a whole number");
    } else if (key == "delay") {
      std::vector<absl::string_view> p_range = absl::StrSplit(value, absl::MaxSplits(':', 1));
      if (p_range.size() != 2 || !absl::ConsumeSuffix(&p_range[1], "ms")) {
        return BadSpec(part, "expected delay=P:A-Bms, e.g. delay=0.1:1-20ms");
      }
      absl::StatusOr<double> p = ParseProbability(part, p_range[0]);
      if (!p.ok()) return p.status();
      absl::StatusOr<std::pair<int64_t, int64_t>> range = ParseRange(part, p_range[1]);
      if (!range.ok()) return range.status();
      plan.delay_probability = *p;
      plan.min_delay = absl::Milliseconds(range->first);
      plan.max_delay = absl::Milliseconds(range->second);
    } else if (key == "drop") {
      absl::StatusOr<double> p = ParseProbability(part, value);
      if (!p.ok()) return p.status();
      plan.drop_probability = *p;
    } else if (key == "drop_rank") {
      if (!absl::SimpleAtoi(value, &plan.drop_rank) || plan.drop_rank < 0) {
        return BadSpec(part, "expected a rank");
      }
    } else if (key == "kill" || key == "stop") {
      absl::StatusOr<RankFault> fault = ParseRankFault(
          part, value, key == "kill" ? RankFaultAction::kKill : RankFaultAction::kStop);
      if (!fault.ok()) return fault.status();
      plan.rank_faults.push_back(*fault);
    } else if (key == "attempt") {
      if (value == "any") {
        plan.attempt = -1;
      } else if (!absl::SimpleAtoi(value, &plan.attempt) || plan.attempt < 0) {
        return BadSpec(part, "expected an attempt from 0, or 'any'");
      }
    } else {
      return BadSpec(part, "unknown key; known: seed, delay, drop, drop_rank, kill, stop, attempt");
    }
  }
  return plan;
}

std::string DescribeFaultPlan(const FaultPlan& plan) {
  std::vector<std::string> parts;
  if (plan.delay_probability > 0) {
    parts.push_back(
        absl::StrFormat("%g of sends held back %lld-%lld ms", plan.delay_probability,
                        static_cast<long long>(absl::ToInt64Milliseconds(plan.min_delay)),
                        static_cast<long long>(absl::ToInt64Milliseconds(plan.max_delay))));
  }
  if (plan.drop_probability > 0) {
    parts.push_back(absl::StrFormat("%g of %s sends lost", plan.drop_probability,
                                    plan.drop_rank < 0
                                        ? std::string("every rank's")
                                        : absl::StrCat("rank ", plan.drop_rank, "'s")));
  }
  for (const RankFault& fault : plan.rank_faults) {
    parts.push_back(absl::StrCat(
        ActionName(fault.action), " ",
        fault.rank < 0 ? std::string("a rank drawn") : absl::StrCat("rank ", fault.rank),
        fault.first_op == fault.last_op
            ? absl::StrCat(" at its operation ", fault.first_op)
            : absl::StrCat(" at an operation drawn from ", fault.first_op, "-", fault.last_op)));
  }
  if (parts.empty()) parts.push_back("nothing injected");
  return absl::StrCat(absl::StrJoin(parts, "; "), " (seed ", plan.seed, ", ",
                      plan.attempt < 0 ? std::string("every attempt")
                                       : absl::StrCat("attempt ", plan.attempt, " only"),
                      ")");
}

bool FaultsApply(const FaultPlan& plan, int attempt) {
  return plan.attempt < 0 || plan.attempt == attempt;
}

std::vector<ResolvedRankFault> ResolveRankFaults(const FaultPlan& plan, int world_size) {
  // One stream for every rank: each draws the same victims and operations.
  std::mt19937_64 rng(plan.seed);
  std::vector<ResolvedRankFault> resolved;
  for (const RankFault& fault : plan.rank_faults) {
    const int rank =
        fault.rank >= 0 ? fault.rank : std::uniform_int_distribution<int>(0, world_size - 1)(rng);
    const int64_t op = std::uniform_int_distribution<int64_t>(fault.first_op, fault.last_op)(rng);
    resolved.push_back({fault.action, rank, op});
  }
  return resolved;
}

absl::StatusOr<std::unique_ptr<Transport>> WithInjectedFaults(std::unique_ptr<Transport> inner,
                                                              const FaultPlan& plan) {
  const int world_size = inner->world_size();
  auto missing = [&](int rank, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(kFaultsEnv, ": ", what, " names rank ", rank,
                                                   ", but the job has ", world_size, " ranks (0-",
                                                   world_size - 1, ")"));
  };
  if (plan.drop_rank >= world_size) return missing(plan.drop_rank, "drop_rank");
  for (const RankFault& fault : plan.rank_faults) {
    if (fault.rank >= world_size) return missing(fault.rank, ActionName(fault.action));
  }
  return std::make_unique<FaultInjectingTransport>(std::move(inner), plan);
}

}  // namespace comm
