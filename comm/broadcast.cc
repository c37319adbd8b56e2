// File: comm/broadcast.cc
#include "comm/broadcast.h"

#include "absl/strings/str_cat.h"
#include "comm/ring_schedule.h"
#include "comm/status_macros.h"
#include "comm/tag.h"

namespace comm {

BinomialTreeLinks BinomialTree(int rank, int root, int n) {
  BinomialTreeLinks links;
  const int v = PositiveMod(rank - root, n);
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      links.parent = PositiveMod(v - mask + root, n);
      break;
    }
    mask <<= 1;
  }
  for (int child_mask = mask >> 1; child_mask > 0; child_mask >>= 1) {
    if (v + child_mask < n) links.children.push_back(PositiveMod(v + child_mask + root, n));
  }
  return links;
}

BinomialBroadcast::BinomialBroadcast(const GroupContext& context, void* buffer,
                                     size_t num_bytes, int root)
    : context_(context),
      data_(static_cast<std::byte*>(buffer)),
      num_bytes_(num_bytes),
      segment_bytes_(SegmentElements(context.max_segment_bytes, 1)),
      segments_(SegmentCount(num_bytes, segment_bytes_)) {
  const BinomialTreeLinks links = BinomialTree(context.rank, root, context.size());
  if (links.parent >= 0) parent_global_ = context.global(links.parent);
  for (int child : links.children) children_.push_back(Child{context.global(child), {}, 0});
}

std::string BinomialBroadcast::Describe(const char* kind, size_t segment,
                                        int global_rank) const {
  const bool is_send = kind[0] == 's';
  return absl::StrCat(kind, " of segment ", segment, is_send ? " to child rank "
                                                             : " from parent rank ",
                      global_rank);
}

size_t BinomialBroadcast::SegmentsAvailable() const {
  return parent_global_ < 0 ? segments_ : recvs_arrived_;
}

absl::StatusOr<bool> BinomialBroadcast::Step(bool* progressed) {
  Transport& transport = *context_.transport;
  const uint64_t tag = TagForStep(context_.tag_base, 0);

  while (recvs_arrived_ < recvs_.size() && recvs_.at(recvs_arrived_).done) {
    const std::string what = Describe("recv", recvs_arrived_, parent_global_);
    FSDP_RETURN_IF_ERROR(CompletionStatus(recvs_.at(recvs_arrived_), what));
    FSDP_RETURN_IF_ERROR(CheckReceivedBytes(
        recvs_.at(recvs_arrived_), SegmentOf(num_bytes_, segment_bytes_, recvs_arrived_).count,
        what));
    ++recvs_arrived_;
    *progressed = true;
  }
  if (parent_global_ >= 0) {
    // Receives land in place, so posting ahead needs no free slot; the
    // bound only keeps the transport's queue short.
    while (recvs_.size() < segments_ &&
           recvs_.size() < recvs_arrived_ + kBroadcastSegmentsInFlight) {
      const size_t s = recvs_.size();
      const ElementRange seg = SegmentOf(num_bytes_, segment_bytes_, s);
      Completion* completion = recvs_.Add();
      absl::Status posted =
          transport.PostRecv(parent_global_, tag, data_ + seg.offset, seg.count, completion);
      if (!posted.ok()) {
        completion->done = true;  // never posted: nothing will write it
        return absl::Status(posted.code(),
                            absl::StrCat("posting ", Describe("recv", s, parent_global_), ": ",
                                         posted.message()));
      }
      *progressed = true;
    }
  }
  const size_t available = SegmentsAvailable();
  bool sends_done = true;
  for (Child& child : children_) {
    while (child.sends_finished < child.sends.size() &&
           child.sends.at(child.sends_finished).done) {
      FSDP_RETURN_IF_ERROR(
          CompletionStatus(child.sends.at(child.sends_finished),
                           Describe("send", child.sends_finished, child.global_rank)));
      ++child.sends_finished;
      *progressed = true;
    }
    while (child.sends.size() < available &&
           child.sends.size() < child.sends_finished + kBroadcastSegmentsInFlight) {
      const size_t s = child.sends.size();
      const ElementRange seg = SegmentOf(num_bytes_, segment_bytes_, s);
      Completion* completion = child.sends.Add();
      absl::Status posted = transport.PostSend(child.global_rank, tag, data_ + seg.offset,
                                               seg.count, completion);
      if (!posted.ok()) {
        completion->done = true;
        return absl::Status(posted.code(),
                            absl::StrCat("posting ", Describe("send", s, child.global_rank),
                                         ": ", posted.message()));
      }
      *progressed = true;
    }
    if (child.sends_finished < segments_) sends_done = false;
  }
  return SegmentsAvailable() == segments_ && sends_done;
}

AwaitedPeer BinomialBroadcast::Awaited() const {
  if (SegmentsAvailable() < segments_) {
    return {parent_global_, Describe("recv", recvs_arrived_, parent_global_)};
  }
  for (const Child& child : children_) {
    if (child.sends_finished < segments_) {
      return {child.global_rank, Describe("send", child.sends_finished, child.global_rank)};
    }
  }
  return {};
}

bool BinomialBroadcast::HasPendingTransportOps() const {
  if (recvs_.AnyPending()) return true;
  for (const Child& child : children_) {
    if (child.sends.AnyPending()) return true;
  }
  return false;
}

}  // namespace comm
