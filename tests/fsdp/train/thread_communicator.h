// File: tests/fsdp/train/thread_communicator.h
//
// testonly: an in-process comm::Communicator for N ranks that are N threads,
// so the training step's cross-rank arithmetic can be unit-tested without a
// network. Collectives are matched by their posting order on each rank (as
// the real communicator requires); the last rank to post the k-th collective
// computes it for everyone, summing contributions in rank order 0..N-1
// (fp32 or bf16; bf16 is summed in fp32 and rounded ONCE, a simplification
// of comm/'s per-hop rounding: tests compare strategies with each other,
// which use the same reductions, not against comm/'s exact bf16 bits;
// int64 is summed as two's complement integers, exactly as comm/ does).
// Split() forms sub-groups by color, ordered by (key, rank), as comm/ does.
// Work::Wait honours its timeout and names the ranks that never posted.
//
// Cross-process behaviour is tested with the real communicator in
// tests/integration/train/.
#ifndef TESTS_FSDP_TRAIN_THREAD_COMMUNICATOR_H_
#define TESTS_FSDP_TRAIN_THREAD_COMMUNICATOR_H_

#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "comm/communicator.h"

namespace fsdp_test {

// Returns `world_size` communicators sharing one group; give one to each
// thread. They share state kept alive by all of them. With a positive
// `completion_delay`, a collective runs (writes its outputs) only that long
// after its last rank posted it, inside the first Test()/Wait() after then: a
// slow network, under which a caller that uses results without waiting
// reads stale buffers.
std::vector<std::unique_ptr<comm::Communicator>> MakeThreadCommunicators(
    int world_size, absl::Duration completion_delay = absl::ZeroDuration());

}  // namespace fsdp_test

#endif  // TESTS_FSDP_TRAIN_THREAD_COMMUNICATOR_H_
