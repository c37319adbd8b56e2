// File: fsdp/train/unit_collectives.h
//
// What a unit sends, apart from when its state changes (unit_state.cc decides
// that). Each Post* function issues one collective on the caller's buffers in
// their own dtype (fsdp/nn/dtype_buffer.h; PrecisionPolicy's parameter or
// reduce dtype), moved as they are: nothing is staged or converted. It
// returns a PendingCollective; Finish() waits for it (with a deadline, the
// time charged to a CommWaitClock).
//
//   FSDP_ASSIGN_OR_RETURN(PendingCollective gather,
//       PostAllGather(comm, shard, gathered, "unit 3 parameter all-gather"));
//   ... compute ...
//   FSDP_RETURN_IF_ERROR(gather.Finish(timeout, clock, "unit 3 parameter all-gather"));
//
// A bf16 reduction adds in fp32 and rounds to bf16 per hop
// (comm/communicator.h).
//
// World size 1 has an explicit path: the collective is a copy and finishes
// when posted. Empty buffers (a unit without parameters) post nothing.
#ifndef FSDP_TRAIN_UNIT_COLLECTIVES_H_
#define FSDP_TRAIN_UNIT_COLLECTIVES_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/train/comm_wait_clock.h"
#include "fsdp/nn/dtype_buffer.h"

namespace fsdp {

// One collective in flight on a unit's buffers. Move-only. Destroying one
// that is still in flight (a step failed midway) waits for it up to
// kDrainTimeout before its staging buffers are freed.
class PendingCollective {
 public:
  PendingCollective() = default;
  PendingCollective(PendingCollective&&) = default;
  PendingCollective& operator=(PendingCollective&& other);
  ~PendingCollective() { Drain(); }
  static constexpr absl::Duration kDrainTimeout = absl::Seconds(5);

  bool in_flight() const { return work_ != nullptr; }

  // Waits up to `timeout` (blocked time charged to `clock`; errors prefixed
  // with `what`). FailedPrecondition if nothing is in flight.
  absl::Status Finish(absl::Duration timeout, CommWaitClock& clock, absl::string_view what);

 private:
  friend absl::StatusOr<PendingCollective> PostAllGather(comm::Communicator&, ConstDtypeSpan,
                                                         DtypeSpan, absl::string_view);
  friend absl::StatusOr<PendingCollective> PostReduceScatterSum(comm::Communicator&,
                                                                ConstDtypeSpan, DtypeSpan,
                                                                absl::string_view);
  friend absl::StatusOr<PendingCollective> PostAllReduceSum(comm::Communicator&, DtypeSpan);
  void Drain();

  // The bytes a collective moves: the caller's buffers.
  struct Wire {
    absl::Span<const std::byte> input;
    absl::Span<std::byte> output;
  };
  // World size 1: the result is the input; no collective runs.
  void FinishLocally(const Wire& wire);
  // Moves `wire` by an all-gather (or FinishLocally at world size 1).
  absl::Status StartAllGather(comm::Communicator& comm, const Wire& wire);
  // A sum reduce-scatter of `wire` (more than one rank), or a sum all-reduce
  // of `buffer` in place (finished at once for one rank or no bytes).
  absl::Status StartReduceScatterSum(comm::Communicator& comm, const Wire& wire,
                                     comm::Dtype dtype);
  absl::Status StartAllReduceSum(comm::Communicator& comm, absl::Span<std::byte> buffer,
                                 comm::Dtype dtype);

  comm::WorkHandle work_;
};

// All-gather: every rank's `shard` into `gathered` (comm.size() *
// shard.size() elements of the same dtype, rank-major). `shard` may alias its
// own slot of `gathered`.
absl::StatusOr<PendingCollective> PostAllGather(comm::Communicator& comm, ConstDtypeSpan shard,
                                                DtypeSpan gathered, absl::string_view label);

// Sum reduce-scatter in `full`'s dtype: `full` (comm.size() * shard.size()
// elements) summed over ranks, this rank's chunk into `shard`. `shard` may be
// this rank's chunk of `full` itself (in place: nothing staged).
absl::StatusOr<PendingCollective> PostReduceScatterSum(comm::Communicator& comm,
                                                       ConstDtypeSpan full, DtypeSpan shard,
                                                       absl::string_view label);

// Sum all-reduce of `values` in place, in their dtype.
absl::StatusOr<PendingCollective> PostAllReduceSum(comm::Communicator& comm, DtypeSpan values);

}  // namespace fsdp

#endif  // FSDP_TRAIN_UNIT_COLLECTIVES_H_
