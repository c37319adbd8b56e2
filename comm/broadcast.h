// File: comm/broadcast.h
//
// Broadcast: a binomial tree rooted at `root`, pipelined by segment.
//
// Tree: with virtual ranks v = (rank - root) mod n, the parent of v is v with
// its lowest set bit cleared, and v's children are v + 2^j for every 2^j
// below that bit (the root: every 2^j < n), largest subtree first.
//
//   n = 8:   0 -> 4, 2, 1     4 -> 6, 5     2 -> 3     6 -> 7
//
// Who owns what: after round s a non-root rank holds segments 0..s of the
// buffer (received in place from its parent, no staging copy).
// What is in flight: in round s a non-root rank receives segment s from its
// parent while it forwards segment s-1 to all its children, so a large
// buffer streams down the tree (depth log2(n)) instead of hopping whole.
// Small buffers are one segment: log2(n) message latencies.
#ifndef COMM_BROADCAST_H_
#define COMM_BROADCAST_H_

#include <cstddef>
#include <vector>

#include "comm/rounds_op.h"

namespace comm {

struct BinomialTreeLinks {
  int parent = -1;            // group rank, -1 at the root
  std::vector<int> children;  // group ranks, largest subtree first
};
BinomialTreeLinks BinomialTree(int rank, int root, int n);

class BinomialBroadcast : public RoundsOp {
 public:
  BinomialBroadcast(const GroupContext& context, void* buffer, size_t num_bytes, int root);
};

}  // namespace comm

#endif  // COMM_BROADCAST_H_
