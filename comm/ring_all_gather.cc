// File: comm/ring_all_gather.cc
#include "comm/ring_all_gather.h"

#include <cstring>
#include <utility>

namespace comm {

RingAllGather::RingAllGather(const GroupContext& context, void* output,
                             std::vector<ElementRange> chunks, size_t element_size,
                             const void* own_input, int first_tag_step)
    : RingPipeline(context, first_tag_step, element_size,
                   BuildRingTransfers(chunks, context.rank, /*reduce_scatter_order=*/false,
                                      SegmentElements(context.max_segment_bytes, element_size))),
      output_(static_cast<std::byte*>(output)),
      element_size_(element_size) {
  const ElementRange& own = chunks[context.rank];
  std::byte* slot = output_ + own.offset * element_size_;
  if (own_input != nullptr && own_input != slot && own.count > 0) {
    std::memcpy(slot, own_input, own.count * element_size_);
  }
}

const void* RingAllGather::SendData(const RingTransfer& send) {
  return output_ + send.offset * element_size_;
}

void* RingAllGather::RecvTarget(const RingTransfer& recv, size_t) {
  return output_ + recv.offset * element_size_;
}

}  // namespace comm
