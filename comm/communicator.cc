// File: comm/communicator.cc
#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "comm/algorithm_choice.h"
#include "comm/barrier.h"
#include "comm/broadcast.h"
#include "comm/communicator_impl.h"
#include "comm/direct_all_gather.h"
#include "comm/direct_reduce_scatter.h"
#include "comm/recursive_doubling_all_reduce.h"
#include "comm/ring_all_gather.h"
#include "comm/ring_all_reduce.h"
#include "comm/ring_reduce_scatter.h"
#include "comm/ring_schedule.h"
#include "comm/shift.h"
#include "comm/tag.h"
#include "comm/transport.h"

namespace comm {
namespace {

// A collective that owns memory its inner algorithm uses: a scratch buffer
// (the out-of-place ring reduce-scatter's partial sums) or the buffers of an
// internal collective (Split's exchange), which must outlive every transport
// operation even when the caller stops waiting.
class WithScratch : public CollectiveOp {
 public:
  WithScratch(ScratchBuffer scratch, std::unique_ptr<CollectiveOp> inner,
              std::shared_ptr<void> keep_alive = nullptr)
      : keep_alive_(std::move(keep_alive)),
        scratch_(std::move(scratch)),
        inner_(std::move(inner)) {}
  absl::StatusOr<bool> Step(bool* progressed) override { return inner_->Step(progressed); }
  AwaitedPeer Awaited() const override { return inner_->Awaited(); }
  bool HasPendingTransportOps() const override { return inner_->HasPendingTransportOps(); }

 private:
  // Declared before inner_: destroyed after it.
  std::shared_ptr<void> keep_alive_;
  ScratchBuffer scratch_;
  std::unique_ptr<CollectiveOp> inner_;
};

bool AllOnOneHost(const Transport& transport, const std::vector<int>& global_ranks) {
  for (int g : global_ranks) {
    if (transport.HostIndex(g) != transport.HostIndex(global_ranks.front())) return false;
  }
  return true;
}

bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto pa = reinterpret_cast<uintptr_t>(a);
  auto pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

absl::Status CheckWholeElements(const char* op, const char* what, size_t num_bytes,
                                Dtype dtype) {
  if (num_bytes % DtypeSize(dtype) == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": ", what, " has ", num_bytes, " bytes, not a whole number of ", DtypeName(dtype),
      " elements (", DtypeSize(dtype), " bytes each): pass the right dtype or buffer"));
}

// int64 data are exact sums; an average would need a division that no longer
// is exact, so the caller scales the integers' result itself.
absl::Status CheckReduceOp(const char* op, Dtype dtype, ReduceOp reduce_op) {
  if (dtype != Dtype::kInt64 || reduce_op == ReduceOp::kSum) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": int64 data can only be summed (ReduceOp::kSum), not averaged: sum them and "
      "scale the result"));
}

}  // namespace

CommunicatorImpl::CommunicatorImpl(std::shared_ptr<ProgressEngine> engine,
                                   std::vector<int> global_ranks, int rank, uint32_t id,
                                   const CommunicatorOptions& options)
    : engine_(std::move(engine)),
      global_ranks_(std::move(global_ranks)),
      rank_(rank),
      id_(id),
      options_(options),
      on_one_host_(AllOnOneHost(*engine_->transport(), global_ranks_)) {}

std::string CommunicatorImpl::Where() const {
  return absl::StrFormat("rank %d (group rank %d of %d, communicator 0x%x)",
                         global_ranks_[rank_], rank_, size(), id_);
}

CommunicatorImpl::Posting CommunicatorImpl::NextPosting(const char* op_name) {
  uint32_t sequence;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sequence = next_sequence_++;
  }
  Posting posting;
  posting.context.transport = engine_->transport();
  posting.context.global_ranks = global_ranks_;
  posting.context.rank = rank_;
  posting.context.tag_base = CollectiveTagBase(id_, sequence);
  posting.context.max_segment_bytes = options_.max_segment_bytes;
  posting.context.scratch_pool = engine_->scratch_pool();
  posting.description =
      absl::StrFormat("%s #%u on communicator 0x%x (group rank %d of %d, tag 0x%x)", op_name,
                      sequence, id_, rank_, size(), posting.context.tag_base);
  return posting;
}

