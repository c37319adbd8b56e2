// File: tests/fsdp/train/thread_communicator.cc
#include "tests/fsdp/train/thread_communicator.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/bfloat16.h"
#include "comm/dtype.h"

namespace fsdp_test {
namespace {

enum class Op { kAllGather, kReduceScatter, kAllReduce, kBroadcast, kBarrier, kSplit, kShift };

struct Group;

struct Contribution {
  bool posted = false;
  Op op = Op::kBarrier;
  const std::byte* input = nullptr;
  size_t input_bytes = 0;
  std::byte* output = nullptr;
  size_t output_bytes = 0;
  comm::ReduceOp reduce = comm::ReduceOp::kSum;
  int root = 0;
  comm::Dtype dtype = comm::Dtype::kFloat32;
  int color = 0;  // kSplit
  int key = 0;    // kSplit
};

struct Slot {
  std::vector<Contribution> ranks;
  bool all_posted = false;
  absl::Time run_at;  // when the collective "arrives": all posted + delay
  bool done = false;  // outputs written (by the first Test/Wait after run_at)
  absl::Status status;
  // kSplit: for each rank of the group, its new group and rank in it.
  std::vector<std::pair<std::shared_ptr<Group>, int>> split_result;
};

// std::mutex rather than absl::Mutex: Debian's Abseil is not built with
// ThreadSanitizer, which then cannot see absl::Mutex's ordering.
struct Group {
  Group(int n, absl::Duration delay) : size(n), completion_delay(delay), next_seq(n, 0) {}
  const int size;
  const absl::Duration completion_delay;
  std::mutex mu;
  std::condition_variable posted;         // some slot became all_posted
  std::vector<int64_t> next_seq;          // guarded by mu
  std::map<int64_t, std::shared_ptr<Slot>> slots;  // guarded by mu
};

float Load(const std::byte* data, size_t i, comm::Dtype dtype) {
  if (dtype == comm::Dtype::kFloat32) {
    float v;
    std::memcpy(&v, data + i * 4, 4);
    return v;
  }
  uint16_t b;
  std::memcpy(&b, data + i * 2, 2);
  return base::FromBf16Bits(b);
}

void Store(std::byte* data, size_t i, float v, comm::Dtype dtype) {
  if (dtype == comm::Dtype::kFloat32) {
    std::memcpy(data + i * 4, &v, 4);
  } else {
    const uint16_t b = base::ToBf16Bits(v);
    std::memcpy(data + i * 2, &b, 2);
  }
}

// Forms the sub-groups of a kSplit: ranks of one color, ordered by (key, rank).
void ExecuteSplit(Slot& slot, int n, absl::Duration delay) {
  std::map<int, std::vector<std::pair<int, int>>> by_color;  // color -> (key, rank)
  for (int r = 0; r < n; ++r) by_color[slot.ranks[r].color].push_back({slot.ranks[r].key, r});
  slot.split_result.resize(n);
  for (auto& [color, members] : by_color) {
    std::sort(members.begin(), members.end());
    auto group = std::make_shared<Group>(static_cast<int>(members.size()), delay);
    for (size_t i = 0; i < members.size(); ++i) {
      slot.split_result[members[i].second] = {group, static_cast<int>(i)};
    }
  }
}

// An int64 reduction: two's complement sums (wrapping, as the real
// collectives add them), no average.
absl::Status ExecuteInt64Sum(Slot& slot, int n, size_t count) {
  const Contribution& first = slot.ranks[0];
  if (first.reduce != comm::ReduceOp::kSum) {
    return absl::InvalidArgumentError("int64 elements are only summed");
  }
  std::vector<uint64_t> sum(count, 0);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      uint64_t v;
      std::memcpy(&v, slot.ranks[r].input + i * 8, 8);
      sum[i] += v;
    }
  }
  const size_t chunk = first.op == Op::kAllReduce ? count : (count + n - 1) / n;
  for (int r = 0; r < n; ++r) {
    const size_t begin = first.op == Op::kAllReduce ? 0 : std::min(count, r * chunk);
    const size_t end = std::min(count, begin + chunk);
    for (size_t i = begin; i < end; ++i) {
      std::memcpy(slot.ranks[r].output + (i - begin) * 8, &sum[i], 8);
    }
  }
  return absl::OkStatus();
}

