// File: comm/ring_pipeline.cc
#include "comm/ring_pipeline.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/tag.h"

namespace comm {

RingTransfers BuildRingTransfers(const std::vector<ElementRange>& chunks, int rank,
                                 bool reduce_scatter_order, size_t segment_elements) {
  const int n = static_cast<int>(chunks.size());
  RingTransfers transfers;
  std::vector<size_t> recv_step_begin(n, 0);
  for (int step = 0; step + 1 < n; ++step) {
    int recv_chunk = reduce_scatter_order ? RingReduceScatterRecvChunk(rank, n, step)
                                          : RingAllGatherRecvChunk(rank, n, step);
    recv_step_begin[step] = transfers.recvs.size();
    const ElementRange& range = chunks[recv_chunk];
    for (size_t s = 0; s < SegmentCount(range.count, segment_elements); ++s) {
      ElementRange seg = SegmentOf(range.count, segment_elements, s);
      transfers.recvs.push_back({step, recv_chunk, s, range.offset + seg.offset, seg.count, -1});
    }
  }
  for (int step = 0; step + 1 < n; ++step) {
    int send_chunk = reduce_scatter_order ? RingReduceScatterSendChunk(rank, n, step)
                                          : RingAllGatherSendChunk(rank, n, step);
    const ElementRange& range = chunks[send_chunk];
    for (size_t s = 0; s < SegmentCount(range.count, segment_elements); ++s) {
      ElementRange seg = SegmentOf(range.count, segment_elements, s);
      long depends_on = step == 0 ? -1 : static_cast<long>(recv_step_begin[step - 1] + s);
      transfers.sends.push_back(
          {step, send_chunk, s, range.offset + seg.offset, seg.count, depends_on});
    }
  }
  return transfers;
}

RingPipeline::RingPipeline(const GroupContext& context, int first_tag_step,
                           size_t element_size, RingTransfers transfers)
    : context_(context),
      first_tag_step_(first_tag_step),
      element_size_(element_size),
      left_global_(context.global(RingLeftNeighbor(context.rank, context.size()))),
      right_global_(context.global(RingRightNeighbor(context.rank, context.size()))),
      transfers_(std::move(transfers)) {}

std::string RingPipeline::Describe(const char* kind, const RingTransfer& transfer) const {
  return absl::StrCat(kind, " of segment ", transfer.segment, " of chunk ", transfer.chunk,
                      " at ring step ", transfer.step);
}

absl::StatusOr<bool> RingPipeline::Step(bool* progressed) {
  Transport& transport = *context_.transport;
  const auto& sends = transfers_.sends;
  const auto& recvs = transfers_.recvs;

  // Reap receives in order; process each (e.g. reduce) while later ones fly.
  while (recvs_processed_ < recv_completions_.size() &&
         recv_completions_.at(recvs_processed_).done) {
    const RingTransfer& recv = recvs[recvs_processed_];
    const Completion& completion = recv_completions_.at(recvs_processed_);
    std::string what = absl::StrCat(Describe("recv", recv), " from rank ", left_global_);
    FSDP_RETURN_IF_ERROR(CompletionStatus(completion, what));
    FSDP_RETURN_IF_ERROR(CheckReceivedBytes(completion, recv.count * element_size_, what));
    OnReceived(recv, recvs_processed_);
    ++recvs_processed_;
    *progressed = true;
  }
  while (sends_finished_ < send_completions_.size() &&
         send_completions_.at(sends_finished_).done) {
    const RingTransfer& send = sends[sends_finished_];
    FSDP_RETURN_IF_ERROR(CompletionStatus(
        send_completions_.at(sends_finished_),
        absl::StrCat(Describe("send", send), " to rank ", right_global_)));
    ++sends_finished_;
    *progressed = true;
  }

  // Post receives first, so data can land in place as soon as it is sent.
  while (recv_completions_.size() < recvs.size() &&
         recv_completions_.size() < recvs_processed_ + kRingSegmentsInFlight) {
    size_t index = recv_completions_.size();
    const RingTransfer& recv = recvs[index];
    Completion* completion = recv_completions_.Add();
    absl::Status posted = transport.PostRecv(
        left_global_, TagForStep(context_.tag_base, first_tag_step_ + recv.step),
        RecvTarget(recv, index), recv.count * element_size_, completion);
    if (!posted.ok()) {
      completion->done = true;  // never posted: nothing will write it
      return absl::Status(posted.code(), absl::StrCat("posting ", Describe("recv", recv),
                                                      " from rank ", left_global_, ": ",
                                                      posted.message()));
    }
    *progressed = true;
  }
  while (send_completions_.size() < sends.size() &&
         send_completions_.size() < sends_finished_ + kRingSegmentsInFlight) {
    const RingTransfer& send = sends[send_completions_.size()];
    if (send.depends_on >= 0 && static_cast<size_t>(send.depends_on) >= recvs_processed_) break;
    Completion* completion = send_completions_.Add();
    absl::Status posted = transport.PostSend(
        right_global_, TagForStep(context_.tag_base, first_tag_step_ + send.step),
        SendData(send), send.count * element_size_, completion);
    if (!posted.ok()) {
      completion->done = true;
      return absl::Status(posted.code(), absl::StrCat("posting ", Describe("send", send),
                                                      " to rank ", right_global_, ": ",
                                                      posted.message()));
    }
    *progressed = true;
  }
  return recvs_processed_ == recvs.size() && sends_finished_ == sends.size();
}

AwaitedPeer RingPipeline::Awaited() const {
  if (recvs_processed_ < transfers_.recvs.size()) {
    return {left_global_, Describe("recv", transfers_.recvs[recvs_processed_])};
  }
  if (sends_finished_ < transfers_.sends.size()) {
    return {right_global_, Describe("send", transfers_.sends[sends_finished_])};
  }
  return {};
}

bool RingPipeline::HasPendingTransportOps() const {
  return send_completions_.AnyPending() || recv_completions_.AnyPending();
}

}  // namespace comm
