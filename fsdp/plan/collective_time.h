// File: fsdp/plan/collective_time.h
//
// How long one collective takes, by the algorithm the runtime's
// Algorithm::kAuto picks for it (comm/algorithm_choice.h, the defaults of
// comm::CommunicatorOptions), on a group whose messages cross one link
// level. Pure arithmetic; S is the whole vector in bytes (all-gather output,
// reduce-scatter input, all-reduce buffer), n the group size, a the link's
// latency, B its bandwidth, M the memory bandwidth that sums run at:
//
//   all-gather      S <= 64 KiB  direct: every rank sends its chunk to every
//                                other rank at once:   a + (n-1) S/n / B
//                   above        ring: n-1 steps of    a + S/n / B
//   reduce-scatter  S <= 64 KiB  recursive doubling of the whole vector:
//                                rounds R = log2 p (+2 for the fix-up when
//                                n is not a power of two p), each a + S/B
//                                and a sum of 3 S bytes at M
//                   one host, n <= 4   direct: a + (n-1) S/n / B, then one
//                                n-way sum reading S and writing S/n at M
//                   otherwise    ring: n-1 steps of a + S/n / B, each with a
//                                sum of 3 S/n bytes at M
//   all-reduce      S <= 64 KiB  recursive doubling as above
//                   above        the reduce-scatter (direct or ring), then
//                                the ring all-gather
//
// n = 1 (or S = 0) costs nothing: the runtime finishes such a collective at
// once. The segmented pipeline (1 MiB segments) overlaps a ring's steps but
// not their count, so it is left out.
#ifndef FSDP_PLAN_COLLECTIVE_TIME_H_
#define FSDP_PLAN_COLLECTIVE_TIME_H_

#include <cstdint>

namespace fsdp {
namespace plan {

// comm::CommunicatorOptions' defaults, which kAuto decides by.
inline constexpr int64_t kSmallMessageBytes = 64 * 1024;
inline constexpr int kDirectMaxRanks = 4;

// A group and the link its messages cross.
struct CollectiveGroup {
  int size = 1;
  bool on_one_host = true;  // every rank on one node (the direct reduce-scatter's condition)
  double latency_s = 0;
  double bandwidth_bytes_per_s = 1;
  double memory_bandwidth_bytes_per_s = 1;  // for the reductions' sums
};

double AllGatherSeconds(int64_t bytes, const CollectiveGroup& group);
double ReduceScatterSeconds(int64_t bytes, const CollectiveGroup& group);
double AllReduceSeconds(int64_t bytes, const CollectiveGroup& group);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_COLLECTIVE_TIME_H_
