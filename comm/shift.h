// File: comm/shift.h
//
// Shift: every rank sends its input to the rank `distance` after it on the
// ring and receives the input of the rank `distance` before it, in one round
// of one send and one receive each. Large inputs go as one message: the
// transport's rendezvous protocol moves them without staging (on one host,
// a single-copy read from the sender's memory), so segmenting would only add
// round trips.
//
// Who owns what: after the round, rank r's output holds rank
// (r - distance) mod n's input. The buddy copies of an elastic job
// (docs/failures.md) keep each rank's shard on the next rank so.
#ifndef COMM_SHIFT_H_
#define COMM_SHIFT_H_

#include <cstddef>

#include "comm/rounds_op.h"

namespace comm {

class Shift : public RoundsOp {
 public:
  // `input` and `output`: num_bytes each, not overlapping; 0 < distance mod n.
  Shift(const GroupContext& context, const void* input, void* output, size_t num_bytes,
        int distance);
};

}  // namespace comm

#endif  // COMM_SHIFT_H_
