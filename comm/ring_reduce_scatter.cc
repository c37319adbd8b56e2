// File: comm/ring_reduce_scatter.cc
#include "comm/ring_reduce_scatter.h"

#include <algorithm>

#include "comm/reduce.h"

namespace comm {
namespace {

std::vector<ElementRange> CeilSplit(size_t count, int n) {
  std::vector<ElementRange> chunks(n);
  for (int c = 0; c < n; ++c) chunks[c] = CeilSplitChunk(count, n, c);
  return chunks;
}

}  // namespace

RingReduceScatter::RingReduceScatter(const GroupContext& context, const void* input,
                                     void* partials, void* output, size_t count, Dtype dtype,
                                     ReduceOp op)
    : RingPipeline(context, /*first_tag_step=*/0, DtypeSize(dtype),
                   BuildRingTransfers(CeilSplit(count, context.size()), context.rank,
                                      /*reduce_scatter_order=*/true,
                                      SegmentElements(context.max_segment_bytes,
                                                      DtypeSize(dtype)))),
      input_(static_cast<const std::byte*>(input)),
      partials_(static_cast<std::byte*>(partials)),
      output_(static_cast<std::byte*>(output)),
      dtype_(dtype),
      element_size_(DtypeSize(dtype)),
      final_divisor_(op == ReduceOp::kAverage ? static_cast<float>(context.size()) : 1.0f),
      output_offset_(CeilSplitChunk(count, context.size(), context.rank).offset) {
  size_t slot_elements =
      std::min(SegmentElements(context.max_segment_bytes, element_size_),
               CeilChunkCount(count, context.size()));
  slot_bytes_ = slot_elements * element_size_;
  if (slot_bytes_ > 0) {
    recv_slots_ = context.scratch_pool->Acquire(slot_bytes_ * kRingSegmentsInFlight);
  }
}

const void* RingReduceScatter::SendData(const RingTransfer& send) {
  // Step 0 forwards this rank's own contribution; later steps forward the
  // partial sum formed when the same chunk arrived one step earlier.
  const std::byte* base = send.step == 0 ? input_ : partials_;
  return base + send.offset * element_size_;
}

void* RingReduceScatter::RecvTarget(const RingTransfer&, size_t recv_index) {
  // The pipeline posts receive i only after receive i - kRingSegmentsInFlight
  // was processed, so slot i % kRingSegmentsInFlight is free again.
  return recv_slots_.data() + (recv_index % kRingSegmentsInFlight) * slot_bytes_;
}

void RingReduceScatter::OnReceived(const RingTransfer& recv, size_t recv_index) {
  const std::byte* received =
      recv_slots_.data() + (recv_index % kRingSegmentsInFlight) * slot_bytes_;
  const std::byte* own = input_ + recv.offset * element_size_;
  const bool last_step = recv.step == context().size() - 2;
  std::byte* destination = last_step
                               ? output_ + (recv.offset - output_offset_) * element_size_
                               : partials_ + recv.offset * element_size_;
  const float divisor = last_step ? final_divisor_ : 1.0f;
  if (destination == own) {
    ReduceSumInPlace(dtype_, received, destination, recv.count, divisor);
  } else {
    ReduceSum(dtype_, received, own, destination, recv.count, divisor);
  }
}

}  // namespace comm
