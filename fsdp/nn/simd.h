// File: fsdp/nn/simd.h
//
// The building blocks of the element-wise kernels: a 16-float vector type
// (GCC vector extensions), loads and stores at any address, a partial load
// and store for the tail, fixed-order reductions, and exp/tanh by polynomial.
// Only kernel .cc files include this header (each is built with the copts of
// the kernel libraries: -O2 -ffp-contract=off -fno-math-errno -Wno-psabi).
//
//   FSDP_SIMD_INLINE void ScaleBody(float* x, int64_t n, float s) { ... }
//   FSDP_ISA_VARIANTS(void, Scale, (float* x, int64_t n, float s), (x, n, s))
//   void Scale(KernelIsa isa, float* x, int64_t n, float s) {
//     FSDP_ISA_DISPATCH(isa, Scale, (x, n, s));
//   }
// (the variant macros and the CPU detection are base/kernel_isa.h's, shared
// with comm's reductions)
//
// [Note: ISA-independent results] Every kernel is written for 16 float lanes
// (or 16 double lanes, as two 8-double vectors) whatever the machine: GCC
// lowers one F16 operation to one zmm instruction under avx512f, two ymm
// under avx2 and four xmm under SSE2. Lane j always holds the elements whose
// index i (counted from the start of the span, never from an aligned
// address) has i % 16 == j; reductions combine the 16 lanes by one fixed
// tree (ReduceAdd); the tail is padded to 16 lanes with a neutral value and
// goes through the same code. Only IEEE-exact operations are used (+ - * /
// sqrt, compares, integer bit operations: no libm, no rsqrt estimates) and
// -ffp-contract=off forbids fusing a*b+c into an FMA (which avx512f, and
// only it, would otherwise do). So every ISA variant returns bit-identical
// results, on any machine, for any alignment of the buffers; the results
// depend on the span lengths only (tests/fsdp/nn/kernels_test.cc checks this
// for every variant the CPU supports).
//
// Why hand-written vectors and not oneDNN's eltwise / layer-norm / softmax
// primitives: oneDNN JITs a different instruction sequence per ISA (and
// per thread count), so its results would differ between the Xeon and the
// EPYC and between an AVX2 fallback and AVX-512; its primitives are also
// created per shape and run under OpenMP, which the per-rank thread
// discipline (compute_threads.h) does not govern. These kernels are
// memory-bound after vectorization (see //tests/fsdp/nn:kernel_benchmark).
#ifndef FSDP_NN_SIMD_H_
#define FSDP_NN_SIMD_H_

#include <cstdint>
#include <cstring>
#include <limits>

#include "base/status_macros.h"
#include "fsdp/nn/kernel_isa.h"

#define FSDP_SIMD_INLINE inline __attribute__((always_inline))

