// File: comm/direct_all_gather.cc
#include "comm/direct_all_gather.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "comm/ring_schedule.h"

namespace comm {

DirectAllGather::DirectAllGather(const GroupContext& context, const void* input, void* output,
                                 size_t input_bytes)
    : RoundsOp(context) {
  const int n = context.size();
  const int r = context.rank;
  std::byte* out = static_cast<std::byte*>(output);
  std::byte* own_slot = out + static_cast<size_t>(r) * input_bytes;
  if (input != own_slot && input_bytes > 0) std::memcpy(own_slot, input, input_bytes);
  if (n == 1 || input_bytes == 0) return;
  Round round;
  for (int distance = 1; distance < n; ++distance) {
    int to = context.global(PositiveMod(r + distance, n));
    int from_rank = PositiveMod(r - distance, n);
    int from = context.global(from_rank);
    round.transfers.push_back({PlannedTransfer::Kind::kSend, to, 0, own_slot, input_bytes,
                               absl::StrCat("send of this rank's input to rank ", to)});
    round.transfers.push_back({PlannedTransfer::Kind::kRecv, from, 0,
                               out + static_cast<size_t>(from_rank) * input_bytes, input_bytes,
                               absl::StrCat("recv of the input of rank ", from)});
  }
  AddRound(std::move(round));
}

}  // namespace comm