// Runs a complete slot (every rank posted). Reductions accumulate in fp32
// in rank order and round once (bf16); see the header.
absl::Status Execute(Slot& slot, int n) {
  const Contribution& first = slot.ranks[0];
  for (int r = 1; r < n; ++r) {
    if (slot.ranks[r].op != first.op || slot.ranks[r].input_bytes != first.input_bytes) {
      return absl::InternalError(absl::StrCat("rank ", r, " posted a different collective or size "
                                              "than rank 0 at the same position"));
    }
  }
  // Nothing to move (and null buffers, which memmove may not be given).
  if (first.op != Op::kSplit && first.input_bytes == 0) return absl::OkStatus();
  switch (first.op) {
    case Op::kBarrier:
      return absl::OkStatus();
    case Op::kAllGather:
      for (int dst = 0; dst < n; ++dst) {
        for (int src = 0; src < n; ++src) {
          // memmove: a rank's input may alias its own slot of its output.
          std::memmove(slot.ranks[dst].output + src * first.input_bytes, slot.ranks[src].input,
                       first.input_bytes);
        }
      }
      return absl::OkStatus();
    case Op::kBroadcast: {
      std::vector<std::byte> data(slot.ranks[first.root].input,
                                  slot.ranks[first.root].input + first.input_bytes);
      for (int r = 0; r < n; ++r) std::memcpy(slot.ranks[r].output, data.data(), data.size());
      return absl::OkStatus();
    }
    case Op::kSplit:
      return absl::OkStatus();  // done by the caller, which knows the delay
    case Op::kShift:
      for (int r = 0; r < n; ++r) {
        const Contribution& from = slot.ranks[((r - first.root) % n + n) % n];
        std::memcpy(slot.ranks[r].output, from.input, from.input_bytes);
      }
      return absl::OkStatus();
    case Op::kAllReduce:
    case Op::kReduceScatter: {
      const size_t elem = comm::DtypeSize(first.dtype);
      const size_t count = first.input_bytes / elem;
      if (first.dtype == comm::Dtype::kInt64) return ExecuteInt64Sum(slot, n, count);
      std::vector<float> sum(count, 0.0f);
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) sum[i] += Load(slot.ranks[r].input, i, first.dtype);
      }
      if (first.reduce == comm::ReduceOp::kAverage) {
        for (float& v : sum) v /= static_cast<float>(n);
      }
      if (first.op == Op::kAllReduce) {
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) Store(slot.ranks[r].output, i, sum[i], first.dtype);
        }
      } else {
        const size_t chunk = (count + n - 1) / n;
        for (int r = 0; r < n; ++r) {
          const size_t begin = std::min(count, r * chunk);
          const size_t end = std::min(count, begin + chunk);
          for (size_t i = begin; i < end; ++i) {
            Store(slot.ranks[r].output, i - begin, sum[i], first.dtype);
          }
        }
      }
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown op");
}

class ThreadWork : public comm::Work {
 public:
  ThreadWork(std::shared_ptr<Group> group, std::shared_ptr<Slot> slot, int rank)
      : group_(std::move(group)), slot_(std::move(slot)), rank_(rank) {}
  bool Test() override {
    std::lock_guard<std::mutex> lock(group_->mu);
    RunIfDue();
    return slot_->done;
  }
  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    std::unique_lock<std::mutex> lock(group_->mu);
    Slot* slot = slot_.get();
    const bool posted = group_->posted.wait_for(
        lock, absl::ToChronoNanoseconds(timeout), [slot] { return slot->all_posted; });
    if (!posted) {
      std::string missing;
      for (int r = 0; r < group_->size; ++r) {
        if (!slot->ranks[r].posted) absl::StrAppend(&missing, missing.empty() ? "" : ",", r);
      }
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank_, " (this thread) waited ", absl::FormatDuration(timeout),
                       " for rank(s) ", missing, " to post the collective"));
    }
    const absl::Time run_at = slot->run_at;
    lock.unlock();
    if (run_at > deadline) {
      absl::SleepFor(deadline - absl::Now());
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank_, " (this thread) waited ", absl::FormatDuration(timeout),
          " for a slow collective"));
    }
    absl::SleepFor(run_at - absl::Now());
    lock.lock();
    RunIfDue();
    return slot->status;
  }

 private:
  // The outputs are written only when the collective is due, so a caller
  // that reads them before Wait()/Test() says done sees stale data.
  // Requires group_->mu.
  void RunIfDue() {
    if (slot_->done || !slot_->all_posted || absl::Now() < slot_->run_at) return;
    slot_->status = Execute(*slot_, group_->size);
    slot_->done = true;
  }

  std::shared_ptr<Group> group_;
  std::shared_ptr<Slot> slot_;
  int rank_;
};

