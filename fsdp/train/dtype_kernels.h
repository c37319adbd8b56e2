// File: fsdp/train/dtype_kernels.h
//
// The element-wise work the training step does on a unit's dtype-tagged
// buffers (fsdp/nn/dtype_buffer.h), each dispatching once on the dtype to
// the fp32 or bf16 kernel (base/bf16_convert.h, fsdp/optim/grad_clip.h).
// The results are those kernels' bits: a bf16 value is always the rounding
// to nearest even of the fp32 one.
#ifndef FSDP_TRAIN_DTYPE_KERNELS_H_
#define FSDP_TRAIN_DTYPE_KERNELS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "fsdp/optim/grad_clip.h"
#include "fsdp/nn/dtype_buffer.h"

namespace fsdp {

// dst = src in dst's dtype (bf16: rounded). Nothing to do when dst is src's
// own memory (fp32 parameters that are their own master). Sizes must match.
void StoreFloats(DtypeSpan dst, absl::Span<const float> src);

// dst = dst + add in dst's dtype: one fp32 addition per element, then (bf16)
// one rounding. Sizes must match.
void AccumulateFloats(DtypeSpan dst, absl::Span<const float> add);

// values = values * scale, rounded to the dtype (the average of a sum).
void ScaleElements(DtypeSpan values, float scale);

// Sets every element to zero (all-zero bits in both dtypes).
void ZeroElements(DtypeSpan values);

// MaxAbs and SumOfSquareUnits (fsdp/optim/grad_clip.h) of the values as
// fp32: bf16 values widened exactly, block by block.
float MaxAbsOf(ConstDtypeSpan values);
SquareUnits SumOfSquareUnitsOf(ConstDtypeSpan values, int exponent);

// The sum of the squares of one span in any dtype, as grad_clip.h's
// SumOfSquares computes it (exact integer units, so the same for any order).
double SumOfSquaresOf(ConstDtypeSpan values);

// The sum of the squares in double precision, in one pass and a fixed
// order (element i in lane i % 8, the lanes added in order): the same bits
// for the same values every time, about 4x cheaper than SumOfSquaresOf, but
// not the same for every split of the values. For statistics (the gradient
// noise scale), never for a training value.
double SquaredNormForStatistics(ConstDtypeSpan values);

}  // namespace fsdp

#endif  // FSDP_TRAIN_DTYPE_KERNELS_H_
