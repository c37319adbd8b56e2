// File: fsdp/nn/fixed_point_sum.h
//
// Sums of fp32 contributions that give the same bits however the
// contributions are split among calls, threads and ranks and in whatever
// order they are added: each contribution is rounded, on its own, to a
// multiple of one quantum every rank agrees on, and the multiples are added
// as int64 integers (associative). The gradients of --exact are such sums
// (docs/exact.md); the gradient norm's sum of squares is another
// ([Note: exact sum of squares], fsdp/optim/grad_clip.h).
//
// [Note: exact fixed-point sums] A tensor's sum carries an exponent E that
// every rank agrees on before adding anything. Its quantum is
// 2^(E - kExactFractionBits); a contribution x must have |x| <= 2^E.
//   1. AddToExactSum rounds x / quantum to the nearest integer (ties to
//      even) and adds it to the tensor's int64 sum; each rounding depends
//      only on x and E, never on what else was added, so any partition and
//      any order of the same contributions gives the same integers. It
//      returns the largest |x| it saw (NaN over inf over any finite value).
//   2. The ranks add their int64 sums (an integer reduce-scatter or
//      all-reduce: exact in any order) and agree on the largest |x| of all
//      (the LargerMagnitude of every rank's, also order-free).
//   3. ExactSumStateOf(agreed max, E) says what the sum is:
//      - kExact: every |x| <= 2^E; ExactSumToFloats gives
//        float(double(sum) * (quantum / divisor)), one multiplication by a
//        factor every rank computes alike.
//      - kOverflow: some finite |x| > 2^E: the integers are meaningless. The
//        caller redoes the sum with E = ExactExponentFor(agreed max, 0),
//        which holds every contribution (they are the same contributions:
//        the redo is as deterministic as the first try), so one redo is
//        always enough.
//      - kNonFinite: some x is NaN or infinite: ExactSumToFloats writes NaN
//        over the whole tensor, on every rank alike.
//   Underflow: |x| < quantum / 2 rounds to 0 (and exactly quantum / 2 too:
//   ties to even). So a sum keeps the contributions down to 2^-43 of the
//   bound, about 2^-40 of the largest one with the usual headroom.
//   The integer sum cannot overflow: each |rounded x| <= 2^43, and at most
//   kExactMaxContributions (2^20 - 1) of them are added per element
//   (CheckExactContributionCount).
// Choosing E: from the previous step's agreed max (an order-free value, so
// every split of the batch chooses the same E) with a few bits of headroom,
// ExactExponentFor(previous max, kExactHeadroomBits); a first step, or a
// step whose gradients outgrew the headroom, ends in kOverflow and is redone.
//
//   int e = ExactExponentFor(previous_max, kExactHeadroomBits);
//   std::vector<int64_t> sum(n);                        // zeroed
//   float m = 0;
//   for (x : my contributions) m = LargerMagnitude(m, AddToExactSum(e, x, sum));
//   ... int64 all-reduce of `sum`, agree on m (the largest of the ranks') ...
//   if (ExactSumStateOf(m, e) == ExactSumState::kOverflow) {
//     e = ExactExponentFor(m, 0);  ... zero `sum`, add the contributions again ...
//   }
//   FSDP_RETURN_IF_ERROR(ExactSumToFloats(e, sum, global_tokens, m, out));
#ifndef FSDP_EXACT_FIXED_POINT_SUM_H_
#define FSDP_EXACT_FIXED_POINT_SUM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

// Bits below the bound 2^E: the quantum is 2^(E - kExactFractionBits).
inline constexpr int kExactFractionBits = 43;
// At most this many contributions per element, so that the int64 sum of
// values of at most 2^43 each cannot overflow: 2^20 - 1.
inline constexpr int64_t kExactMaxContributions =
    (int64_t{1} << (63 - kExactFractionBits)) - 1;
