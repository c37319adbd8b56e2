// File: comm/collective_enums.h
//
// The two enums a collective request names: how contributions combine and
// which algorithm carries them. Part of the public API (comm/communicator.h
// includes this); kept apart so that an algorithm's header can name them
// without the Communicator, and the public header can change without
// rebuilding every algorithm.
//
//   options.op = comm::ReduceOp::kAverage;
//   options.algorithm = comm::Algorithm::kAuto;
#ifndef COMM_COLLECTIVE_ENUMS_H_
#define COMM_COLLECTIVE_ENUMS_H_

namespace comm {

// How a reduction combines contributions. bf16 data: every addition is done
// in fp32 and its result rounded to bf16 once; partial sums travel between
// ranks as bf16, so a reduction over N ranks rounds up to N-1 times (like
// NCCL). kAverage divides by the group size in fp32 before the last rounding.
// See comm/reduce.h for the exact order.
enum class ReduceOp { kSum, kAverage };

// Which algorithm a collective uses. kAuto picks by the size of the whole
// vector (reduce-scatter input, all-reduce buffer, all-gather output): the
// latency-oriented one (recursive doubling; direct exchange for all-gather)
// up to CommunicatorOptions::small_message_bytes; above it the segmented
// ring, except that reduce-scatter (and all-reduce's reduce-scatter phase)
// is direct (comm/direct_reduce_scatter.h) in groups of at most
// CommunicatorOptions::direct_max_ranks ranks that all run on one host
// (on_one_host(); the rule is comm/algorithm_choice.h). kDirect forces that (all-gather
// then takes the ring). Reduce-scatter and all-reduce of one vector take the
// same algorithm; direct and ring reduce-scatters give the same bits; so
// all-reduce's chunk r is bit-identical to reduce-scatter's output on rank
// r. Broadcast (pipelined binomial tree) and barrier (dissemination) have
// one algorithm each. See docs/comm.md.
enum class Algorithm { kAuto, kRing, kLatency, kDirect };

}  // namespace comm

#endif  // COMM_COLLECTIVE_ENUMS_H_