class ThreadCommunicator : public comm::Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size; }
  bool on_one_host() const override { return true; }  // threads of one process

  absl::StatusOr<comm::WorkHandle> AllGather(const comm::AllGatherOptions& o) override {
    Contribution c{true, Op::kAllGather, o.input.data(), o.input.size(), o.output.data(),
                   o.output.size()};
    return Post(c);
  }
  absl::StatusOr<comm::WorkHandle> ReduceScatter(const comm::ReduceScatterOptions& o) override {
    Contribution c{true, Op::kReduceScatter, o.input.data(), o.input.size(), o.output.data(),
                   o.output.size(), o.op};
    c.dtype = o.dtype;
    return Post(c);
  }
  absl::StatusOr<comm::WorkHandle> AllReduce(const comm::AllReduceOptions& o) override {
    Contribution c{true, Op::kAllReduce, o.buffer.data(), o.buffer.size(), o.buffer.data(),
                   o.buffer.size(), o.op};
    c.dtype = o.dtype;
    return Post(c);
  }
  absl::StatusOr<comm::WorkHandle> Broadcast(const comm::BroadcastOptions& o) override {
    Contribution c{true, Op::kBroadcast, o.buffer.data(), o.buffer.size(), o.buffer.data(),
                   o.buffer.size()};
    c.root = o.root;
    return Post(c);
  }
  // The distance travels in Contribution::root.
  absl::StatusOr<comm::WorkHandle> Shift(const comm::ShiftOptions& o) override {
    Contribution c{true,           Op::kShift,      o.input.data(),
                   o.input.size(), o.output.data(), o.output.size()};
    c.root = o.distance;
    return Post(c);
  }
  absl::StatusOr<comm::WorkHandle> Barrier() override {
    Contribution c;
    c.posted = true;
    return Post(c);
  }
  absl::StatusOr<std::unique_ptr<comm::Communicator>> Split(int color, int key,
                                                            absl::Duration timeout) override {
    Contribution c;
    c.posted = true;
    c.op = Op::kSplit;
    c.color = color;
    c.key = key;
    std::shared_ptr<Slot> slot;
    comm::WorkHandle work = Post(c, &slot);
    absl::Status status = work->Wait(timeout);
    if (!status.ok()) return status;
    std::lock_guard<std::mutex> lock(group_->mu);
    auto [group, rank] = slot->split_result[rank_];
    return std::unique_ptr<comm::Communicator>(new ThreadCommunicator(group, rank));
  }

 private:
  comm::WorkHandle Post(const Contribution& c, std::shared_ptr<Slot>* slot_out = nullptr) {
    std::lock_guard<std::mutex> lock(group_->mu);
    const int64_t seq = group_->next_seq[rank_]++;
    std::shared_ptr<Slot>& slot = group_->slots[seq];
    if (slot == nullptr) {
      slot = std::make_shared<Slot>();
      slot->ranks.resize(group_->size);
    }
    slot->ranks[rank_] = c;
    bool all = true;
    for (const Contribution& r : slot->ranks) all = all && r.posted;
    std::shared_ptr<Slot> mine = slot;
    if (slot_out != nullptr) *slot_out = mine;
    if (all) {
      if (c.op == Op::kSplit) ExecuteSplit(*mine, group_->size, group_->completion_delay);
      mine->all_posted = true;
      mine->run_at = absl::Now() + group_->completion_delay;
      if (group_->completion_delay <= absl::ZeroDuration()) {
        mine->status = Execute(*mine, group_->size);
        mine->done = true;
      }
      group_->posted.notify_all();
      group_->slots.erase(seq);
    }
    return comm::WorkHandle(std::make_shared<ThreadWork>(group_, mine, rank_));
  }

  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<comm::Communicator>> MakeThreadCommunicators(
    int world_size, absl::Duration completion_delay) {
  auto group = std::make_shared<Group>(world_size, completion_delay);
  std::vector<std::unique_ptr<comm::Communicator>> comms;
  for (int r = 0; r < world_size; ++r) {
    comms.push_back(std::make_unique<ThreadCommunicator>(group, r));
  }
  return comms;
}

}  // namespace fsdp_test
