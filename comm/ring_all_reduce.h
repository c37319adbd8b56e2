// File: comm/ring_all_reduce.h
//
// Ring all-reduce = a reduce-scatter, then ring all-gather, both in place in
// the caller's buffer (comm/ring_reduce_scatter.h or
// comm/direct_reduce_scatter.h, then comm/ring_all_gather.h).
//
// Who owns what: after the reduce-scatter phase (ring: n-1 steps, tag steps
// 0..n-2; direct: tag step 0) rank r holds the final chunk r (ceil-split) in
// its slot of the buffer; the all-gather phase (n-1 steps, tag steps
// n-1..2n-3) circulates the final chunks. Because the first phase is exactly
// the reduce-scatter, and the ring and direct reduce-scatters give the same
// bits, chunk r of an all-reduce is bit-identical to the output of a
// reduce-scatter of the same input on rank r.
//
// What is in flight: within each phase, up to kRingSegmentsInFlight segments
// each way. The all-gather phase starts once every reduce-scatter send has
// finished, because its receives overwrite the chunks those sends read.
#ifndef COMM_RING_ALL_REDUCE_H_
#define COMM_RING_ALL_REDUCE_H_

#include <memory>

#include "comm/direct_reduce_scatter.h"
#include "comm/ring_all_gather.h"
#include "comm/ring_reduce_scatter.h"

namespace comm {

class RingAllReduce : public CollectiveOp {
 public:
  // `direct_reduce_scatter`: the first phase is the direct reduce-scatter
  // instead of the ring's.
  RingAllReduce(const GroupContext& context, void* buffer, size_t count, Dtype dtype,
                ReduceOp op, bool direct_reduce_scatter);

  absl::StatusOr<bool> Step(bool* progressed) override;
  AwaitedPeer Awaited() const override;
  bool HasPendingTransportOps() const override;

 private:
  GroupContext context_;
  void* buffer_;
  size_t count_;
  Dtype dtype_;
  std::unique_ptr<CollectiveOp> reduce_scatter_;
  std::unique_ptr<RingAllGather> all_gather_;  // created when the first phase ends
};

}  // namespace comm

#endif  // COMM_RING_ALL_REDUCE_H_
