// File: comm/broadcast.h
//
// Broadcast: a binomial tree rooted at `root`, streamed by segment.
//
// Tree: with virtual ranks v = (rank - root) mod n, the parent of v is v with
// its lowest set bit cleared, and v's children are v + 2^j for every 2^j
// below that bit (the root: every 2^j < n), largest subtree first.
//
//   n = 8:   0 -> 4, 2, 1     4 -> 6, 5     2 -> 3     6 -> 7
//
// Who owns what: a non-root rank receives segment s in place from its
// parent (no staging copy) and forwards it to each child as soon as it has
// arrived, whatever the other segments are doing.
// What is in flight: up to kBroadcastSegmentsInFlight receives posted ahead,
// and per child up to kBroadcastSegmentsInFlight unfinished sends. There are
// no lock-step rounds: an earlier version advanced every rank one segment
// per round (receive s while forwarding s-1), so each of the 64 rounds of a
// 64 MiB broadcast waited for parent and children to be scheduled together;
// streaming is 9-15% faster with 4 ranks on 2 cores (2.74 -> 2.98 GB/s with
// 4 KiB pages, 5.79 -> 6.69 GB/s with huge pages, medians of 4 runs). Small
// buffers are one segment: log2(n) message latencies.
#ifndef COMM_BROADCAST_H_
#define COMM_BROADCAST_H_

#include <cstddef>
#include <string>
#include <vector>

#include "comm/collective_op.h"

namespace comm {

inline constexpr size_t kBroadcastSegmentsInFlight = 4;

struct BinomialTreeLinks {
  int parent = -1;            // group rank, -1 at the root
  std::vector<int> children;  // group ranks, largest subtree first
};
BinomialTreeLinks BinomialTree(int rank, int root, int n);

class BinomialBroadcast : public CollectiveOp {
 public:
  BinomialBroadcast(const GroupContext& context, void* buffer, size_t num_bytes, int root);

  absl::StatusOr<bool> Step(bool* progressed) override;
  AwaitedPeer Awaited() const override;
  bool HasPendingTransportOps() const override;

 private:
  struct Child {
    int global_rank = 0;
    CompletionList sends;
    size_t sends_finished = 0;  // prefix known finished
  };

  std::string Describe(const char* kind, size_t segment, int global_rank) const;
  size_t SegmentsAvailable() const;  // segments this rank holds

  GroupContext context_;
  std::byte* data_;
  size_t num_bytes_;
  size_t segment_bytes_;
  size_t segments_;
  int parent_global_ = -1;  // -1 at the root
  CompletionList recvs_;
  size_t recvs_arrived_ = 0;  // prefix checked and arrived
  std::vector<Child> children_;
};

}  // namespace comm

#endif  // COMM_BROADCAST_H_
