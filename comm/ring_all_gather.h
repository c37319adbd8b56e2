// File: comm/ring_all_gather.h
//
// Ring all-gather, segmented and pipelined (bandwidth-optimal: every rank
// sends and receives (n-1)/n of the output once).
//
//   rank:      0        1        2        3
//   step 0:  [c0]->   [c1]->   [c2]->   [c3]->(0)
//   step 1:  [c3]->   [c0]->   [c1]->   [c2]->(0)
//   step 2:  [c2]->   [c3]->   [c0]->   [c1]->(0)
//
// Who owns what: before step 0 rank r holds chunk r (its own input; step 0
// sends straight from it, and it is copied into its slot of the output
// segment by segment while the transfers run, unless it already is there). At step k it
// sends chunk r-k to r+1 and receives chunk r-k-1 from r-1 straight into the
// output (no staging copy); after step k it holds chunks r-k-1 .. r. After
// n-1 steps it holds all n.
//
// What is in flight: each chunk is cut into segments of at most
// max_segment_bytes. Up to kRingSegmentsInFlight receives are posted ahead;
// segment s of step k is forwarded as soon as segment s of step k-1 has
// arrived, so a large chunk streams around the ring instead of moving one
// whole chunk per step.
//
// Chunks may differ in size (all-reduce's all-gather phase uses the
// ceil-split of comm/ring_schedule.h); empty chunks send nothing.
#ifndef COMM_RING_ALL_GATHER_H_
#define COMM_RING_ALL_GATHER_H_

#include <cstddef>
#include <vector>

#include "comm/ring_pipeline.h"

namespace comm {

class RingAllGather : public RingPipeline {
 public:
  // `output`: the whole buffer; `chunks`: element ranges of each rank's chunk
  // in it (one per group rank); `own_input`: this rank's contribution, which
  // must stay valid and unchanged until the collective finishes; it is
  // copied into its chunk during Step() unless it already is that memory
  // (nullptr means "in place already").
  RingAllGather(const GroupContext& context, void* output, std::vector<ElementRange> chunks,
                size_t element_size, const void* own_input, int first_tag_step = 0);

  absl::StatusOr<bool> Step(bool* progressed) override;

 protected:
  const void* SendData(const RingTransfer& send) override;
  void* RecvTarget(const RingTransfer& recv, size_t recv_index) override;
  void OnReceived(const RingTransfer&, size_t) override {}

 private:
  std::byte* output_;
  size_t element_size_;
  size_t own_offset_;                   // element offset of this rank's chunk
  const std::byte* own_input_ = nullptr;  // set while a local copy is due
  size_t own_copy_bytes_ = 0;
  size_t copied_bytes_ = 0;
  size_t copy_segment_bytes_;
};

}  // namespace comm

#endif  // COMM_RING_ALL_GATHER_H_
