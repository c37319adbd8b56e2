// File: fsdp/optim/grad_clip.h
//
// Global-norm gradient clipping, torch.nn.utils.clip_grad_norm_'s formula
// (scale = min(1, max_norm / (||g|| + 1e-6))), with a sum of squares that is
// the same to the last bit however the gradient is split among ranks.
//
// [Note: exact sum of squares] Strategies split a unit's gradient among
// ranks differently (no_shard and full_shard into world-size slices,
// hybrid_shard into shard-group slices, a resumed run into another world
// size's), and a floating-point sum depends on the split: fp32 partial sums
// added by an all-reduce gave hybrid_shard a clip scale one ulp off
// no_shard's whenever the roundings fell differently (seen on an AVX512_BF16
// machine under --precision=bf16). Integer sums do not depend on the split or
// the order, so the squares are summed as integers:
//   1. every rank takes the largest |g| of its shards (MaxAbs; combine with
//      LargerMagnitude); the ranks exchange theirs and keep the largest, M;
//   2. SquareUnitExponent(M) fixes one unit u = 2^e with M^2 < 2^52 u;
//   3. every rank sums round(g_i^2 / u) over its shards (SumOfSquareUnits:
//      16 int64 lanes, flushed into a 128-bit total before they can
//      overflow), exactly;
//   4. the ranks exchange their totals and add them (integers again), and
//      SquareSumFromUnits turns the total into a double.
// Each square is rounded to a multiple of u <= M^2 2^-50, so the result is
// within n 2^-51 M^2 of the exact sum of n squares: relative error at most
// n 2^-51 (one huge element among n tiny ones), and about sqrt(n) 2^-52 when
// the roundings have random signs. One process calls SumOfSquares, which does
// the four steps on one span.
//
//   float m = 0;  for (shard : mine) m = LargerMagnitude(m, MaxAbs(shard));
//   M = the LargerMagnitude of every rank's m;            // exchanged
//   if (!std::isfinite(M)) sq = double{M} * M;  else if (M == 0) sq = 0;  else {
//     int e = SquareUnitExponent(M);
//     SquareUnits u = 0;  for (shard : mine) u += SumOfSquareUnits(shard, e);
//     sq = SquareSumFromUnits(sum of every rank's u, e);  // exchanged
//   }
//   ScaleInPlace(my_shard, ClipScale(sq, max_norm));  // or as the optimizer's
//                                                     // grad_scale (the trainer)
#ifndef FSDP_OPTIM_GRAD_CLIP_H_
#define FSDP_OPTIM_GRAD_CLIP_H_

#include <cstdint>

#include "absl/types/span.h"
#include "fsdp/nn/fixed_point_sum.h"
#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

// Sum of squares in units of 2^exponent (step 3 above).
using SquareUnits = unsigned __int128;

// The largest |g| of the span (0 for an empty one); NaN if any element is
// NaN, else +inf if any is infinite. Exact, so any split gives the same.
float MaxAbs(absl::Span<const float> values);
float MaxAbs(KernelIsa isa, absl::Span<const float> values);

// LargerMagnitude(a, b), the order-free way to combine two MaxAbs results:
// fsdp/nn/fixed_point_sum.h.

// The smallest e with max_abs^2 < 2^(52 + e) for max_abs rounded up to a
// power of two (so 2^e <= max_abs^2 2^-50); max_abs finite and positive.
int SquareUnitExponent(float max_abs);

// Sum over the span of round-to-nearest-even(g_i^2 / 2^exponent), with
// exponent = SquareUnitExponent(M) for an M >= max |g_i|. Bit-identical in
// every ISA variant, for any alignment.
SquareUnits SumOfSquareUnits(absl::Span<const float> values, int exponent);
SquareUnits SumOfSquareUnits(KernelIsa isa, absl::Span<const float> values, int exponent);

// The same two on bf16 values (the 2-byte gradients of --precision=bf16),
// widened in registers (the maximum) or block by block in L1 (the sum):
// exactly MaxAbs and SumOfSquareUnits of the widened span, without writing
// it anywhere.
float MaxAbsBf16(absl::Span<const uint16_t> values);
float MaxAbsBf16(KernelIsa isa, absl::Span<const uint16_t> values);
SquareUnits SumOfSquareUnitsBf16(absl::Span<const uint16_t> values, int exponent);
SquareUnits SumOfSquareUnitsBf16(KernelIsa isa, absl::Span<const uint16_t> values,
                                 int exponent);

// units * 2^exponent as a double.
double SquareSumFromUnits(SquareUnits units, int exponent);

// The four steps on one span: sum of g_i^2, exactly as the sharded form
// gives it for any split of the span. NaN if any element is NaN, else +inf
// if any is infinite.
double SumOfSquares(absl::Span<const float> values);
double SumOfSquares(KernelIsa isa, absl::Span<const float> values);

// The factor to multiply gradients by; 1 when the norm is within max_norm or
// when max_norm <= 0 (clipping disabled).
float ClipScale(double global_sq_norm, float max_norm);

void ScaleInPlace(absl::Span<float> values, float scale);
void ScaleInPlace(KernelIsa isa, absl::Span<float> values, float scale);

}  // namespace fsdp

#endif  // FSDP_OPTIM_GRAD_CLIP_H_
