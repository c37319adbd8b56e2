// File: tests/integration/comm/collective_worker.cc
//
// One rank of the multi-process collective tests. It joins the job through
// comm::Communicator::CreateFromEnvironment() (so it runs under
// //comm/launcher:launch, torchrun-style env vars set by a test, mpirun or
// srun alike), runs one scenario, and reports on stdout in lines the tests
// parse:
//
//   [rank R/N] PASS <scenario>: <checks> checks in <ms> ms
//   [rank R/N] FAIL <case>: <what was wrong>                 (data mismatch)
//   [rank R/N] STATUS <CODE> after <ms> ms in <case>: <message>  (an error)
//
// Exit code: 0 all passed, 1 some data mismatched, 3 a collective or the
// rendezvous returned an error, 2 bad flags.
//
// Scenarios (--scenario):
//   grid      every collective x counts {0, 1, 7, 4096, 1 MiB + 3} x {fp32,
//             bf16} x algorithms {auto, ring, latency}, plus bf16 rounding,
//             in-place all-gather and reduce-scatter, and broadcasts from
//             several roots.
//   inflight  seven different collectives posted back to back, then waited in
//             reverse order.
//   split     sub-communicators by parity and by blocks of three (reversed
//             keys), with collectives on child and parent in flight together.
//   all       grid, inflight and split, in that order.
//   kill      every rank posts a large all-reduce; --victim raises SIGKILL
//             right after posting (or, with --novictim_posts, just before);
//             survivors report what Wait() returned.
//   join      rendezvous plus one barrier (the rendezvous-failure tests).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/dtype.h"
#include "comm/status_macros.h"
#include "tests/integration/comm/collective_reference.h"

ABSL_FLAG(std::string, scenario, "all", "grid | inflight | split | all | kill | join");
ABSL_FLAG(int64_t, timeout_ms, 60000, "Timeout of every Work::Wait() and Split().");
ABSL_FLAG(int64_t, rendezvous_timeout_ms, 60000,
          "CommunicatorOptions::rendezvous_timeout.");
ABSL_FLAG(std::string, algorithms, "auto,ring,latency",
          "Comma-separated algorithms the grid runs.");
ABSL_FLAG(std::string, bf16_rounding, "once",
          "How bf16 reductions may round: 'once' (comm/communicator.h: fp32 "
          "accumulation, one rounding) or 'per_hop' (comm/reduce.h: every hop "
          "rounds; n ulps accepted). See collective_reference.h.");
ABSL_FLAG(int, victim, 1, "kill: the rank that raises SIGKILL mid-collective.");
ABSL_FLAG(bool, victim_posts, true,
          "kill: the victim posts its all-reduce before dying (data may be in "
          "flight) or dies before posting (the others wait for it).");
ABSL_FLAG(int64_t, kill_count, 16 << 20, "kill: fp32 elements of the all-reduce.");

namespace comm_test {
namespace {

using comm::Algorithm;
using comm::Dtype;
using comm::ReduceOp;

constexpr size_t kLargeCount = (size_t{1} << 20) + 3;  // > one 1 MiB segment
constexpr size_t kGridCounts[] = {0, 1, 7, 4096, kLargeCount};

const char* AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kLatency: return "latency";
  }
  return "?";
}

const char* OpName(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "average"; }

absl::Span<const std::byte> ConstSpan(const std::vector<std::byte>& bytes, size_t n) {
  return absl::Span<const std::byte>(bytes.data(), n);
}
absl::Span<std::byte> MutableSpan(std::vector<std::byte>& bytes, size_t n) {
  return absl::Span<std::byte>(bytes.data(), n);
}

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

class Worker {
 public:
  Worker(comm::Communicator& world, absl::Duration timeout, Bf16Rounding rounding)
      : world_(world), timeout_(timeout), rounding_(rounding) {
    world_sources_.resize(world.size());
    std::iota(world_sources_.begin(), world_sources_.end(), 0);
  }

  int checks() const { return checks_; }
  int failures() const { return failures_; }
  std::string prefix() const {
    return absl::StrCat("[rank ", world_.rank(), "/", world_.size(), "]");
  }

  absl::Status RunGrid(const std::vector<Algorithm>& algorithms);
  absl::Status RunInflight();
  absl::Status RunSplit();

