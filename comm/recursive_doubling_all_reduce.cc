// File: comm/recursive_doubling_all_reduce.cc
#include "comm/recursive_doubling_all_reduce.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/reduce.h"
#include "comm/ring_schedule.h"

namespace comm {

RecursiveDoublingAllReduce::RecursiveDoublingAllReduce(const GroupContext& context,
                                                       void* buffer, size_t count, Dtype dtype,
                                                       ReduceOp op)
    : RoundsOp(context) {
  const int n = context.size();
  const int r = context.rank;
  const int p = LargestPowerOfTwoAtMost(n);
  const int extra = n - p;
  int rounds = 0;
  while ((1 << rounds) < p) ++rounds;
  const int fix_up_out_step = rounds + 1;
  const size_t num_bytes = count * DtypeSize(dtype);
  const float final_divisor = op == ReduceOp::kAverage ? static_cast<float>(n) : 1.0f;
  scratch_.reset(new std::byte[num_bytes > 0 ? num_bytes : 1]);
  void* scratch = scratch_.get();
  using Kind = PlannedTransfer::Kind;

  int new_rank;
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      // Sits out: hands its vector to r+1, later receives the result.
      int partner = context.global(r + 1);
      AddRound({{{Kind::kSend, partner, 0, buffer, num_bytes,
                  absl::StrCat("fix-up send to rank ", partner)}},
                nullptr});
      AddRound({{{Kind::kRecv, partner, fix_up_out_step, buffer, num_bytes,
                  absl::StrCat("fix-up recv of the result from rank ", partner)}},
                nullptr});
      return;
    }
    int partner = context.global(r - 1);
    AddRound({{{Kind::kRecv, partner, 0, scratch, num_bytes,
                absl::StrCat("fix-up recv from rank ", partner)}},
              [=] { ReduceSumInPlace(dtype, scratch, buffer, count); }});
    new_rank = r / 2;
  } else {
    new_rank = r - extra;
  }
  for (int i = 0; i < rounds; ++i) {
    int partner_new = new_rank ^ (1 << i);
    int partner = context.global(partner_new < extra ? 2 * partner_new + 1
                                                     : partner_new + extra);
    float divisor = i + 1 == rounds ? final_divisor : 1.0f;
    std::string round_name = absl::StrCat(" of doubling round ", i, " (distance ", 1 << i, ")");
    AddRound({{{Kind::kRecv, partner, 1 + i, scratch, num_bytes,
                absl::StrCat("recv", round_name, " from rank ", partner)},
               {Kind::kSend, partner, 1 + i, buffer, num_bytes,
                absl::StrCat("send", round_name, " to rank ", partner)}},
              [=] { ReduceSumInPlace(dtype, scratch, buffer, count, divisor); }});
  }
  if (r < 2 * extra) {
    int partner = context.global(r - 1);
    AddRound({{{Kind::kSend, partner, fix_up_out_step, buffer, num_bytes,
                absl::StrCat("fix-up send of the result to rank ", partner)}},
              nullptr});
  }
}

RecursiveDoublingReduceScatter::RecursiveDoublingReduceScatter(const GroupContext& context,
                                                               const void* input, void* output,
                                                               size_t count, Dtype dtype,
                                                               ReduceOp op)
    : output_(output) {
  const size_t num_bytes = count * DtypeSize(dtype);
  copy_.reset(new std::byte[num_bytes > 0 ? num_bytes : 1]);
  if (num_bytes > 0) std::memcpy(copy_.get(), input, num_bytes);
  ElementRange own = CeilSplitChunk(count, context.size(), context.rank);
  own_chunk_ = copy_.get() + own.offset * DtypeSize(dtype);
  own_chunk_bytes_ = own.count * DtypeSize(dtype);
  all_reduce_ =
      std::make_unique<RecursiveDoublingAllReduce>(context, copy_.get(), count, dtype, op);
}

absl::StatusOr<bool> RecursiveDoublingReduceScatter::Step(bool* progressed) {
  FSDP_ASSIGN_OR_RETURN(bool finished, all_reduce_->Step(progressed));
  if (finished && own_chunk_bytes_ > 0 && output_ != nullptr) {
    std::memcpy(output_, own_chunk_, own_chunk_bytes_);
    output_ = nullptr;  // copy once, even if Step() is called again
  }
  return finished;
}

}  // namespace comm
