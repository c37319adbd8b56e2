// File: comm/ring_pipeline.h
//
// The segment pipeline shared by the ring all-gather and reduce-scatter
// (comm/ring_all_gather.h, comm/ring_reduce_scatter.h): the machinery, not the
// algorithm. An algorithm lists the transfers of its ring in order (step k,
// segment s) and says where each send reads, where each receive lands and
// what happens when a receive arrives.
//
// Rules the pipeline enforces:
// - receives from the left neighbour are posted in order, at most
//   kRingSegmentsInFlight ahead of the last one processed, and processed in
//   order (OnReceived, e.g. a reduction, runs while later segments are still
//   in flight);
// - sends to the right neighbour are posted in order, at most
//   kRingSegmentsInFlight unfinished; the send of (step k, segment s), k >= 1,
//   waits until the receive of (step k-1, segment s) has been processed,
//   because it forwards that data.
// Both sides post the same sequence under one tag per step, so the
// transport's per-pair ordering matches segment s with segment s.
#ifndef COMM_RING_PIPELINE_H_
#define COMM_RING_PIPELINE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/collective_op.h"
#include "comm/ring_schedule.h"

namespace comm {

inline constexpr size_t kRingSegmentsInFlight = 4;

struct RingTransfer {
  int step = 0;         // ring step
  int chunk = 0;        // chunk moved
  size_t segment = 0;   // segment index within the chunk
  size_t offset = 0;    // first element, in the whole buffer
  size_t count = 0;     // elements
  long depends_on = -1; // sends: receive index that must be processed first
};

// The transfers of a ring over `chunks` (element ranges of the whole buffer):
// at step k rank sends chunk send_chunk(k) and receives recv_chunk(k), with
// recv_chunk(k-1) == send_chunk(k).
struct RingTransfers {
  std::vector<RingTransfer> sends;
  std::vector<RingTransfer> recvs;
};
RingTransfers BuildRingTransfers(const std::vector<ElementRange>& chunks, int rank,
                                 bool reduce_scatter_order, size_t segment_elements);

class RingPipeline : public CollectiveOp {
 public:
  // `first_tag_step`: the tag step of ring step 0 (all-reduce runs its
  // all-gather with steps after its reduce-scatter's).
  RingPipeline(const GroupContext& context, int first_tag_step, size_t element_size,
               RingTransfers transfers);

  absl::StatusOr<bool> Step(bool* progressed) override;
  AwaitedPeer Awaited() const override;
  bool HasPendingTransportOps() const override;

 protected:
  virtual const void* SendData(const RingTransfer& send) = 0;
  virtual void* RecvTarget(const RingTransfer& recv, size_t recv_index) = 0;
  virtual void OnReceived(const RingTransfer& recv, size_t recv_index) = 0;

  const GroupContext& context() const { return context_; }

 private:
  std::string Describe(const char* kind, const RingTransfer& transfer) const;

  GroupContext context_;
  int first_tag_step_;
  size_t element_size_;
  int left_global_;
  int right_global_;
  RingTransfers transfers_;
  CompletionList send_completions_;
  CompletionList recv_completions_;
  size_t recvs_processed_ = 0;
  size_t sends_finished_ = 0;  // prefix of sends known finished
};

}  // namespace comm

#endif  // COMM_RING_PIPELINE_H_
