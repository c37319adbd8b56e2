// File: tests/integration/comm/collective_reference.h
//
// Deterministic per-rank inputs and independently computed expected outputs
// for the collective integration tests. Every rank computes the inputs of
// every other rank from a formula, so each rank can check its own result
// without trusting the communicator for anything.
//
// Values are chosen so that the reference is exact, not approximate:
//   - ValueMode::kSmallIntegers: integers in [-8, 8]. Sums over up to 8 ranks
//     are exact in fp32 and in bf16 (|sum| <= 64 < 256), whatever the order
//     or the number of intermediate roundings.
//   - ValueMode::kBf16Fractions: 1 + k/128 (k in [0, 128)), exact in bf16 and
//     fp32. Their fp32 sum is exact in any order, but is generally NOT
//     representable in bf16, so the expected bf16 result is
//     base::ToBf16Bits(exact fp32 sum) when rounded once; an implementation
//     that rounds partial sums on every hop lands within n ulps of it (see
//     Bf16Rounding below).
//   - comm::Dtype::kInt64 (either mode): full-width integers (a 64-bit mix of
//     source, index and salt), so that sums wrap around; the reference is
//     their two's complement sum, exact. int64 only sums (ReduceOp::kSum).
// Averages: the reference is the exact sum divided by the group size,
// rounded to fp32 (then to bf16). An implementation that multiplies by
// 1/size instead of dividing may differ by one ulp; CompareReduced accepts
// one ulp of the element type for averages and nothing for sums.
//
// Example:
//   std::vector<std::byte> input = MakeInput(Dtype::kFloat32, mode, rank, count, salt);
//   ... run an all-reduce on `input` ...
//   std::string error = CheckAllReduce(dtype, op, mode, ranks, count, salt, input);
//   if (!error.empty()) ...   // names the first wrong element, expected and got
#ifndef TESTS_INTEGRATION_COMM_COLLECTIVE_REFERENCE_H_
#define TESTS_INTEGRATION_COMM_COLLECTIVE_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "comm/communicator.h"
#include "base/bfloat16.h"
#include "comm/dtype.h"

namespace comm_test {

enum class ValueMode { kSmallIntegers, kBf16Fractions };

// The input value of element `index` on the rank whose identity is `source`
// (a global rank; the sub-communicator tests keep using global ranks so that
// the expected order of contributions is testable). `salt` differs per
// collective so that data left over from an earlier one cannot pass.
float InputValue(ValueMode mode, int source, uint64_t index, uint64_t salt);

// The int64 input of element `index` on `source` (dtype kInt64).
int64_t Int64InputValue(int source, uint64_t index, uint64_t salt);

// `count` elements of `dtype` holding InputValue(mode, source, i, salt)
// (Int64InputValue(source, i, salt) for kInt64).
std::vector<std::byte> MakeInput(comm::Dtype dtype, ValueMode mode, int source,
                                 size_t count, uint64_t salt);

// A buffer of `num_bytes` that holds a recognisable "never written" pattern
// followed by kGuardBytes of guard bytes; the span handed to a collective is
// the first `num_bytes`. CheckGuard() verifies the guard was not touched.
inline constexpr size_t kGuardBytes = 64;
std::vector<std::byte> MakeOutputWithGuard(size_t num_bytes);
std::string CheckGuard(absl::Span<const std::byte> buffer_with_guard, size_t num_bytes);

// Reduce-scatter chunking from comm/communicator.h: ceil(count / size)
// elements per chunk, the last ones shorter or empty.
size_t ChunkBegin(size_t count, int group_size, int group_rank);
size_t ChunkSize(size_t count, int group_size, int group_rank);

// Each Check* returns "" when `got` equals the reference, otherwise a message
// naming the first mismatching element, the expected and the actual value,
// and how many elements were wrong. `sources[p]` is the identity (global
// rank) of group rank p, i.e. whose InputValue it contributed.

std::string CheckAllGather(comm::Dtype dtype, ValueMode mode,
                           absl::Span<const int> sources, size_t count_per_rank,
                           uint64_t salt, absl::Span<const std::byte> got);

// How bf16 reductions are allowed to round (fp32 and kSmallIntegers are exact
// either way).
//   kPerHop: the contract of comm/communicator.h (ReduceOp): every addition
//            is done in fp32 and rounded to bf16, and partial sums travel as
//            bf16, so a reduction over n ranks rounds up to n-1 times (plus
//            the average's division before the last rounding). Each rounding
//            is off by at most half an ulp of the final magnitude (inputs
//            are positive), so the check accepts n ulps of the result: far
//            below the effect of a missing or doubled contribution (>= 1.0).
//   kOnce:   bf16(exact fp32 result): fp32 accumulation across ranks with a
//            single rounding (what the header promised before it was aligned
//            with the implementation). Stricter; fails from 3 ranks on today.
enum class Bf16Rounding { kOnce, kPerHop };

// `begin`: index of got[0] within the full reduced buffer (reduce-scatter
// chunk start); `count`: elements of `got` to check.
std::string CheckReduced(comm::Dtype dtype, comm::ReduceOp op, ValueMode mode,
                         absl::Span<const int> sources, size_t begin, size_t count,
                         uint64_t salt, absl::Span<const std::byte> got,
                         Bf16Rounding rounding = Bf16Rounding::kOnce);

std::string CheckBroadcast(comm::Dtype dtype, ValueMode mode, int root_source,
                           size_t count, uint64_t salt, absl::Span<const std::byte> got);

}  // namespace comm_test

#endif  // TESTS_INTEGRATION_COMM_COLLECTIVE_REFERENCE_H_