 private:
  // Posting helpers. `comm` is the group, `sources[p]` the global rank at
  // group rank p; the salt comes from next_salt_, so every rank (which posts
  // the same sequence) uses the same one.
  absl::StatusOr<PendingCheck> PostAllGather(comm::Communicator& comm,
                                             std::vector<int> sources, Dtype dtype,
                                             size_t count, Algorithm algorithm,
                                             bool in_place);
  // `in_place`: the output is chunk r of the input itself, which
  // comm/communicator.h allows.
  absl::StatusOr<PendingCheck> PostReduceScatter(comm::Communicator& comm,
                                                 std::vector<int> sources, Dtype dtype,
                                                 ReduceOp op, ValueMode mode, size_t count,
                                                 Algorithm algorithm, bool in_place = false);
  absl::StatusOr<PendingCheck> PostAllReduce(comm::Communicator& comm,
                                             std::vector<int> sources, Dtype dtype,
                                             ReduceOp op, ValueMode mode, size_t count,
                                             Algorithm algorithm);
  absl::StatusOr<PendingCheck> PostBroadcast(comm::Communicator& comm,
                                             std::vector<int> sources, Dtype dtype,
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

absl::StatusOr<PendingCheck> Worker::PostAllGather(comm::Communicator& comm,
                                                   std::vector<int> sources, Dtype dtype,
                                                   size_t count, Algorithm algorithm,
                                                   bool in_place) {
  const uint64_t salt = next_salt_++;
  const size_t element = comm::DtypeSize(dtype);
  const int me = sources[comm.rank()];
  PendingCheck pending;
  pending.name = absl::StrCat("all_gather ", DtypeName(dtype), " count=", count, " ",
                              AlgorithmName(algorithm), in_place ? " in-place" : "",
                              " group=", comm.size());
  pending.input = MakeInput(dtype, ValueMode::kSmallIntegers, me, count, salt);
  pending.output_bytes = count * element * comm.size();
  pending.output = MakeOutputWithGuard(pending.output_bytes);
  comm::AllGatherOptions options;
  options.output = MutableSpan(pending.output, pending.output_bytes);
  options.algorithm = algorithm;
  if (in_place) {
    std::byte* slot = pending.output.data() + comm.rank() * count * element;
    if (count > 0) std::memcpy(slot, pending.input.data(), count * element);
    options.input = absl::Span<const std::byte>(slot, count * element);
  } else {
    options.input = ConstSpan(pending.input, pending.input.size());
  }
  pending.check = [dtype, sources, count, salt](const PendingCheck& p) {
    return CheckAllGather(dtype, ValueMode::kSmallIntegers, sources, count, salt,
                          ConstSpan(p.output, p.output_bytes));
  };
  FSDP_ASSIGN_OR_RETURN(pending.work, comm.AllGather(options));
  return pending;
}

absl::StatusOr<PendingCheck> Worker::PostReduceScatter(comm::Communicator& comm,
                                                       std::vector<int> sources,
                                                       Dtype dtype, ReduceOp op,
                                                       ValueMode mode, size_t count,
                                                       Algorithm algorithm, bool in_place) {
  const uint64_t salt = next_salt_++;
  const Bf16Rounding rounding = rounding_;
  const size_t element = comm::DtypeSize(dtype);
  const int me = sources[comm.rank()];
  const size_t begin = ChunkBegin(count, comm.size(), comm.rank());
  const size_t chunk = ChunkSize(count, comm.size(), comm.rank());
  PendingCheck pending;
  pending.name = absl::StrCat("reduce_scatter ", OpName(op), " ", DtypeName(dtype),
                              mode == ValueMode::kBf16Fractions ? " fractions" : "",
                              " count=", count, " ", AlgorithmName(algorithm),
                              in_place ? " in-place" : "", " group=", comm.size());
  pending.output_bytes = chunk * element;
  comm::ReduceScatterOptions options;
  if (in_place) {
    // One buffer: the input, with guard bytes after it; the output is its
    // chunk r. The check reads chunk r back from there.
    std::vector<std::byte> input = MakeInput(dtype, mode, me, count, salt);
    pending.output = MakeOutputWithGuard(input.size());
    if (!input.empty()) std::memcpy(pending.output.data(), input.data(), input.size());
    options.input = ConstSpan(pending.output, input.size());
    options.output = absl::Span<std::byte>(pending.output.data() + begin * element,
                                           pending.output_bytes);
  } else {
    pending.input = MakeInput(dtype, mode, me, count, salt);
    pending.output = MakeOutputWithGuard(pending.output_bytes);
    options.input = ConstSpan(pending.input, pending.input.size());
    options.output = MutableSpan(pending.output, pending.output_bytes);
  }
  options.dtype = dtype;
  options.op = op;
  options.algorithm = algorithm;
  const size_t input_bytes = count * element;
  pending.check = [=](const PendingCheck& p) {
    const size_t offset = in_place ? begin * element : 0;
    std::string error = CheckReduced(
        dtype, op, mode, sources, begin, chunk, salt,
        absl::Span<const std::byte>(p.output.data() + offset, p.output_bytes), rounding);
    if (error.empty() && in_place) error = CheckGuard(p.output, input_bytes);
    return error;
  };
  pending.guard_checked_by_check = in_place;
  FSDP_ASSIGN_OR_RETURN(pending.work, comm.ReduceScatter(options));
  return pending;
}

absl::StatusOr<PendingCheck> Worker::PostAllReduce(comm::Communicator& comm,
                                                   std::vector<int> sources, Dtype dtype,
                                                   ReduceOp op, ValueMode mode,
                                                   size_t count, Algorithm algorithm) {
  const uint64_t salt = next_salt_++;
  const Bf16Rounding rounding = rounding_;
  const int me = sources[comm.rank()];
  PendingCheck pending;
  pending.name = absl::StrCat("all_reduce ", OpName(op), " ", DtypeName(dtype),
                              mode == ValueMode::kBf16Fractions ? " fractions" : "",
                              " count=", count, " ", AlgorithmName(algorithm),
                              " group=", comm.size());
  std::vector<std::byte> input = MakeInput(dtype, mode, me, count, salt);
  pending.output_bytes = input.size();
  pending.output = MakeOutputWithGuard(pending.output_bytes);
  if (!input.empty()) std::memcpy(pending.output.data(), input.data(), input.size());
  comm::AllReduceOptions options;
  options.buffer = MutableSpan(pending.output, pending.output_bytes);
  options.dtype = dtype;
  options.op = op;
  options.algorithm = algorithm;
  pending.check = [=](const PendingCheck& p) {
    return CheckReduced(dtype, op, mode, sources, 0, count, salt,
                        ConstSpan(p.output, p.output_bytes), rounding);
  };
  FSDP_ASSIGN_OR_RETURN(pending.work, comm.AllReduce(options));
  return pending;
}

absl::StatusOr<PendingCheck> Worker::PostBroadcast(comm::Communicator& comm,
                                                   std::vector<int> sources, Dtype dtype,
                                                   size_t count, int root) {
  const uint64_t salt = next_salt_++;
  PendingCheck pending;
  pending.name = absl::StrCat("broadcast ", DtypeName(dtype), " count=", count,
                              " root=", root, " group=", comm.size());
  pending.output_bytes = count * comm::DtypeSize(dtype);
  pending.output = MakeOutputWithGuard(pending.output_bytes);
  if (comm.rank() == root) {
    std::vector<std::byte> input =
        MakeInput(dtype, ValueMode::kSmallIntegers, sources[root], count, salt);
    if (!input.empty()) std::memcpy(pending.output.data(), input.data(), input.size());
  }
  comm::BroadcastOptions options;
  options.buffer = MutableSpan(pending.output, pending.output_bytes);
  options.root = root;
  const int root_source = sources[root];
  pending.check = [=](const PendingCheck& p) {
    return CheckBroadcast(dtype, ValueMode::kSmallIntegers, root_source, count, salt,
                          ConstSpan(p.output, p.output_bytes));
  };
  FSDP_ASSIGN_OR_RETURN(pending.work, comm.Broadcast(options));
  return pending;
}

absl::StatusOr<PendingCheck> Worker::PostBarrier(comm::Communicator& comm,
                                                 std::string name) {
  PendingCheck pending;
  pending.name = std::move(name);
  pending.check = [](const PendingCheck&) { return std::string(); };
  FSDP_ASSIGN_OR_RETURN(pending.work, comm.Barrier());
  return pending;
}

absl::Status Worker::Finish(PendingCheck& pending) {
  absl::Status status = pending.work->Wait(timeout_);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(pending.name, ": ", status.message()));
  }
  ++checks_;
  std::string error = pending.check(pending);
  if (error.empty() && !pending.guard_checked_by_check) {
    error = CheckGuard(pending.output, pending.output_bytes);
  }
  if (!error.empty()) {
    ++failures_;
    std::printf("%s FAIL %s: %s\n", prefix().c_str(), pending.name.c_str(), error.c_str());
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

absl::Status Worker::PostAndFinish(absl::StatusOr<PendingCheck> posted) {
  if (!posted.ok()) {
    return absl::Status(posted.status().code(),
                        absl::StrCat("posting: ", posted.status().message()));
  }
  return Finish(*posted);
}

absl::Status Worker::CheckBarrierWaitsForLateRank() {
  if (world_.size() == 1) return absl::OkStatus();
  constexpr absl::Duration kLateness = absl::Milliseconds(300);
  FSDP_RETURN_IF_ERROR(PostAndFinish(PostBarrier(world_, "barrier (align)")));
  if (world_.rank() == 0) absl::SleepFor(kLateness);
  absl::Time start = absl::Now();
  FSDP_RETURN_IF_ERROR(PostAndFinish(PostBarrier(world_, "barrier (rank 0 late)")));
  absl::Duration waited = absl::Now() - start;
  // Causality, not speed: nobody can leave before rank 0 arrived. The slack
  // covers ranks that left the aligning barrier later than rank 0 did.
  if (world_.rank() != 0 && waited < kLateness / 3) {
    ++failures_;
    std::printf("%s FAIL barrier: left after %s although rank 0 arrived %s late\n",
                prefix().c_str(), absl::FormatDuration(waited).c_str(),
                absl::FormatDuration(kLateness).c_str());
  }
  return absl::OkStatus();
}

absl::Status Worker::RunGrid(const std::vector<Algorithm>& algorithms) {
  const int n = world_.size();
  std::vector<int> roots = {0, n - 1, n / 2};
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  for (size_t count : kGridCounts) {
    for (Dtype dtype : {Dtype::kFloat32, Dtype::kBFloat16}) {
      for (Algorithm algorithm : algorithms) {
        FSDP_RETURN_IF_ERROR(PostAndFinish(
            PostAllGather(world_, world_sources_, dtype, count, algorithm, false)));
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
          FSDP_RETURN_IF_ERROR(PostAndFinish(PostReduceScatter(
              world_, world_sources_, dtype, op, ValueMode::kSmallIntegers, count,
              algorithm)));
          FSDP_RETURN_IF_ERROR(PostAndFinish(PostAllReduce(
              world_, world_sources_, dtype, op, ValueMode::kSmallIntegers, count,
              algorithm)));
        }
      }
      FSDP_RETURN_IF_ERROR(PostAndFinish(
          PostAllGather(world_, world_sources_, dtype, count, Algorithm::kAuto, true)));
      for (Algorithm algorithm : algorithms) {
        FSDP_RETURN_IF_ERROR(PostAndFinish(PostReduceScatter(
            world_, world_sources_, dtype, ReduceOp::kSum, ValueMode::kSmallIntegers, count,
            algorithm, /*in_place=*/true)));
      }
      for (int root : roots) {
        FSDP_RETURN_IF_ERROR(
            PostAndFinish(PostBroadcast(world_, world_sources_, dtype, count, root)));
      }
      FSDP_RETURN_IF_ERROR(PostAndFinish(PostBarrier(world_, "barrier")));
    }
  }
  // bf16 is accumulated in fp32 and rounded once (comm/communicator.h).
  for (size_t count : {size_t{4097}, kLargeCount}) {
    for (Algorithm algorithm : algorithms) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        FSDP_RETURN_IF_ERROR(PostAndFinish(
            PostReduceScatter(world_, world_sources_, Dtype::kBFloat16, op,
                              ValueMode::kBf16Fractions, count, algorithm)));
        FSDP_RETURN_IF_ERROR(PostAndFinish(
            PostAllReduce(world_, world_sources_, Dtype::kBFloat16, op,
                          ValueMode::kBf16Fractions, count, algorithm)));
      }
    }
  }
  return CheckBarrierWaitsForLateRank();
}

