// File: comm/direct_reduce_scatter.cc
#include "comm/direct_reduce_scatter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/reduce.h"
#include "comm/tag.h"

namespace comm {

size_t DirectSegmentElements(size_t max_segment_bytes, size_t element_size, int n) {
  const size_t budget =
      kDirectSlotBudgetBytes / (static_cast<size_t>(std::max(n - 1, 1)) * kDirectSegmentsInFlight);
  return SegmentElements(std::min(max_segment_bytes, budget), element_size);
}

DirectReduceScatter::DirectReduceScatter(const GroupContext& context, const void* input,
                                         void* output, size_t count, Dtype dtype, ReduceOp op)
    : context_(context),
      input_(static_cast<const std::byte*>(input)),
      output_(static_cast<std::byte*>(output)),
      dtype_(dtype),
      element_size_(DtypeSize(dtype)),
      final_divisor_(op == ReduceOp::kAverage ? static_cast<float>(context.size()) : 1.0f),
      segment_elements_(
          DirectSegmentElements(context.max_segment_bytes, DtypeSize(dtype), context.size())),
      own_chunk_(CeilSplitChunk(count, context.size(), context.rank)) {
  const int n = context.size();
  own_segments_ = SegmentCount(own_chunk_.count, segment_elements_);
  const std::byte* own_input = input_ + own_chunk_.offset * element_size_;
  stream_output_ = dtype == Dtype::kFloat32 && output_ != own_input &&
                   own_chunk_.count * element_size_ >= kStreamOutputMinBytes;
  peers_.resize(n - 1);
  for (int distance = 1; distance < n; ++distance) {
    Peer& peer = peers_[distance - 1];
    peer.group_rank = PositiveMod(context.rank + distance, n);
    peer.global_rank = context.global(peer.group_rank);
    peer.send_chunk = CeilSplitChunk(count, n, peer.group_rank);
    peer.send_segments = SegmentCount(peer.send_chunk.count, segment_elements_);
  }
  slot_bytes_ = std::min(segment_elements_, own_chunk_.count) * element_size_;
  if (slot_bytes_ > 0) {
    slots_ = context.scratch_pool->Acquire(slot_bytes_ * kDirectSegmentsInFlight * (n - 1));
  }
}

std::string DirectReduceScatter::DescribeSend(size_t segment, const Peer& peer) const {
  return absl::StrCat("send of segment ", segment, " of chunk ", peer.group_rank, " to rank ",
                      peer.global_rank);
}

std::string DirectReduceScatter::DescribeRecv(size_t segment, const Peer& peer) const {
  return absl::StrCat("recv of segment ", segment, " of chunk ", context_.rank, " from rank ",
                      peer.global_rank);
}

std::byte* DirectReduceScatter::Slot(size_t peer_index, size_t segment) const {
  return slots_.data() +
         (peer_index * kDirectSegmentsInFlight + segment % kDirectSegmentsInFlight) * slot_bytes_;
}

void DirectReduceScatter::ReduceSegment(size_t segment) {
  const ElementRange seg = SegmentOf(own_chunk_.count, segment_elements_, segment);
  // Ring order: ranks r+1, ..., r-1, then this rank's own contribution.
  std::vector<const void*> inputs;
  inputs.reserve(peers_.size() + 1);
  for (size_t p = 0; p < peers_.size(); ++p) inputs.push_back(Slot(p, segment));
  inputs.push_back(input_ + (own_chunk_.offset + seg.offset) * element_size_);
  ReduceSumChain(dtype_, inputs.data(), inputs.size(), output_ + seg.offset * element_size_,
                 seg.count, final_divisor_, stream_output_);
}

absl::StatusOr<bool> DirectReduceScatter::Step(bool* progressed) {
  Transport& transport = *context_.transport;
  const uint64_t tag = TagForStep(context_.tag_base, 0);

  // Reduce every segment that has arrived from all peers, in order.
  while (segments_reduced_ < own_segments_) {
    const size_t s = segments_reduced_;
    bool all_arrived = true;
    for (const Peer& peer : peers_) {
      if (peer.recvs.size() <= s || !peer.recvs.at(s).done) {
        all_arrived = false;
        break;
      }
    }
    if (!all_arrived) break;
    const size_t expected =
        SegmentOf(own_chunk_.count, segment_elements_, s).count * element_size_;
    for (const Peer& peer : peers_) {
      std::string what = DescribeRecv(s, peer);
      FSDP_RETURN_IF_ERROR(CompletionStatus(peer.recvs.at(s), what));
      FSDP_RETURN_IF_ERROR(CheckReceivedBytes(peer.recvs.at(s), expected, what));
    }
    ReduceSegment(s);
    ++segments_reduced_;
    *progressed = true;
  }

  for (size_t p = 0; p < peers_.size(); ++p) {
    Peer& peer = peers_[p];
    while (peer.sends_finished < peer.sends.size() && peer.sends.at(peer.sends_finished).done) {
      FSDP_RETURN_IF_ERROR(CompletionStatus(peer.sends.at(peer.sends_finished),
                                            DescribeSend(peer.sends_finished, peer)));
      ++peer.sends_finished;
      *progressed = true;
    }
    // Receives first, so data can land as soon as it is sent. Segment s
    // reuses the slot of s - kDirectSegmentsInFlight, reduced by now.
    while (peer.recvs.size() < own_segments_ &&
           peer.recvs.size() < segments_reduced_ + kDirectSegmentsInFlight) {
      const size_t s = peer.recvs.size();
      const size_t bytes = SegmentOf(own_chunk_.count, segment_elements_, s).count * element_size_;
      Completion* completion = peer.recvs.Add();
      absl::Status posted = transport.PostRecv(peer.global_rank, tag, Slot(p, s), bytes,
                                               completion);
      if (!posted.ok()) {
        completion->done = true;  // never posted: nothing will write it
        return absl::Status(posted.code(), absl::StrCat("posting ", DescribeRecv(s, peer),
                                                        ": ", posted.message()));
      }
      *progressed = true;
    }
    while (peer.sends.size() < peer.send_segments &&
           peer.sends.size() < peer.sends_finished + kDirectSegmentsInFlight) {
      const size_t s = peer.sends.size();
      const ElementRange seg = SegmentOf(peer.send_chunk.count, segment_elements_, s);
      Completion* completion = peer.sends.Add();
      absl::Status posted = transport.PostSend(
          peer.global_rank, tag, input_ + (peer.send_chunk.offset + seg.offset) * element_size_,
          seg.count * element_size_, completion);
      if (!posted.ok()) {
        completion->done = true;
        return absl::Status(posted.code(), absl::StrCat("posting ", DescribeSend(s, peer),
                                                        ": ", posted.message()));
      }
      *progressed = true;
    }
  }

  if (segments_reduced_ < own_segments_) return false;
  for (const Peer& peer : peers_) {
    if (peer.sends_finished < peer.send_segments) return false;
  }
  return true;
}

AwaitedPeer DirectReduceScatter::Awaited() const {
  for (const Peer& peer : peers_) {
    const size_t s = segments_reduced_;
    if (s < own_segments_ && (peer.recvs.size() <= s || !peer.recvs.at(s).done)) {
      return {peer.global_rank, DescribeRecv(s, peer)};
    }
  }
  for (const Peer& peer : peers_) {
    if (peer.sends_finished < peer.send_segments) {
      return {peer.global_rank, DescribeSend(peer.sends_finished, peer)};
    }
  }
  return {};
}

bool DirectReduceScatter::HasPendingTransportOps() const {
  for (const Peer& peer : peers_) {
    if (peer.sends.AnyPending() || peer.recvs.AnyPending()) return true;
  }
  return false;
}

}  // namespace comm
