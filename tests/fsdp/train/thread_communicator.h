// File: tests/fsdp/train/thread_communicator.h
//
// testonly: an in-process comm::Communicator for N ranks that are N threads,
// so the training step's cross-rank arithmetic can be unit-tested without a
// network. Collectives are matched by their posting order on each rank (as
// the real communicator requires); the last rank to post the k-th collective
// computes it for everyone, summing contributions in rank order 0..N-1.
// Work::Wait honours its timeout and names the ranks that never posted.
//
// Cross-process behaviour is tested with the real communicator in
// tests/integration/train/.
#ifndef TESTS_FSDP_TRAIN_THREAD_COMMUNICATOR_H_
#define TESTS_FSDP_TRAIN_THREAD_COMMUNICATOR_H_

#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace fsdp_test {

// Returns `world_size` communicators sharing one group; give one to each
// thread. They share state kept alive by all of them.
std::vector<std::unique_ptr<comm::Communicator>> MakeThreadCommunicators(int world_size);

}  // namespace fsdp_test

#endif  // TESTS_FSDP_TRAIN_THREAD_COMMUNICATOR_H_