namespace fsdp {
namespace simd {

inline constexpr int kLanes = 16;

typedef float F16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
typedef float F8 __attribute__((vector_size(32)));
typedef float F4 __attribute__((vector_size(16)));
typedef float F2 __attribute__((vector_size(8)));
typedef double D8 __attribute__((vector_size(64)));
typedef uint16_t U16x16 __attribute__((vector_size(32)));
typedef uint32_t U32x16 __attribute__((vector_size(64)));

// 16 double lanes: lo holds lanes 0-7, hi lanes 8-15.
struct D16 {
  D8 lo;
  D8 hi;
};

FSDP_SIMD_INLINE F16 Splat(float x) { return F16{} + x; }

// memcpy: loads and stores at any alignment (compiles to vmovups).
FSDP_SIMD_INLINE F16 Load(const float* p) {
  F16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

FSDP_SIMD_INLINE void Store(float* p, F16 v) { std::memcpy(p, &v, sizeof(v)); }

// The first n (< 16) floats at p, the other lanes set to `fill`.
FSDP_SIMD_INLINE F16 LoadPartial(const float* p, int64_t n, float fill) {
  float lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = fill;
  std::memcpy(lanes, p, n * sizeof(float));
  return Load(lanes);
}

FSDP_SIMD_INLINE void StorePartial(float* p, F16 v, int64_t n) {
  float lanes[kLanes];
  Store(lanes, v);
  std::memcpy(p, lanes, n * sizeof(float));
}

// 16 bf16 values (their uint16_t bits) at p, widened exactly: the bits become
// the top half of each float. The conversion zero-extends in registers
// (vpmovzxwd under avx512f); a lane-by-lane loop built the vector on the
// stack, in two 32-byte halves that a 64-byte reload cannot forward from,
// and stalled every load (half of the bf16 softmax backward's time in a
// profile, 2026-12-06).
FSDP_SIMD_INLINE F16 LoadBf16(const uint16_t* p) {
  U16x16 half;
  std::memcpy(&half, p, sizeof(half));
  const U32x16 bits = __builtin_convertvector(half, U32x16) << 16;
  F16 v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

// The first n (< 16) bf16 values at p widened, the other lanes 0.
FSDP_SIMD_INLINE F16 LoadBf16Partial(const uint16_t* p, int64_t n) {
  uint16_t lanes[kLanes] = {};
  std::memcpy(lanes, p, n * sizeof(uint16_t));
  return LoadBf16(lanes);
}

// 16 floats rounded to bf16 bits: to nearest even, a NaN quieted (its top
// half with the quiet bit set), lane by lane the formula of RoundToBf16 in
// base/bf16_convert.cc, so the bits equal ToBf16's on every path. For
// kernels that produce a value and store it rounded in the same pass, where
// a separate ToBf16 would read the fp32 array back.
FSDP_SIMD_INLINE U16x16 RoundToBf16(F16 v) {
  U32x16 bits;
  std::memcpy(&bits, &v, sizeof(bits));
  const U32x16 rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const U32x16 quieted = (bits >> 16) | 0x40u;
  // Compared as signed: both sides are below 2^31 once the sign is masked.
  I16 magnitude;
  const U32x16 masked = bits & 0x7fffffffu;
  std::memcpy(&magnitude, &masked, sizeof(magnitude));
  U32x16 result;
  for (int j = 0; j < kLanes; ++j) result[j] = magnitude[j] > 0x7f800000 ? quieted[j] : rounded[j];
  return __builtin_convertvector(result, U16x16);
}

FSDP_SIMD_INLINE void StoreBf16(uint16_t* p, F16 v) {
  const U16x16 half = RoundToBf16(v);
  std::memcpy(p, &half, sizeof(half));
}

// The first n (< 16) lanes of v, rounded, at p.
FSDP_SIMD_INLINE void StoreBf16Partial(uint16_t* p, F16 v, int64_t n) {
  uint16_t lanes[kLanes];
  StoreBf16(lanes, v);
  std::memcpy(p, lanes, n * sizeof(uint16_t));
}

// 16 values as floats, from fp32 as they are or from bf16 widened: for
// kernels that take either (the optimizer and the gradient norm).
FSDP_SIMD_INLINE F16 LoadAsFloat(const float* p) { return Load(p); }
FSDP_SIMD_INLINE F16 LoadAsFloat(const uint16_t* p) { return LoadBf16(p); }
FSDP_SIMD_INLINE F16 LoadAsFloatPartial(const float* p, int64_t n) {
  return LoadPartial(p, n, 0.0f);
}
FSDP_SIMD_INLINE F16 LoadAsFloatPartial(const uint16_t* p, int64_t n) {
  return LoadBf16Partial(p, n);
}

// n <= kLanes values: a whole vector when n == kLanes, else the first n
// (loads pad with 0): one loop body for a row's full vectors and its tail.
FSDP_SIMD_INLINE F16 LoadUpTo(const float* p, int64_t n) {
  return n == kLanes ? Load(p) : LoadPartial(p, n, 0.0f);
}
FSDP_SIMD_INLINE void StoreUpTo(float* p, F16 v, int64_t n) {
  if (n == kLanes) {
    Store(p, v);
  } else {
    StorePartial(p, v, n);
  }
}
FSDP_SIMD_INLINE void StoreUpTo(uint16_t* p, F16 v, int64_t n) {  // rounded to bf16
  if (n == kLanes) {
    StoreBf16(p, v);
  } else {
    StoreBf16Partial(p, v, n);
  }
}

// Selects are written as lane loops rather than vector `?:`: GCC 12 splits a
// 64-byte `?:` into scalar code under avx2 (measured 1.2x slower than SSE2),
// while it turns these loops into whole-register vmaxps / blends everywhere.
FSDP_SIMD_INLINE F16 Max(F16 a, F16 b) {
  F16 r;
  for (int j = 0; j < kLanes; ++j) r[j] = a[j] > b[j] ? a[j] : b[j];
  return r;
}

FSDP_SIMD_INLINE F16 Min(F16 a, F16 b) {
  F16 r;
  for (int j = 0; j < kLanes; ++j) r[j] = a[j] < b[j] ? a[j] : b[j];
  return r;
}

// |v|'s bits as integers: for non-negative floats they order like the floats,
// and NaN's (0x7f800001 and up) above +inf's (0x7f800000), so an integer
// maximum of them (MaxLanes) is the largest magnitude with NaN winning, in
// one compare per lane (the gradient norm's MaxAbs, the exact sums).
FSDP_SIMD_INLINE I16 AbsBits(F16 v) {
  I16 bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits & 0x7fffffff;
}

FSDP_SIMD_INLINE I16 MaxLanes(I16 a, I16 b) {
  I16 r;
  for (int j = 0; j < kLanes; ++j) r[j] = a[j] > b[j] ? a[j] : b[j];
  return r;
}

FSDP_SIMD_INLINE F16 Sqrt(F16 v) {
  F16 r;
  // -fno-math-errno lets GCC turn this into one vsqrtps (correctly rounded).
  for (int j = 0; j < kLanes; ++j) r[j] = __builtin_sqrtf(v[j]);
  return r;
}

FSDP_SIMD_INLINE D16 ToDouble(F16 v) {
  F8 lo, hi;
  std::memcpy(&lo, &v, sizeof(lo));
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof(lo), sizeof(hi));
  return D16{__builtin_convertvector(lo, D8), __builtin_convertvector(hi, D8)};
}

// Fixed tree: lanes j and j + 8, then j and j + 4, ... (see the note above),
// each level one vector operation on halves taken in registers (a store and
// 15 scalar reloads before; the same additions, so the same bits).
FSDP_SIMD_INLINE float ReduceAdd(F16 v) {
  const F8 s8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const F4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) +
                __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
  const F2 s2 = __builtin_shufflevector(s4, s4, 0, 1) + __builtin_shufflevector(s4, s4, 2, 3);
  return s2[0] + s2[1];
}

FSDP_SIMD_INLINE double ReduceAdd(D16 v) {
  double t[kLanes];
  std::memcpy(t, &v.lo, sizeof(v.lo));
  std::memcpy(t + kLanes / 2, &v.hi, sizeof(v.hi));
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) t[j] += t[j + width];
  }
  return t[0];
}

