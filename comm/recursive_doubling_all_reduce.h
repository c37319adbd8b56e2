// File: comm/recursive_doubling_all_reduce.h
//
// The latency all-reduce (and the latency reduce-scatter built on it):
// recursive doubling, log2(n) rounds of whole-vector exchanges, for small
// messages where the ring's 2(n-1) steps cost more latency than bandwidth.
//
// Power-of-two n: in round i rank r exchanges its partial vector with
// r XOR 2^i and both add the two (a+b and b+a give the same bits, so both
// hold the same partial). After log2(n) rounds everyone holds the sum. The
// last round divides by n for kAverage before its rounding.
//
// Other n (the standard fix-up): let p be the largest power of two <= n and
// e = n - p. First, each even rank r < 2e sends its vector to r+1 and sits out;
// r+1 adds it. The p remaining ranks (odd ranks < 2e, and all ranks >= 2e)
// run recursive doubling among themselves, renumbered 0..p-1. Finally each
// odd rank r < 2e sends the result back to r-1.
//
//   n = 6, p = 4, e = 2:   0 -> 1   2 -> 3   (fix-up in)
//                          {1, 3, 4, 5} double: 1<->3, 4<->5; then 1<->4, 3<->5
//                          1 -> 0   3 -> 2   (fix-up out)
//
// Reduction order (determinism): element-wise the tree is fixed by n alone:
// pairs (x0+x1), (x2+x3), ... of the fix-up, then the doubling tree on the
// renumbered ranks. Every rank ends with identical bits.
//
// In flight: in each round one send and one receive (different buffers: the
// partner's vector lands in a scratch buffer, and is added after both finish).
#ifndef COMM_RECURSIVE_DOUBLING_ALL_REDUCE_H_
#define COMM_RECURSIVE_DOUBLING_ALL_REDUCE_H_

#include <cstddef>
#include <memory>

#include "comm/collective_enums.h"
#include "comm/dtype.h"
#include "comm/rounds_op.h"

namespace comm {

// In place on `buffer` (count elements).
class RecursiveDoublingAllReduce : public RoundsOp {
 public:
  RecursiveDoublingAllReduce(const GroupContext& context, void* buffer, size_t count,
                             Dtype dtype, ReduceOp op);

 private:
  std::unique_ptr<std::byte[]> scratch_;
};

// Latency reduce-scatter: recursive doubling all-reduce of a copy of `input`,
// then this rank keeps its ceil-split chunk. Costs the whole vector per round,
// which is the right trade only for small messages; its result is
// bit-identical to chunk r of RecursiveDoublingAllReduce on the same input.
class RecursiveDoublingReduceScatter : public CollectiveOp {
 public:
  RecursiveDoublingReduceScatter(const GroupContext& context, const void* input, void* output,
                                 size_t count, Dtype dtype, ReduceOp op);

  absl::StatusOr<bool> Step(bool* progressed) override;
  AwaitedPeer Awaited() const override { return all_reduce_->Awaited(); }
  bool HasPendingTransportOps() const override {
    return all_reduce_->HasPendingTransportOps();
  }

 private:
  std::unique_ptr<std::byte[]> copy_;
  std::unique_ptr<RecursiveDoublingAllReduce> all_reduce_;
  void* output_;
  const std::byte* own_chunk_;  // in copy_
  size_t own_chunk_bytes_;
};

}  // namespace comm

#endif  // COMM_RECURSIVE_DOUBLING_ALL_REDUCE_H_
