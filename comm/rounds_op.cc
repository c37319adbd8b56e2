// File: comm/rounds_op.cc
#include "comm/rounds_op.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/tag.h"

namespace comm {

absl::StatusOr<bool> RoundsOp::Step(bool* progressed) {
  Transport& transport = *context_.transport;
  while (current_ < rounds_.size()) {
    Round& round = rounds_[current_];
    if (!posted_) {
      round_first_completion_ = completions_.size();
      // Receives first, so eager data lands in place.
      for (int pass = 0; pass < 2; ++pass) {
        for (const PlannedTransfer& t : round.transfers) {
          bool is_recv = t.kind == PlannedTransfer::Kind::kRecv;
          if (is_recv != (pass == 0)) continue;
          Completion* completion = completions_.Add();
          uint64_t tag = TagForStep(context_.tag_base, t.tag_step);
          absl::Status posted =
              is_recv ? transport.PostRecv(t.peer_global, tag, t.data, t.num_bytes, completion)
                      : transport.PostSend(t.peer_global, tag, t.data, t.num_bytes, completion);
          if (!posted.ok()) {
            completion->done = true;
            return absl::Status(posted.code(),
                                absl::StrCat("posting ", t.what, ": ", posted.message()));
          }
        }
      }
      posted_ = true;
      *progressed = true;
    }
    // Completions were added receives first; map them back in the same order.
    size_t index = round_first_completion_;
    for (int pass = 0; pass < 2; ++pass) {
      for (const PlannedTransfer& t : round.transfers) {
        bool is_recv = t.kind == PlannedTransfer::Kind::kRecv;
        if (is_recv != (pass == 0)) continue;
        const Completion& completion = completions_.at(index++);
        if (!completion.done) return false;
        FSDP_RETURN_IF_ERROR(CompletionStatus(completion, t.what));
        if (is_recv) FSDP_RETURN_IF_ERROR(CheckReceivedBytes(completion, t.num_bytes, t.what));
      }
    }
    if (round.after) round.after();
    ++current_;
    posted_ = false;
    *progressed = true;
  }
  return true;
}

AwaitedPeer RoundsOp::Awaited() const {
  if (current_ >= rounds_.size()) return {};
  const Round& round = rounds_[current_];
  if (!posted_) return {-1, "posting round " + std::to_string(current_)};
  size_t index = round_first_completion_;
  for (int pass = 0; pass < 2; ++pass) {
    for (const PlannedTransfer& t : round.transfers) {
      bool is_recv = t.kind == PlannedTransfer::Kind::kRecv;
      if (is_recv != (pass == 0)) continue;
      if (!completions_.at(index++).done) return {t.peer_global, t.what};
    }
  }
  return {};
}

bool RoundsOp::HasPendingTransportOps() const { return completions_.AnyPending(); }

}  // namespace comm