// The same tree for the maximum: at each level lane j takes lane j + width
// when that is greater (so a NaN in lane j stays, one in j + width loses).
template <typename V, int kWidth>
FSDP_SIMD_INLINE V MaxOfHalves(V lo, V hi) {
  V r;
  for (int j = 0; j < kWidth; ++j) r[j] = hi[j] > lo[j] ? hi[j] : lo[j];
  return r;
}

FSDP_SIMD_INLINE float ReduceMax(F16 v) {
  const F8 m8 = MaxOfHalves<F8, 8>(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
                                   __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
  const F4 m4 = MaxOfHalves<F4, 4>(__builtin_shufflevector(m8, m8, 0, 1, 2, 3),
                                   __builtin_shufflevector(m8, m8, 4, 5, 6, 7));
  const F2 m2 = MaxOfHalves<F2, 2>(__builtin_shufflevector(m4, m4, 0, 1),
                                   __builtin_shufflevector(m4, m4, 2, 3));
  return m2[1] > m2[0] ? m2[1] : m2[0];
}

inline constexpr float kExpHigh = 88.0f;
inline constexpr float kExpLow = -87.33654475f;  // ln(2^-126): the smallest normal

// exp(x) for x already within [kExpLow, kExpHigh] (NaN gives NaN): Exp
// below without its saturated lanes, for a caller that clamps its argument
// itself (GELU, whose x / (1 + exp(z)) saturates by itself).
FSDP_SIMD_INLINE F16 ExpInRange(F16 clamped) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const F16 shifted = clamped * kLog2e + kRound;
  const F16 n = shifted - kRound;
  F16 r = clamped - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  F16 p = Splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F16 e = p * (r * r) + r + 1.0f;
  // The integer n sits in the low mantissa bits of `shifted`.
  I16 exponent;
  const float round_bias = kRound;
  int32_t round_bits;
  std::memcpy(&round_bits, &round_bias, sizeof(round_bits));
  std::memcpy(&exponent, &shifted, sizeof(exponent));
  exponent = (exponent - round_bits + 127) << 23;
  F16 scale;
  std::memcpy(&scale, &exponent, sizeof(scale));
  return e * scale;
}

// exp(x), Cephes' expf scheme: x = n ln2 + r with |r| <= ln2/2 (ln2 split in
// two so n ln2 is exact), exp(r) by a degree-7 polynomial, 2^n built in the
// exponent bits. Within 2 ulp of the exact result on normal outputs
// (tests/fsdp/nn/vector_math_test.cc sweeps it). x < -87.336 (where exp
// would be subnormal) gives 0, x > 88 gives +inf (exp(88.72) is the largest
// float; inputs in between are never produced by a softmax, whose arguments
// are <= 0), NaN gives NaN.
FSDP_SIMD_INLINE F16 Exp(F16 x) {
  const F16 scaled = ExpInRange(Max(Min(x, Splat(kExpHigh)), Splat(kExpLow)));
  F16 result;
  for (int j = 0; j < kLanes; ++j) {
    const float v = x[j] < kExpLow ? 0.0f : scaled[j];
    result[j] = x[j] > kExpHigh ? std::numeric_limits<float>::infinity() : v;
  }
  // NaN fails both compares above; clamped (Min, Max) passed it through.
  for (int j = 0; j < kLanes; ++j) result[j] = x[j] != x[j] ? x[j] : result[j];
  return result;
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~1e-7 (relative error grows
// only for |u| < 1e-3, where GELU's 0.5 x (1 + tanh) is dominated by the 1).
// Saturates correctly: exp = inf gives 1, exp = 0 gives -1.
FSDP_SIMD_INLINE F16 Tanh(F16 u) { return 1.0f - 2.0f / (Exp(2.0f * u) + 1.0f); }

}  // namespace simd
}  // namespace fsdp

#endif  // FSDP_NN_SIMD_H_
