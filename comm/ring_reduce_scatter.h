// File: comm/ring_reduce_scatter.h
//
// Ring reduce-scatter, segmented and pipelined.
//
//   rank:      0          1          2          3
//   step 0:  [c3]->     [c0]->     [c1]->     [c2]->(0)      own contributions
//   step 1:  [c2+]->    [c3+]->    [c0+]->    [c1+]->(0)     partial sums
//   step 2:  [c1+]->    [c2+]->    [c3+]->    [c0+]->(0)
//   end:      c0         c1         c2         c3            fully reduced
//
// Who owns what: chunks are the ceil-split of the count (comm/ring_schedule.h).
// At step k rank r sends chunk r-k-1 (its own contribution at step 0, else
// the partial sum it produced at step k-1) and receives chunk r-k-2, to which
// it adds its own contribution. At the last step (n-2) it receives chunk r,
// and the sum it forms is final: it goes straight into the output (divided by
// n for kAverage, before the one rounding).
//
// Reduction order (determinism): chunk c is summed along the ring starting at
// rank c+1: ((x[c+1] + x[c+2]) + x[c+3]) + ... + x[c], the same on every call
// for a given count and group size, and the same whether this runs alone or as
// the first half of the ring all-reduce.
//
// What is in flight: up to kRingSegmentsInFlight receive segments land in
// a small scratch ring (one slot per segment in flight); each is reduced into
// its destination as soon as it arrives, while the next ones are in flight,
// and the send of the same segment at the next step follows right after.
// Partial sums live in `partials`: the caller's buffer for the in-place
// all-reduce, or a scratch buffer for the out-of-place reduce-scatter.
#ifndef COMM_RING_REDUCE_SCATTER_H_
#define COMM_RING_REDUCE_SCATTER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "comm/collective_enums.h"
#include "comm/dtype.h"
#include "comm/ring_pipeline.h"
#include "comm/scratch_pool.h"

namespace comm {

class RingReduceScatter : public RingPipeline {
 public:
  // `input`: this rank's contribution, `count` elements. `partials`: count
  // elements where partial sums of other chunks are written; may be `input`
  // itself (in-place all-reduce: then `input` is overwritten). `output`:
  // where this rank's reduced chunk goes (chunk-sized; may be
  // partials + chunk offset).
  RingReduceScatter(const GroupContext& context, const void* input, void* partials,
                    void* output, size_t count, Dtype dtype, ReduceOp op);

 protected:
  const void* SendData(const RingTransfer& send) override;
  void* RecvTarget(const RingTransfer& recv, size_t recv_index) override;
  void OnReceived(const RingTransfer& recv, size_t recv_index) override;

 private:
  const std::byte* input_;
  std::byte* partials_;
  std::byte* output_;
  Dtype dtype_;
  size_t element_size_;
  float final_divisor_;
  size_t output_offset_;  // element offset of this rank's chunk
  size_t slot_bytes_;
  ScratchBuffer recv_slots_;
};

}  // namespace comm

#endif  // COMM_RING_REDUCE_SCATTER_H_
