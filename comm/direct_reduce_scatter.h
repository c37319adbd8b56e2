// File: comm/direct_reduce_scatter.h
//
// Direct reduce-scatter, segmented and pipelined: every rank sends chunk q of
// its input straight to rank q, receives its own chunk r from every other
// rank, and reduces the n contributions in one pass.
//
//   rank 0 sends:  c1 -> 1, c2 -> 2, c3 -> 3       (all at once)
//   rank 0 gets:   c0 of ranks 1, 2, 3
//   rank 0 forms:  ((c0[1] + c0[2]) + c0[3]) + c0[0]
//
// Why beside the ring: each rank still sends and receives (n-1)/n of the
// vector, but the reduction reads n inputs and writes one output once,
// instead of n-1 hops that each read two and write one (at 4 ranks: 5 passes
// over a chunk of memory instead of 9). Nothing is forwarded, so no transfer
// waits for another rank to be scheduled first: what matters when several
// ranks share a core. The cost is n-1 concurrent peers per rank, so kAuto
// uses it only for small groups (CommunicatorOptions::direct_max_ranks).
//
// Reduction order (determinism): chunk r is summed in the ring's order,
// starting at rank r+1 and ending with this rank's own contribution, and
// bf16 partial sums are rounded after every addition as when they travel
// between ranks (comm/reduce.h, ReduceSumChain). The result is therefore
// bit-identical to the ring reduce-scatter's, so kAuto may pick either.
//
// What is in flight: chunk r is cut into segments of at most
// max_segment_bytes; from every peer up to kDirectSegmentsInFlight receive
// segments land in a small scratch ring, and segment s is reduced as soon as
// it has arrived from all peers. Sends to each peer are posted in order, at
// most kDirectSegmentsInFlight unfinished. One tag for the whole collective:
// per-pair ordering matches segment s with segment s.
#ifndef COMM_DIRECT_REDUCE_SCATTER_H_
#define COMM_DIRECT_REDUCE_SCATTER_H_

#include <cstddef>
#include <vector>

#include "comm/collective_enums.h"
#include "comm/collective_op.h"
#include "comm/dtype.h"
#include "comm/reduce.h"
#include "comm/ring_schedule.h"
#include "comm/scratch_pool.h"

namespace comm {

inline constexpr size_t kDirectSegmentsInFlight = 4;
// The receive slots of one rank, (n-1) x kDirectSegmentsInFlight segments,
// take at most this many bytes (segments shrink below max_segment_bytes to
// fit): slots that stay in cache until they are reduced save a trip to
// memory, which is what bounds this collective once several ranks share a
// memory system. Measured at 4 ranks on 2 cores, 64 MiB: 256 KiB segments
// (this budget) against 1 MiB ones: see docs/collective-bench.md.
inline constexpr size_t kDirectSlotBudgetBytes = size_t{3} << 20;

// kStreamOutputMinBytes (comm/reduce.h) decides this collective's
// non-temporal stores.

// The segment size of the direct reduce-scatter in a group of `n`.
size_t DirectSegmentElements(size_t max_segment_bytes, size_t element_size, int n);

class DirectReduceScatter : public CollectiveOp {
 public:
  // `input`: count elements of this rank's contribution. `output`: this
  // rank's reduced chunk (ceil-split, comm/ring_schedule.h); it may be
  // exactly chunk r of `input` (in place) and must not overlap it otherwise.
  DirectReduceScatter(const GroupContext& context, const void* input, void* output,
                      size_t count, Dtype dtype, ReduceOp op);

  absl::StatusOr<bool> Step(bool* progressed) override;
  AwaitedPeer Awaited() const override;
  bool HasPendingTransportOps() const override;

 private:
  // One other rank: what goes to it and what comes from it.
  struct Peer {
    int group_rank = 0;
    int global_rank = 0;
    ElementRange send_chunk;   // its chunk of our input
    size_t send_segments = 0;  // segments of send_chunk
    CompletionList sends;
    size_t sends_finished = 0;  // prefix known finished
    CompletionList recvs;       // segments of our chunk from it
  };

  // "send of segment 3 of chunk 2 to rank 2", "recv of segment 3 of chunk 0
  // from rank 1" (chunks in group ranks, peers in global ranks).
  std::string DescribeSend(size_t segment, const Peer& peer) const;
  std::string DescribeRecv(size_t segment, const Peer& peer) const;
  std::byte* Slot(size_t peer_index, size_t segment) const;
  void ReduceSegment(size_t segment);

  GroupContext context_;
  const std::byte* input_;
  std::byte* output_;
  Dtype dtype_;
  size_t element_size_;
  float final_divisor_;
  size_t segment_elements_;
  ElementRange own_chunk_;
  size_t own_segments_ = 0;
  size_t segments_reduced_ = 0;
  bool stream_output_ = false;  // see kStreamOutputMinBytes
  std::vector<Peer> peers_;  // in reduction order: ranks r+1, r+2, ..., r-1
  size_t slot_bytes_ = 0;
  ScratchBuffer slots_;
};

}  // namespace comm

#endif  // COMM_DIRECT_REDUCE_SCATTER_H_