absl::StatusOr<WorkHandle> CommunicatorImpl::AllGather(const AllGatherOptions& options) {
  return PostAllGather(options, nullptr);
}

absl::StatusOr<WorkHandle> CommunicatorImpl::PostAllGather(const AllGatherOptions& options,
                                                           std::shared_ptr<void> keep_alive) {
  const size_t n = static_cast<size_t>(size());
  const size_t input_bytes = options.input.size();
  if (options.output.size() != n * input_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "all_gather on ", Where(), ": output has ", options.output.size(),
        " bytes but must hold group size ", n, " x input ", input_bytes, " = ",
        n * input_bytes, " bytes"));
  }
  std::byte* own_slot = options.output.data() + static_cast<size_t>(rank_) * input_bytes;
  if (options.input.data() != own_slot &&
      Overlap(options.input.data(), input_bytes, options.output.data(), options.output.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "all_gather on ", Where(), ": input overlaps output other than exactly at this "
        "rank's slot (byte offset ", rank_ * input_bytes, "); use separate buffers"));
  }
  Posting posting = NextPosting("all_gather");
  if (n == 1 || input_bytes == 0) {
    if (input_bytes > 0 && options.input.data() != own_slot) {
      std::memcpy(own_slot, options.input.data(), input_bytes);
    }
    return ProgressEngine::Finished(absl::OkStatus());
  }
  std::unique_ptr<CollectiveOp> op;
  if (UseLatencyAlgorithm(options.algorithm, options.output.size(),
                          options_.small_message_bytes)) {
    op = std::make_unique<DirectAllGather>(posting.context, options.input.data(),
                                           options.output.data(), input_bytes);
  } else {
    std::vector<ElementRange> chunks(n);
    for (size_t c = 0; c < n; ++c) chunks[c] = {c * input_bytes, input_bytes};
    op = std::make_unique<RingAllGather>(posting.context, options.output.data(),
                                         std::move(chunks), /*element_size=*/1,
                                         options.input.data());
  }
  if (keep_alive != nullptr) {
    op = std::make_unique<WithScratch>(ScratchBuffer(), std::move(op), std::move(keep_alive));
  }
  return engine_->Submit(std::move(op), std::move(posting.description));
}

absl::StatusOr<WorkHandle> CommunicatorImpl::ReduceScatter(
    const ReduceScatterOptions& options) {
  FSDP_RETURN_IF_ERROR(CheckWholeElements("reduce_scatter", "input", options.input.size(),
                                          options.dtype));
  FSDP_RETURN_IF_ERROR(CheckReduceOp("reduce_scatter", options.dtype, options.op));
  const size_t element_size = DtypeSize(options.dtype);
  const size_t count = options.input.size() / element_size;
  const ElementRange own = CeilSplitChunk(count, size(), rank_);
  const size_t own_bytes = own.count * element_size;
  if (options.output.size() < own_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduce_scatter on ", Where(), ": output has ", options.output.size(),
        " bytes but this rank's chunk is ", own.count, " ", DtypeName(options.dtype),
        " elements (", own_bytes, " bytes) of ", count,
        " split in ceil-sized chunks over ", size(), " ranks"));
  }
  const std::byte* own_input = options.input.data() + own.offset * element_size;
  if (options.output.data() != own_input &&
      Overlap(options.input.data(), options.input.size(), options.output.data(), own_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduce_scatter on ", Where(), ": output overlaps input other than exactly at "
        "this rank's chunk (byte offset ", own.offset * element_size,
        "); use separate buffers"));
  }
  Posting posting = NextPosting("reduce_scatter");
  if (size() == 1 || count == 0) {
    if (own_bytes > 0 && options.output.data() != own_input) {
      std::memcpy(options.output.data(), own_input, own_bytes);
    }
    return ProgressEngine::Finished(absl::OkStatus());
  }
  std::unique_ptr<CollectiveOp> op;
  if (UseLatencyAlgorithm(options.algorithm, options.input.size(),
                          options_.small_message_bytes)) {
    op = std::make_unique<RecursiveDoublingReduceScatter>(
        posting.context, options.input.data(), options.output.data(), count, options.dtype,
        options.op);
  } else if (UseDirectAlgorithm(options.algorithm, size(), options_.direct_max_ranks,
                                on_one_host_)) {
    op = std::make_unique<DirectReduceScatter>(posting.context, options.input.data(),
                                               options.output.data(), count, options.dtype,
                                               options.op);
  } else {
    ScratchBuffer partials = posting.context.scratch_pool->Acquire(options.input.size());
    auto ring = std::make_unique<RingReduceScatter>(
        posting.context, options.input.data(), partials.data(), options.output.data(), count,
        options.dtype, options.op);
    op = std::make_unique<WithScratch>(std::move(partials), std::move(ring));
  }
  return engine_->Submit(std::move(op), std::move(posting.description));
}

