// File: comm/ring_all_reduce.cc
#include "comm/ring_all_reduce.h"

#include <vector>

#include "base/status_macros.h"

namespace comm {

RingAllReduce::RingAllReduce(const GroupContext& context, void* buffer, size_t count,
                             Dtype dtype, ReduceOp op, bool direct_reduce_scatter)
    : context_(context), buffer_(buffer), count_(count), dtype_(dtype) {
  std::byte* own_chunk = static_cast<std::byte*>(buffer) +
                         CeilSplitChunk(count, context.size(), context.rank).offset *
                             DtypeSize(dtype);
  if (direct_reduce_scatter) {
    reduce_scatter_ = std::make_unique<DirectReduceScatter>(context, buffer, own_chunk, count,
                                                            dtype, op);
  } else {
    reduce_scatter_ = std::make_unique<RingReduceScatter>(context, buffer, buffer, own_chunk,
                                                          count, dtype, op);
  }
}

absl::StatusOr<bool> RingAllReduce::Step(bool* progressed) {
  if (all_gather_ == nullptr) {
    FSDP_ASSIGN_OR_RETURN(bool reduced, reduce_scatter_->Step(progressed));
    if (!reduced) return false;
    const int n = context_.size();
    std::vector<ElementRange> chunks(n);
    for (int c = 0; c < n; ++c) chunks[c] = CeilSplitChunk(count_, n, c);
    all_gather_ = std::make_unique<RingAllGather>(context_, buffer_, std::move(chunks),
                                                  DtypeSize(dtype_), /*own_input=*/nullptr,
                                                  /*first_tag_step=*/n - 1);
    *progressed = true;
  }
  return all_gather_->Step(progressed);
}

AwaitedPeer RingAllReduce::Awaited() const {
  AwaitedPeer awaited =
      all_gather_ == nullptr ? reduce_scatter_->Awaited() : all_gather_->Awaited();
  awaited.what = absl::StrCat(all_gather_ == nullptr ? "reduce-scatter phase: "
                                                     : "all-gather phase: ",
                              awaited.what);
  return awaited;
}

bool RingAllReduce::HasPendingTransportOps() const {
  return reduce_scatter_->HasPendingTransportOps() ||
         (all_gather_ != nullptr && all_gather_->HasPendingTransportOps());
}

}  // namespace comm