absl::Status Worker::RunInflight() {
  const int n = world_.size();
  std::vector<PendingCheck> pending;
  auto post = [&](absl::StatusOr<PendingCheck> posted) -> absl::Status {
    if (!posted.ok()) return posted.status();
    pending.push_back(std::move(*posted));
    return absl::OkStatus();
  };
  for (int round = 0; round < 2; ++round) {
    pending.clear();
    FSDP_RETURN_IF_ERROR(post(PostAllGather(world_, world_sources_, Dtype::kFloat32, 4097,
                                            Algorithm::kAuto, false)));
    FSDP_RETURN_IF_ERROR(post(PostReduceScatter(world_, world_sources_, Dtype::kBFloat16,
                                                ReduceOp::kSum, ValueMode::kSmallIntegers,
                                                kLargeCount, Algorithm::kRing)));
    FSDP_RETURN_IF_ERROR(post(PostAllReduce(world_, world_sources_, Dtype::kFloat32,
                                            ReduceOp::kAverage, ValueMode::kSmallIntegers,
                                            7, Algorithm::kLatency)));
    FSDP_RETURN_IF_ERROR(post(PostAllReduce(world_, world_sources_, Dtype::kBFloat16,
                                            ReduceOp::kSum, ValueMode::kSmallIntegers, 4096,
                                            Algorithm::kAuto)));
    FSDP_RETURN_IF_ERROR(post(
        PostBroadcast(world_, world_sources_, Dtype::kFloat32, kLargeCount, n - 1)));
    FSDP_RETURN_IF_ERROR(post(PostBarrier(world_, "barrier (in flight)")));
    FSDP_RETURN_IF_ERROR(post(PostAllReduce(world_, world_sources_, Dtype::kFloat32,
                                            ReduceOp::kSum, ValueMode::kSmallIntegers,
                                            kLargeCount, Algorithm::kRing)));
    FSDP_RETURN_IF_ERROR(post(PostAllGather(world_, world_sources_, Dtype::kBFloat16, 1,
                                            Algorithm::kLatency, false)));
    if (round == 0) {
      // Reverse order: the last posted is waited first.
      for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
        FSDP_RETURN_IF_ERROR(Finish(*it));
      }
    } else {
      // Poll with Test() until all are done, then collect in posting order.
      absl::Time deadline = absl::Now() + timeout_;
      for (bool all_done = false; !all_done && absl::Now() < deadline;) {
        all_done = true;
        for (PendingCheck& p : pending) all_done = p.work->Test() && all_done;
        if (!all_done) absl::SleepFor(absl::Microseconds(200));
      }
      for (PendingCheck& p : pending) FSDP_RETURN_IF_ERROR(Finish(p));
    }
  }
  return absl::OkStatus();
}

