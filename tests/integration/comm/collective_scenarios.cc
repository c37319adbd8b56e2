// File: tests/integration/comm/collective_scenarios.cc
#include "tests/integration/comm/collective_scenarios.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "comm/dtype.h"

namespace comm_test {

using comm::Algorithm;
using comm::Dtype;
using comm::ReduceOp;

namespace {

constexpr size_t kGridCounts[] = {0, 1, 7, 4096, kLargeCount};

const char* AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kLatency: return "latency";
    case Algorithm::kDirect: return "direct";
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

}  // namespace

ScenarioRunner::ScenarioRunner(comm::Communicator& world, absl::Duration timeout,
                               Bf16Rounding rounding)
    : world_(world), timeout_(timeout), rounding_(rounding) {
  world_sources_.resize(world.size());
  std::iota(world_sources_.begin(), world_sources_.end(), 0);
}

std::string ScenarioRunner::prefix() const {
  return absl::StrCat("[rank ", world_.rank(), "/", world_.size(), "]");
}


absl::StatusOr<PendingCheck> ScenarioRunner::PostAllGather(comm::Communicator& comm,
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

absl::StatusOr<PendingCheck> ScenarioRunner::PostReduceScatter(comm::Communicator& comm,
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

absl::StatusOr<PendingCheck> ScenarioRunner::PostAllReduce(comm::Communicator& comm,
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

absl::StatusOr<PendingCheck> ScenarioRunner::PostBroadcast(comm::Communicator& comm,
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

absl::StatusOr<PendingCheck> ScenarioRunner::PostBarrier(comm::Communicator& comm,
                                                 std::string name) {
  PendingCheck pending;
  pending.name = std::move(name);
  pending.check = [](const PendingCheck&) { return std::string(); };
  FSDP_ASSIGN_OR_RETURN(pending.work, comm.Barrier());
  return pending;
}

absl::Status ScenarioRunner::Finish(PendingCheck& pending) {
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

absl::Status ScenarioRunner::PostAndFinish(absl::StatusOr<PendingCheck> posted) {
  if (!posted.ok()) {
    return absl::Status(posted.status().code(),
                        absl::StrCat("posting: ", posted.status().message()));
  }
  return Finish(*posted);
}

absl::Status ScenarioRunner::CheckBarrierWaitsForLateRank() {
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

absl::Status ScenarioRunner::RunGrid(const std::vector<Algorithm>& algorithms) {
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
  // int64 sums are exact (comm/dtype.h): full-width values that wrap, every
  // algorithm, in place and not; an average is refused on every rank alike
  // before anything is posted.
  for (size_t count : kGridCounts) {
    for (Algorithm algorithm : algorithms) {
      for (bool in_place : {false, true}) {
        FSDP_RETURN_IF_ERROR(PostAndFinish(
            PostReduceScatter(world_, world_sources_, Dtype::kInt64, ReduceOp::kSum,
                              ValueMode::kSmallIntegers, count, algorithm, in_place)));
      }
      FSDP_RETURN_IF_ERROR(PostAndFinish(PostAllReduce(world_, world_sources_, Dtype::kInt64,
                                                       ReduceOp::kSum,
                                                       ValueMode::kSmallIntegers, count,
                                                       algorithm)));
    }
  }
  {
    std::vector<std::byte> buffer(64);
    comm::AllReduceOptions options;
    options.buffer = absl::MakeSpan(buffer);
    options.dtype = Dtype::kInt64;
    options.op = ReduceOp::kAverage;
    ++checks_;
    const absl::StatusOr<comm::WorkHandle> refused = world_.AllReduce(options);
    if (refused.ok() || refused.status().code() != absl::StatusCode::kInvalidArgument) {
      ++failures_;
      std::printf("%s FAIL all_reduce average int64: not refused (%s)\n", prefix().c_str(),
                  refused.ok() ? "posted" : refused.status().ToString().c_str());
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

absl::Status ScenarioRunner::RunInflight() {
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

absl::Status ScenarioRunner::RunSplit() {
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

}  // namespace comm_test
