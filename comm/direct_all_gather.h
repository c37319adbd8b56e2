// File: comm/direct_all_gather.h
//
// The latency all-gather: one round in which every rank sends its input to
// every other rank and receives every other rank's input straight into its
// slot of the output. All 2(n-1) messages are in flight at once, so the
// latency is one message time instead of the ring's n-1; the cost is n-1
// concurrent sends of the input, which is the right trade only for small
// inputs (kAuto uses it up to CommunicatorOptions::small_message_bytes of
// output).
//
// Who owns what: after the round, rank r holds every chunk. Sends go to
// r+1, r+2, ... (mod n) so that not everyone hits rank 0 first.
#ifndef COMM_DIRECT_ALL_GATHER_H_
#define COMM_DIRECT_ALL_GATHER_H_

#include <cstddef>

#include "comm/rounds_op.h"

namespace comm {

class DirectAllGather : public RoundsOp {
 public:
  // `output`: n * input_bytes bytes; `input` is copied into slot `rank` unless
  // it already is that memory.
  DirectAllGather(const GroupContext& context, const void* input, void* output,
                  size_t input_bytes);
};

}  // namespace comm

#endif  // COMM_DIRECT_ALL_GATHER_H_