// ExactExponentFor's range: every nonzero |float| is at least 2^-149, and
// every finite one is below 2^128.
inline constexpr int kExactMinExponent = -149;
inline constexpr int kExactMaxExponent = 128 + 16;
// Headroom the trainer leaves above the previous step's largest
// contribution: a gradient may grow 2^3 = 8-fold before a step is redone.
inline constexpr int kExactHeadroomBits = 3;

// sum[i] += round-to-nearest-even(contribution[i] / 2^(exponent - 43)), in
// wrapping int64 arithmetic (defined even for a contribution over the bound,
// whose sum the caller then discards). Returns the largest |contribution[i]|
// (0 for an empty span; NaN if any is NaN, else +inf if any is infinite):
// with ExactSumStateOf, whether the span fit. Bit-identical in every ISA
// variant. The spans must have the same size.
float AddToExactSum(int exponent, absl::Span<const float> contribution,
                    absl::Span<int64_t> sum);
float AddToExactSum(KernelIsa isa, int exponent, absl::Span<const float> contribution,
                    absl::Span<int64_t> sum);

// The larger of two magnitudes (|a| or |b|; MaxAbs results, AddToExactSum
// returns), NaN winning over inf over any finite value: order-free, so every
// rank combines the ranks' maxima alike.
float LargerMagnitude(float a, float b);

// The exact sum of scalar contributions (each value one, at `exponent`;
// a loss per sequence): AddToExactSum of each into one int64.
int64_t ExactSumOfValues(int exponent, absl::Span<const float> values);

enum class ExactSumState {
  kExact,      // every contribution within 2^E: the sum is exact
  kOverflow,   // a finite contribution above 2^E: redo with a larger E
  kNonFinite,  // a NaN or infinite contribution: the result is NaN
};
const char* ExactSumStateName(ExactSumState state);  // "exact", "overflow", "non-finite"

// The state of a sum with `exponent` whose contributions' largest magnitude
// (agreed across ranks) is `max_abs`.
ExactSumState ExactSumStateOf(float max_abs, int exponent);

// The smallest E >= kExactMinExponent with max_abs <= 2^E, plus
// headroom_bits, capped at kExactMaxExponent. kExactMinExponent for 0 (no
// information: the next sum that has any nonzero contribution is redone).
// max_abs must be finite and >= 0; headroom_bits >= 0.
int ExactExponentFor(float max_abs, int headroom_bits);

// out[i] = float(double(sum[i]) * f), f = 2^(exponent - 43) / divisor
// computed once in double, for state kExact; NaN in every element for
// kNonFinite. FailedPrecondition for kOverflow (the integers are
// meaningless: redo with ExactExponentFor(max_abs, 0)); InvalidArgument for
// divisor < 1 or spans of different sizes. `out` is written only on OK.
absl::Status ExactSumToFloats(int exponent, absl::Span<const int64_t> sum, int64_t divisor,
                              float max_abs, absl::Span<float> out);

// One tensor's elements [begin, end) of a region of exact sums, the exponent
// of its sum and the agreed largest contribution.
struct ExactSegment {
  int64_t begin = 0;
  int64_t end = 0;
  int exponent = 0;
  float max_abs = 0.0f;
};

// Converts a region of int64 sums to fp32 IN PLACE: afterwards the region's
// memory starts with region.size() floats, float i being sum i as
// ExactSumToFloats converts it with its segment's exponent and maximum
// (NaN for a non-finite one), divided by `divisor`. Elements in no segment
// (zero sums: padding, gaps between tensors) become 0. The segments must be
// ascending, disjoint and inside the region (InvalidArgument otherwise);
// FailedPrecondition, with nothing converted, if one overflows.
absl::Status ExactSumsToFloatsInPlace(absl::Span<int64_t> region,
                                      absl::Span<const ExactSegment> segments, int64_t divisor);

// OK when `count` contributions per element cannot overflow the int64 sum
// (1 <= count <= kExactMaxContributions); InvalidArgument naming the limit
// otherwise.
absl::Status CheckExactContributionCount(int64_t count);

}  // namespace fsdp

#endif  // FSDP_EXACT_FIXED_POINT_SUM_H_
