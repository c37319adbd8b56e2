// File: comm/algorithm_choice.h
//
// What Algorithm::kAuto resolves to (comm/communicator.h), as pure functions
// of the request and the group, so that the rule is in one place and tested.
//
//   latency algorithm    whole vector <= small_message_bytes
//   direct reduce-scatter  above that, in a group of <= direct_max_ranks
//                        ranks that all run on one host
//   ring                 otherwise
//
// Why one host: on one host every transfer is a memory copy, and the direct
// reduce-scatter's single-pass n-way sum saves passes over memory. Across
// hosts it sends each rank's chunks straight to their owners, so with two
// hosts of two ranks each, a host sends 4 chunks of S/4 over the network
// where the ring sends 3; and over TCP between two network namespaces (4
// ranks, 64 MiB, docs/collective-bench.md) it measured 7-8% slower than the
// ring.
#ifndef COMM_ALGORITHM_CHOICE_H_
#define COMM_ALGORITHM_CHOICE_H_

#include <cstddef>

#include "comm/collective_enums.h"

namespace comm {

// Whether a collective over `num_bytes` (the whole vector) takes the latency
// algorithm.
bool UseLatencyAlgorithm(Algorithm algorithm, size_t num_bytes, size_t small_message_bytes);

// For a reduce-scatter (or all-reduce's first phase) that does not take the
// latency algorithm: direct (true) or ring (false).
bool UseDirectAlgorithm(Algorithm algorithm, int group_size, int direct_max_ranks,
                        bool on_one_host);

}  // namespace comm

#endif  // COMM_ALGORITHM_CHOICE_H_
