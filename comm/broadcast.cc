// File: comm/broadcast.cc
#include "comm/broadcast.h"

#include "absl/strings/str_cat.h"
#include "comm/ring_schedule.h"

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
    : RoundsOp(context) {
  const BinomialTreeLinks links = BinomialTree(context.rank, root, context.size());
  const size_t segment_bytes = SegmentElements(context.max_segment_bytes, 1);
  const size_t segments = SegmentCount(num_bytes, segment_bytes);
  std::byte* data = static_cast<std::byte*>(buffer);
  const bool is_root = links.parent < 0;
  using Kind = PlannedTransfer::Kind;
  // Round s: receive segment s (non-root), forward segment s-1 (root: s).
  const size_t num_rounds = is_root ? segments : segments + 1;
  for (size_t s = 0; s < num_rounds && segments > 0; ++s) {
    Round round;
    if (!is_root && s < segments) {
      ElementRange seg = SegmentOf(num_bytes, segment_bytes, s);
      int parent = context.global(links.parent);
      round.transfers.push_back({Kind::kRecv, parent, 0, data + seg.offset, seg.count,
                                 absl::StrCat("recv of segment ", s, " from parent rank ",
                                              parent)});
    }
    size_t forward = is_root ? s : s - 1;
    if (is_root || s >= 1) {
      ElementRange seg = SegmentOf(num_bytes, segment_bytes, forward);
      for (int child : links.children) {
        int child_global = context.global(child);
        round.transfers.push_back({Kind::kSend, child_global, 0, data + seg.offset, seg.count,
                                   absl::StrCat("send of segment ", forward, " to child rank ",
                                                child_global)});
      }
    }
    if (!round.transfers.empty()) AddRound(std::move(round));
  }
}

}  // namespace comm