// The global ranks that share `color`, ordered by (key, rank): the child
// communicator's ranks, as Communicator::Split() defines them.
std::vector<int> SplitMembers(int world_size, int color_of_me,
                              int (*color)(int rank), int (*key)(int rank)) {
  std::vector<int> members;
  for (int r = 0; r < world_size; ++r) {
    if (color(r) == color_of_me) members.push_back(r);
  }
  std::sort(members.begin(), members.end(), [key](int a, int b) {
    return std::make_pair(key(a), a) < std::make_pair(key(b), b);
  });
  return members;
}

int ParityColor(int rank) { return rank % 2; }
int BlockColor(int rank) { return rank / 3; }
int RankKey(int rank) { return rank; }
int ReversedKey(int rank) { return -rank; }

absl::Status Worker::RunSplit() {
  struct Layout {
    const char* name;
    int (*color)(int);
    int (*key)(int);
  };
  for (Layout layout : {Layout{"parity", ParityColor, RankKey},
                        Layout{"blocks of 3, reversed", BlockColor, ReversedKey}}) {
    const int me = world_.rank();
    std::vector<int> members =
        SplitMembers(world_.size(), layout.color(me), layout.color, layout.key);
    FSDP_ASSIGN_OR_RETURN(
        std::unique_ptr<comm::Communicator> child,
        world_.Split(layout.color(me), layout.key(me), timeout_));
    const int expected_rank =
        std::find(members.begin(), members.end(), me) - members.begin();
    ++checks_;
    if (child->size() != static_cast<int>(members.size()) ||
        child->rank() != expected_rank) {
      ++failures_;
      std::printf("%s FAIL split %s: child is rank %d of %d, expected %d of %zu\n",
                  prefix().c_str(), layout.name, child->rank(), child->size(),
                  expected_rank, members.size());
      return absl::OkStatus();  // collectives on a wrong child would only hang
    }
    // Child and parent collectives in flight at the same time; each group
    // posts its own collectives in one order on all its ranks.
    std::vector<PendingCheck> pending;
    auto post = [&](absl::StatusOr<PendingCheck> posted) -> absl::Status {
      if (!posted.ok()) return posted.status();
      pending.push_back(std::move(*posted));
      return absl::OkStatus();
    };
    FSDP_RETURN_IF_ERROR(post(PostAllReduce(*child, members, Dtype::kFloat32,
                                            ReduceOp::kSum, ValueMode::kSmallIntegers,
                                            4097, Algorithm::kAuto)));
    FSDP_RETURN_IF_ERROR(post(PostAllReduce(world_, world_sources_, Dtype::kFloat32,
                                            ReduceOp::kSum, ValueMode::kSmallIntegers,
                                            kLargeCount, Algorithm::kRing)));
    FSDP_RETURN_IF_ERROR(post(PostAllGather(*child, members, Dtype::kBFloat16, 7,
                                            Algorithm::kRing, false)));
    FSDP_RETURN_IF_ERROR(post(PostBroadcast(world_, world_sources_, Dtype::kFloat32, 4096,
                                            world_.size() - 1)));
    FSDP_RETURN_IF_ERROR(post(PostReduceScatter(*child, members, Dtype::kFloat32,
                                                ReduceOp::kAverage,
                                                ValueMode::kSmallIntegers, kLargeCount,
                                                Algorithm::kAuto)));
    FSDP_RETURN_IF_ERROR(post(PostBroadcast(*child, members, Dtype::kBFloat16, 4096,
                                            child->size() - 1)));
    FSDP_RETURN_IF_ERROR(post(PostBarrier(world_, "parent barrier (with child work)")));
    FSDP_RETURN_IF_ERROR(post(PostBarrier(*child, "child barrier")));
    for (PendingCheck& p : pending) p.name = absl::StrCat(layout.name, ": ", p.name);
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
      FSDP_RETURN_IF_ERROR(Finish(*it));
    }
  }
  return absl::OkStatus();
}

