// File: comm/ring_all_gather.cc
#include "comm/ring_all_gather.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/status_macros.h"

namespace comm {

RingAllGather::RingAllGather(const GroupContext& context, void* output,
                             std::vector<ElementRange> chunks, size_t element_size,
                             const void* own_input, int first_tag_step)
    : RingPipeline(context, first_tag_step, element_size,
                   BuildRingTransfers(chunks, context.rank, /*reduce_scatter_order=*/false,
                                      SegmentElements(context.max_segment_bytes, element_size))),
      output_(static_cast<std::byte*>(output)),
      element_size_(element_size),
      own_offset_(chunks[context.rank].offset),
      copy_segment_bytes_(std::max<size_t>(context.max_segment_bytes, 1)) {
  const ElementRange& own = chunks[context.rank];
  std::byte* slot = output_ + own.offset * element_size_;
  if (own_input != nullptr && own_input != slot && own.count > 0) {
    own_input_ = static_cast<const std::byte*>(own_input);
    own_copy_bytes_ = own.count * element_size_;
  }
}

absl::StatusOr<bool> RingAllGather::Step(bool* progressed) {
  FSDP_ASSIGN_OR_RETURN(bool transfers_done, RingPipeline::Step(progressed));
  // The local copy of this rank's input into its slot, one segment per call
  // after the transfers are posted: the neighbour reads the input itself
  // meanwhile (step 0 sends from it), and posting the collective stays
  // cheap instead of copying the whole input first.
  if (copied_bytes_ < own_copy_bytes_) {
    const size_t bytes = std::min(copy_segment_bytes_, own_copy_bytes_ - copied_bytes_);
    std::memcpy(output_ + own_offset_ * element_size_ + copied_bytes_,
                own_input_ + copied_bytes_, bytes);
    copied_bytes_ += bytes;
    *progressed = true;
  }
  return transfers_done && copied_bytes_ == own_copy_bytes_;
}

const void* RingAllGather::SendData(const RingTransfer& send) {
  // Only step 0 sends this rank's own chunk; later steps forward received
  // chunks, which are in the output.
  if (send.step == 0 && own_input_ != nullptr) {
    return own_input_ + (send.offset - own_offset_) * element_size_;
  }
  return output_ + send.offset * element_size_;
}

void* RingAllGather::RecvTarget(const RingTransfer& recv, size_t) {
  return output_ + recv.offset * element_size_;
}

}  // namespace comm
