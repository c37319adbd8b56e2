// File: comm/barrier.h
//
// Dissemination barrier: ceil(log2 n) rounds; in round k rank r sends an
// empty message to r + 2^k and waits for one from r - 2^k (mod n). After
// round k, r has (transitively) heard from the 2^(k+1) ranks r - 2^(k+1) + 1
// .. r, so after the last round it knows every rank has entered the barrier.
// Works for any n, one message each way per round, nothing to reduce.
#ifndef COMM_BARRIER_H_
#define COMM_BARRIER_H_

#include "comm/rounds_op.h"

namespace comm {

class DisseminationBarrier : public RoundsOp {
 public:
  explicit DisseminationBarrier(const GroupContext& context);

 private:
  std::byte unused_byte_{};  // a valid address for the empty messages
};

}  // namespace comm

#endif  // COMM_BARRIER_H_