absl::StatusOr<WorkHandle> CommunicatorImpl::AllReduce(const AllReduceOptions& options) {
  FSDP_RETURN_IF_ERROR(CheckWholeElements("all_reduce", "buffer", options.buffer.size(),
                                          options.dtype));
  FSDP_RETURN_IF_ERROR(CheckReduceOp("all_reduce", options.dtype, options.op));
  const size_t count = options.buffer.size() / DtypeSize(options.dtype);
  Posting posting = NextPosting("all_reduce");
  if (size() == 1 || count == 0) return ProgressEngine::Finished(absl::OkStatus());
  std::unique_ptr<CollectiveOp> op;
  if (UseLatencyAlgorithm(options.algorithm, options.buffer.size(),
                          options_.small_message_bytes)) {
    op = std::make_unique<RecursiveDoublingAllReduce>(posting.context, options.buffer.data(),
                                                      count, options.dtype, options.op);
  } else {
    op = std::make_unique<RingAllReduce>(
        posting.context, options.buffer.data(), count, options.dtype, options.op,
        UseDirectAlgorithm(options.algorithm, size(), options_.direct_max_ranks, on_one_host_));
  }
  return engine_->Submit(std::move(op), std::move(posting.description));
}

absl::StatusOr<WorkHandle> CommunicatorImpl::Broadcast(const BroadcastOptions& options) {
  if (options.root < 0 || options.root >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast on ", Where(), ": root ",
                                                   options.root, " is not a group rank in [0, ",
                                                   size(), ")"));
  }
  Posting posting = NextPosting("broadcast");
  if (size() == 1 || options.buffer.empty()) return ProgressEngine::Finished(absl::OkStatus());
  return engine_->Submit(std::make_unique<BinomialBroadcast>(posting.context,
                                                             options.buffer.data(),
                                                             options.buffer.size(),
                                                             options.root),
                         std::move(posting.description));
}

absl::StatusOr<WorkHandle> CommunicatorImpl::Shift(const ShiftOptions& options) {
  if (options.input.size() != options.output.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shift on ", Where(), ": input has ", options.input.size(),
                     " bytes and output ", options.output.size(), "; they must be the same size"));
  }
  if (Overlap(options.input.data(), options.input.size(), options.output.data(),
              options.output.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("shift on ", Where(), ": input and output overlap; use separate buffers"));
  }
  const int n = size();
  if (n > 1 && PositiveMod(options.distance, n) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shift on ", Where(), ": distance ", options.distance, " is a multiple of the group size ",
        n, ", so every rank would send to itself"));
  }
  Posting posting = NextPosting("shift");
  if (n == 1 || options.input.empty()) {
    if (!options.input.empty()) {
      std::memcpy(options.output.data(), options.input.data(), options.input.size());
    }
    return ProgressEngine::Finished(absl::OkStatus());
  }
  return engine_->Submit(
      std::make_unique<comm::Shift>(posting.context, options.input.data(), options.output.data(),
                                    options.input.size(), options.distance),
      std::move(posting.description));
}

