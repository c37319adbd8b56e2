// File: comm/shift.cc
#include "comm/shift.h"

#include "absl/strings/str_cat.h"
#include "comm/ring_schedule.h"

namespace comm {

Shift::Shift(const GroupContext& context, const void* input, void* output, size_t num_bytes,
             int distance)
    : RoundsOp(context) {
  const int n = context.size();
  const int r = context.rank;
  const int to = context.global(PositiveMod(r + distance, n));
  const int from = context.global(PositiveMod(r - distance, n));
  Round round;
  round.transfers.push_back({PlannedTransfer::Kind::kSend, to, 0, const_cast<void*>(input),
                             num_bytes, absl::StrCat("send of this rank's input to rank ", to)});
  round.transfers.push_back({PlannedTransfer::Kind::kRecv, from, 0, output, num_bytes,
                             absl::StrCat("recv of the input of rank ", from)});
  AddRound(std::move(round));
}

}  // namespace comm