std::string Prefix(int rank, int size) {
  return absl::StrCat("[rank ", rank, "/", size, "]");
}

// The env rank, for messages before a communicator exists.
int RankFromEnvironment() {
  const char* rank = std::getenv("RANK");
  return rank == nullptr ? -1 : std::atoi(rank);
}
int WorldSizeFromEnvironment() {
  const char* size = std::getenv("WORLD_SIZE");
  return size == nullptr ? -1 : std::atoi(size);
}

int ReportStatus(const std::string& prefix, absl::Time start, const std::string& where,
                 const absl::Status& status) {
  std::printf("%s STATUS %s after %lld ms in %s: %s\n", prefix.c_str(),
              absl::StatusCodeToString(status.code()).c_str(),
              static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - start)),
              where.c_str(), std::string(status.message()).c_str());
  std::fflush(stdout);
  return 3;
}

// Every rank posts a large all-reduce; the victim dies right after posting.
int RunKill(comm::Communicator& world, absl::Duration timeout) {
  const std::string prefix = Prefix(world.rank(), world.size());
  std::vector<float> values(absl::GetFlag(FLAGS_kill_count), 1.0f);
  // Align first, so that the survivors are already waiting when it dies.
  absl::Status aligned = [&]() -> absl::Status {
    FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world.Barrier());
    return work->Wait(timeout);
  }();
  absl::Time start = absl::Now();
  if (!aligned.ok()) return ReportStatus(prefix, start, "barrier before kill", aligned);
  const bool victim = world.rank() == absl::GetFlag(FLAGS_victim);
  const bool victim_posts = absl::GetFlag(FLAGS_victim_posts);
  if (victim && !victim_posts) {
    std::printf("%s raising SIGKILL before posting the all-reduce\n", prefix.c_str());
    std::fflush(stdout);
    raise(SIGKILL);
  }
  comm::AllReduceOptions options;
  options.buffer = comm::AsBytes(absl::MakeSpan(values));
  options.algorithm = Algorithm::kRing;
  absl::StatusOr<comm::WorkHandle> work = world.AllReduce(options);
  if (victim) {
    std::printf("%s raising SIGKILL mid-all-reduce\n", prefix.c_str());
    std::fflush(stdout);
    raise(SIGKILL);
  }
  if (!work.ok()) return ReportStatus(prefix, start, "posting all_reduce", work.status());
  absl::Status status = (*work)->Wait(timeout);
  if (status.ok()) {
    std::printf("%s PASS kill: all-reduce finished although rank %d died\n",
                prefix.c_str(), absl::GetFlag(FLAGS_victim));
    return 0;
  }
  int code = ReportStatus(prefix, start, "all_reduce", status);
  // Teardown with a dead peer must not hang either; the test checks exit time.
  return code;
}

