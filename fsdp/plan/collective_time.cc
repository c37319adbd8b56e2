// File: fsdp/plan/collective_time.cc
#include "fsdp/plan/collective_time.h"

namespace fsdp {
namespace plan {
namespace {

bool Trivial(int64_t bytes, const CollectiveGroup& group) {
  return group.size <= 1 || bytes <= 0;
}

// Rounds of comm/recursive_doubling_all_reduce.h: log2 of the largest power
// of two p <= n, plus the fix-up's round in and round out when n != p.
int RecursiveDoublingRounds(int n) {
  int log2_p = 0;
  while ((2 << log2_p) <= n) ++log2_p;
  return log2_p + ((1 << log2_p) == n ? 0 : 2);
}

double RecursiveDoublingSeconds(int64_t bytes, const CollectiveGroup& group) {
  const double s = static_cast<double>(bytes);
  return RecursiveDoublingRounds(group.size) *
         (group.latency_s + s / group.bandwidth_bytes_per_s +
          3 * s / group.memory_bandwidth_bytes_per_s);
}

double RingAllGatherSeconds(int64_t bytes, const CollectiveGroup& group) {
  const int n = group.size;
  const double chunk = static_cast<double>(bytes) / n;
  return (n - 1) * (group.latency_s + chunk / group.bandwidth_bytes_per_s);
}

double LargeReduceScatterSeconds(int64_t bytes, const CollectiveGroup& group) {
  const int n = group.size;
  const double s = static_cast<double>(bytes);
  const double chunk = s / n;
  if (group.on_one_host && n <= kDirectMaxRanks) {
    return group.latency_s + (n - 1) * chunk / group.bandwidth_bytes_per_s +
           (s + chunk) / group.memory_bandwidth_bytes_per_s;
  }
  return (n - 1) * (group.latency_s + chunk / group.bandwidth_bytes_per_s +
                    3 * chunk / group.memory_bandwidth_bytes_per_s);
}

}  // namespace

double AllGatherSeconds(int64_t bytes, const CollectiveGroup& group) {
  if (Trivial(bytes, group)) return 0;
  if (bytes <= kSmallMessageBytes) {
    const int n = group.size;
    return group.latency_s +
           (n - 1) * (static_cast<double>(bytes) / n) / group.bandwidth_bytes_per_s;
  }
  return RingAllGatherSeconds(bytes, group);
}

double ReduceScatterSeconds(int64_t bytes, const CollectiveGroup& group) {
  if (Trivial(bytes, group)) return 0;
  if (bytes <= kSmallMessageBytes) return RecursiveDoublingSeconds(bytes, group);
  return LargeReduceScatterSeconds(bytes, group);
}

double AllReduceSeconds(int64_t bytes, const CollectiveGroup& group) {
  if (Trivial(bytes, group)) return 0;
  if (bytes <= kSmallMessageBytes) return RecursiveDoublingSeconds(bytes, group);
  return LargeReduceScatterSeconds(bytes, group) + RingAllGatherSeconds(bytes, group);
}

}  // namespace plan
}  // namespace fsdp
