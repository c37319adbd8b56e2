// File: comm/barrier.cc
#include "comm/barrier.h"

#include "absl/strings/str_cat.h"
#include "comm/ring_schedule.h"

namespace comm {

DisseminationBarrier::DisseminationBarrier(const GroupContext& context) : RoundsOp(context) {
  const int n = context.size();
  const int r = context.rank;
  using Kind = PlannedTransfer::Kind;
  for (int k = 0, distance = 1; distance < n; ++k, distance *= 2) {
    int to = context.global(PositiveMod(r + distance, n));
    int from = context.global(PositiveMod(r - distance, n));
    AddRound({{{Kind::kRecv, from, k, &unused_byte_, 0,
                absl::StrCat("recv of barrier round ", k, " from rank ", from)},
               {Kind::kSend, to, k, &unused_byte_, 0,
                absl::StrCat("send of barrier round ", k, " to rank ", to)}},
              nullptr});
  }
}

}  // namespace comm
