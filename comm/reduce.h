// File: comm/reduce.h
//
// Reduction kernels: elementwise sums of two buffers, for fp32, bf16 and
// int64. int64 sums are exact (two's complement, wrapping), so their order
// does not matter at all; they take no divisor (it must be 1).
//
// Rounding rule (the same for every algorithm, which is what makes results
// reproducible bit for bit): every hop of a reduction reads two operands,
// converts bf16 operands to fp32, adds them in fp32, and rounds the sum to
// the dtype once when storing it. The last hop of a kAverage reduction
// divides the fp32 sum by the group size (a true division, not a
// multiplication by the reciprocal) before that single rounding. Partial sums
// travel between ranks in the dtype, so bf16 partials are rounded at every
// hop; fp32 adds are exact IEEE adds. Addition is commutative in IEEE
// arithmetic, so a+b and b+a give the same bits (but for which payload
// survives when both are NaN: the CPU keeps the first operand's): only the
// shape of the reduction tree matters, and each algorithm fixes it
// independently of timing.
//
// The loops are plain loops over restrict pointers so that the compiler
// vectorizes them: -O2 plus -fvect-cost-model=dynamic (set by the //comm:reduce
// target; GCC 12's default -O2 cost model vectorizes none of them), compiled
// for SSE2 and for AVX2 and picked at run time (base/kernel_isa.h); bf16 on an
// AVX-512 CPU runs 16 lanes in registers, written with intrinsics. Integer
// rounding and IEEE adds and divisions only, so every variant gives the same
// bits.
#ifndef COMM_REDUCE_H_
#define COMM_REDUCE_H_

#include <cstddef>

#include "base/kernel_isa.h"
#include "comm/dtype.h"

namespace comm {

// An out-of-place fp32 output of at least this many bytes is written with
// non-temporal stores (ReduceSumChain's stream_output, as the direct
// reduce-scatter does): it outgrows the caches before anyone reads it.
// 2 ranks, 64 MiB, huge pages, 4 rounds: 7.55 -> 8.47 GB/s busbw (4 ranks
// and 4 KiB pages: unchanged). Not for bf16, whose reduction is bound by the
// conversions: 3.58 -> 3.31.
inline constexpr size_t kStreamOutputMinBytes = size_t{4} << 20;

// out[i] = (a[i] + b[i]) / divisor, rounded once to `dtype`. With divisor 1
// no division happens. `out` must not overlap `a` or `b`.
void ReduceSum(Dtype dtype, const void* a, const void* b, void* out, size_t count,
               float divisor = 1.0f);

// inout[i] = (inout[i] + in[i]) / divisor, rounded once. `in` and `inout` must
// not overlap.
void ReduceSumInPlace(Dtype dtype, const void* in, void* inout, size_t count,
                      float divisor = 1.0f);

// out[i] = (...((in[0][i] + in[1][i]) + in[2][i]) + ... + in[k-1][i]) / divisor,
// num_inputs = k >= 2: exactly the chain of k-1 hops a ring reduction forms
// when the inputs arrive in this order, rounded to `dtype` after every hop
// (the divisor applies to the last), so the result is bit-identical to that
// ring's. One pass: blocks of the running sum stay in a stack buffer, so
// memory sees k reads and one write per element. `out` may be exactly one
// of the inputs (same address) and must not overlap them otherwise.
// `stream_output` (ignored when `out` is an input): store with non-temporal
// stores, fenced before returning, for a large output that is not read again
// soon: a store that misses the cache otherwise reads the line first, one
// more pass over memory. Same bits either way.
void ReduceSumChain(Dtype dtype, const void* const* inputs, size_t num_inputs, void* out,
                    size_t count, float divisor = 1.0f, bool stream_output = false);

// The same three with the loops of one instruction set, which the CPU must
// have (the overloads above take the best it has): tests run every variant.
void ReduceSum(base::KernelIsa isa, Dtype dtype, const void* a, const void* b, void* out,
               size_t count, float divisor = 1.0f);
void ReduceSumInPlace(base::KernelIsa isa, Dtype dtype, const void* in, void* inout,
                      size_t count, float divisor = 1.0f);
void ReduceSumChain(base::KernelIsa isa, Dtype dtype, const void* const* inputs,
                    size_t num_inputs, void* out, size_t count, float divisor = 1.0f,
                    bool stream_output = false);

}  // namespace comm

#endif  // COMM_REDUCE_H_
