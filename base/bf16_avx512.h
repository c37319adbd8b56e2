// File: base/bf16_avx512.h
//
// bf16 <-> fp32 for 16 lanes with AVX-512F intrinsics, shared by the bulk
// conversions (base/bf16_convert.cc) and comm's bf16 reductions
// (comm/reduce.cc). Rounding is to nearest even on the dropped 16 bits with a
// NaN kept a NaN (its top half with the quiet bit set): lane by lane the
// integer formula of base::ToBf16Bits (base/bfloat16.h), so every path gives
// the same bits.
// Widening is exact (the bf16 bits become the top half).
//
// Each function is compiled for avx512f whatever the file's flags: call them
// only from code that runs where the CPU has it (base/kernel_isa.h).
#ifndef BASE_BF16_AVX512_H_
#define BASE_BF16_AVX512_H_

#include <cstdint>

// GCC 12 warns, under optimization, that its own AVX-512 intrinsics read an
// uninitialized `__Y` (the _mm512_undefined_* they start from; GCC bug
// 105593, fixed in GCC 13): not our code, and nothing is read undefined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

namespace base {

// The 16 bf16 values at `in`, widened.
__attribute__((target("avx512f"))) inline __m512 WidenBf16Avx512(const uint16_t* in) {
  const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}

// 16 floats (their bits) rounded, each result in the low half of its lane.
__attribute__((target("avx512f"))) inline __m512i RoundBf16LanesAvx512(__m512i bits) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(rounded, nan, quiet_nan);
}

// The same, narrowed to the 16 bf16 values.
__attribute__((target("avx512f"))) inline __m256i RoundBf16Avx512(__m512i bits) {
  return _mm512_cvtepi32_epi16(RoundBf16LanesAvx512(bits));
}

}  // namespace base

#endif  // BASE_BF16_AVX512_H_
