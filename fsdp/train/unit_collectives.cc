// File: fsdp/train/unit_collectives.cc
#include "fsdp/train/unit_collectives.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/dtype.h"

namespace fsdp {
namespace {

// A collective that finished when it was posted (world size 1, empty units).
class FinishedWork : public comm::Work {
 public:
  bool Test() override { return true; }
  absl::Status Wait(absl::Duration) override { return absl::OkStatus(); }
};

comm::WorkHandle Finished() { return std::make_shared<FinishedWork>(); }

absl::Status CheckSplit(const comm::Communicator& comm, size_t full_numel, size_t shard_numel,
                        absl::string_view what) {
  const size_t n = static_cast<size_t>(comm.size());
  if (shard_numel * n != full_numel) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": a buffer of ", full_numel, " elements and a shard of ", shard_numel,
        " elements do not split over ", n,
        " ranks; the unit must be padded to a multiple of the shard group size (its ShardPlan)"));
  }
  return absl::OkStatus();
}

}  // namespace

PendingCollective& PendingCollective::operator=(PendingCollective&& other) {
  if (this != &other) {
    Drain();
    work_ = std::move(other.work_);
    other.work_ = nullptr;
  }
  return *this;
}

void PendingCollective::Drain() {
  // A failed collective reports its error at once; a stuck one (peer gone)
  // gets a bounded wait, after which the process is expected to exit.
  if (work_ != nullptr) work_->Wait(kDrainTimeout).IgnoreError();
  work_ = nullptr;
}

absl::Status PendingCollective::Finish(absl::Duration timeout, CommWaitClock& clock,
                                       absl::string_view what) {
  if (work_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": Finish() called with no collective in flight"));
  }
  const absl::Status status = clock.Wait(*work_, timeout, what);
  if (!status.ok()) return status;  // keep work_: the destructor drains it
  work_ = nullptr;
  return absl::OkStatus();
}

void PendingCollective::FinishLocally(const Wire& wire) {
  // memmove: an all-gather's input may alias its slot of the output. In
  // place (one rank's in-place reduce-scatter, or an all-gather from its own
  // slot) the result is already there: no pass over the buffer.
  if (wire.output.data() != wire.input.data()) {
    std::memmove(wire.output.data(), wire.input.data(), wire.input.size());
  }
  work_ = Finished();
}

absl::Status PendingCollective::StartAllGather(comm::Communicator& comm, const Wire& wire) {
  if (comm.size() == 1) {
    FinishLocally(wire);
    return absl::OkStatus();
  }
  comm::AllGatherOptions options;
  options.input = wire.input;
  options.output = wire.output;
  FSDP_ASSIGN_OR_RETURN(work_, comm.AllGather(options));
  return absl::OkStatus();
}

absl::Status PendingCollective::StartReduceScatterSum(comm::Communicator& comm,
                                                      const Wire& wire, comm::Dtype dtype) {
  comm::ReduceScatterOptions options;
  options.input = wire.input;
  options.output = wire.output;
  options.op = comm::ReduceOp::kSum;
  options.dtype = dtype;
  FSDP_ASSIGN_OR_RETURN(work_, comm.ReduceScatter(options));
  return absl::OkStatus();
}

absl::Status PendingCollective::StartAllReduceSum(comm::Communicator& comm,
                                                  absl::Span<std::byte> buffer,
                                                  comm::Dtype dtype) {
  if (buffer.empty() || comm.size() == 1) {
    work_ = Finished();
    return absl::OkStatus();
  }
  comm::AllReduceOptions options;
  options.buffer = buffer;
  options.dtype = dtype;
  options.op = comm::ReduceOp::kSum;
  FSDP_ASSIGN_OR_RETURN(work_, comm.AllReduce(options));
  return absl::OkStatus();
}

absl::StatusOr<PendingCollective> PostAllGather(comm::Communicator& comm, ConstDtypeSpan shard,
                                                DtypeSpan gathered, absl::string_view label) {
  FSDP_CHECK(shard.dtype() == gathered.dtype());
  FSDP_RETURN_IF_ERROR(CheckSplit(comm, gathered.size(), shard.size(), label));
  PendingCollective pending;
  if (gathered.empty()) {
    pending.work_ = Finished();
    return pending;
  }
  FSDP_RETURN_IF_ERROR(
      pending.StartAllGather(comm, PendingCollective::Wire{shard.bytes(), gathered.bytes()}));
  return pending;
}

absl::StatusOr<PendingCollective> PostReduceScatterSum(comm::Communicator& comm,
                                                       ConstDtypeSpan full, DtypeSpan shard,
                                                       absl::string_view label) {
  FSDP_CHECK(full.dtype() == shard.dtype());
  FSDP_RETURN_IF_ERROR(CheckSplit(comm, full.size(), shard.size(), label));
  PendingCollective pending;
  if (full.empty()) {
    pending.work_ = Finished();
    return pending;
  }
  const PendingCollective::Wire wire{full.bytes(), shard.bytes()};
  if (comm.size() == 1) {  // the sum is the input (in place: already there)
    pending.FinishLocally(wire);
    return pending;
  }
  FSDP_RETURN_IF_ERROR(pending.StartReduceScatterSum(comm, wire, full.dtype()));
  return pending;
}

absl::StatusOr<PendingCollective> PostAllReduceSum(comm::Communicator& comm, DtypeSpan values) {
  PendingCollective pending;
  FSDP_RETURN_IF_ERROR(pending.StartAllReduceSum(comm, values.bytes(), values.dtype()));
  return pending;
}

}  // namespace fsdp