std::vector<Algorithm> ParseAlgorithms(const std::string& text, std::string* error) {
  std::vector<Algorithm> algorithms;
  for (absl::string_view name : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    if (name == "auto") algorithms.push_back(Algorithm::kAuto);
    else if (name == "ring") algorithms.push_back(Algorithm::kRing);
    else if (name == "latency") algorithms.push_back(Algorithm::kLatency);
    else *error = absl::StrCat("--algorithms: unknown '", name, "' (auto, ring, latency)");
  }
  if (algorithms.empty() && error->empty()) *error = "--algorithms is empty";
  return algorithms;
}

int Main() {
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  const absl::Duration timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  std::string flag_error;
  std::vector<Algorithm> algorithms =
      ParseAlgorithms(absl::GetFlag(FLAGS_algorithms), &flag_error);
  const bool known = scenario == "grid" || scenario == "inflight" || scenario == "split" ||
                     scenario == "all" || scenario == "kill" || scenario == "join";
  if (!known) flag_error = absl::StrCat("--scenario: unknown '", scenario, "'");
  const std::string rounding_name = absl::GetFlag(FLAGS_bf16_rounding);
  if (rounding_name != "once" && rounding_name != "per_hop") {
    flag_error = absl::StrCat("--bf16_rounding: unknown '", rounding_name, "' (once, per_hop)");
  }
  const Bf16Rounding rounding =
      rounding_name == "once" ? Bf16Rounding::kOnce : Bf16Rounding::kPerHop;
  if (!flag_error.empty()) {
    std::fprintf(stderr, "collective_worker: %s\n", flag_error.c_str());
    return 2;
  }

  const absl::Time start = absl::Now();
  std::string env_prefix = Prefix(RankFromEnvironment(), WorldSizeFromEnvironment());
  comm::CommunicatorOptions options;
  options.rendezvous_timeout =
      absl::Milliseconds(absl::GetFlag(FLAGS_rendezvous_timeout_ms));
  absl::StatusOr<std::unique_ptr<comm::Communicator>> created =
      comm::Communicator::CreateFromEnvironment(options);
  if (!created.ok()) return ReportStatus(env_prefix, start, "rendezvous", created.status());
  comm::Communicator& world = **created;
  const std::string prefix = Prefix(world.rank(), world.size());
  std::printf("%s joined in %lld ms\n", prefix.c_str(),
              static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - start)));
  std::fflush(stdout);

  if (scenario == "kill") return RunKill(world, timeout);

  Worker worker(world, timeout, rounding);
  std::vector<std::pair<std::string, std::function<absl::Status()>>> parts;
  if (scenario == "grid" || scenario == "all") {
    parts.push_back({"grid", [&] { return worker.RunGrid(algorithms); }});
  }
  if (scenario == "inflight" || scenario == "all") {
    parts.push_back({"inflight", [&] { return worker.RunInflight(); }});
  }
  if (scenario == "split" || scenario == "all") {
    parts.push_back({"split", [&] { return worker.RunSplit(); }});
  }
  if (scenario == "join") {
    parts.push_back({"join", [&]() -> absl::Status {
                       FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world.Barrier());
                       return work->Wait(timeout);
                     }});
  }
  for (auto& [name, run] : parts) {
    const absl::Time part_start = absl::Now();
    const int checks_before = worker.checks();
    const int failures_before = worker.failures();
    absl::Status part_status = run();
    if (!part_status.ok()) return ReportStatus(prefix, part_start, name, part_status);
    const int failed = worker.failures() - failures_before;
    std::printf("%s %s %s: %d checks, %d failed, %lld ms\n", prefix.c_str(),
                failed == 0 ? "PASS" : "FAIL", name.c_str(),
                worker.checks() - checks_before, failed,
                static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - part_start)));
    std::fflush(stdout);
  }
  return worker.failures() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace comm_test

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return comm_test::Main();
}