absl::StatusOr<WorkHandle> CommunicatorImpl::Barrier() {
  Posting posting = NextPosting("barrier");
  if (size() == 1) return ProgressEngine::Finished(absl::OkStatus());
  return engine_->Submit(std::make_unique<DisseminationBarrier>(posting.context),
                         std::move(posting.description));
}

absl::StatusOr<std::unique_ptr<Communicator>> CommunicatorImpl::Split(int color, int key,
                                                                      absl::Duration timeout) {
  uint32_t split_sequence;
  {
    std::lock_guard<std::mutex> lock(mu_);
    split_sequence = next_split_++;
  }
  // Everyone learns everyone's (color, key) with one all-gather. Its buffers
  // live on the heap, owned by the collective too: if the wait below times
  // out, the exchange stays in flight and must not write into a dead stack.
  const int n = size();
  struct Exchange {
    int32_t mine[2];
    std::vector<int32_t> all;
  };
  auto exchange = std::make_shared<Exchange>();
  exchange->mine[0] = color;
  exchange->mine[1] = key;
  exchange->all.resize(2 * static_cast<size_t>(n));
  const std::vector<int32_t>& all = exchange->all;
  AllGatherOptions gather;
  gather.input = absl::Span<const std::byte>(
      reinterpret_cast<const std::byte*>(exchange->mine), sizeof(exchange->mine));
  gather.output = AsBytes(absl::MakeSpan(exchange->all));
  FSDP_ASSIGN_OR_RETURN(WorkHandle work, PostAllGather(gather, exchange));
  absl::Status gathered = work->Wait(timeout);
  if (!gathered.ok()) {
    return absl::Status(gathered.code(),
                        absl::StrCat("split(color ", color, ", key ", key, ") on ", Where(),
                                     ": exchanging colors: ", gathered.message()));
  }
  std::vector<int> members;  // group ranks of this communicator with my color
  for (int r = 0; r < n; ++r) {
    if (all[2 * r] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[2 * a + 1] < all[2 * b + 1];  // by key; ties keep rank order
  });
  std::vector<int> child_global;
  int child_rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == rank_) child_rank = static_cast<int>(i);
    child_global.push_back(global_ranks_[members[i]]);
  }
  FSDP_CHECK(child_rank >= 0);
  return std::unique_ptr<Communicator>(new CommunicatorImpl(
      engine_, std::move(child_global), child_rank,
      ChildCommunicatorId(id_, split_sequence, color), options_));
}

absl::Status CheckTransportAndOptions(const Transport* transport,
                                     const CommunicatorOptions& options) {
  if (transport == nullptr) return absl::InvalidArgumentError("transport is null");
  if (transport->world_size() < 1 || transport->rank() < 0 ||
      transport->rank() >= transport->world_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport reports rank ", transport->rank(), " of world size ",
        transport->world_size(), "; need 0 <= rank < world size"));
  }
  if (options.max_segment_bytes == 0) {
    return absl::InvalidArgumentError(
        "max_segment_bytes is 0; use at least a few KiB (default 1 MiB)");
  }
  if (options.hang_timeout.has_value() && *options.hang_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hang_timeout is ", absl::FormatDuration(*options.hang_timeout),
        "; it must be positive (absl::InfiniteDuration() turns hang detection off)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateWorldCommunicator(
    std::shared_ptr<ProgressEngine> engine, const CommunicatorOptions& options) {
  Transport* transport = engine->transport();
  std::vector<int> global_ranks(transport->world_size());
  std::iota(global_ranks.begin(), global_ranks.end(), 0);
  return std::unique_ptr<Communicator>(new CommunicatorImpl(
      std::move(engine), std::move(global_ranks), transport->rank(), kWorldCommunicatorId,
      options));
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::CreateOverTransport(
    Transport* transport, const CommunicatorOptions& options) {
  absl::Status valid = CheckTransportAndOptions(transport, options);
  if (!valid.ok()) {
    return absl::Status(valid.code(), absl::StrCat("CreateOverTransport: ", valid.message()));
  }
  return CreateWorldCommunicator(ProgressEngine::Create(transport, options.wait_spin), options);
}

}  // namespace comm
