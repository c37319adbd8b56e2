// File: fsdp/nn/bf16_convert.cc
//
// Integer arithmetic only (round to nearest even on the dropped 16 bits, NaN
// kept quiet), so the AVX-512 path and the scalar path give the same bits on
// every machine. GCC 12 does not vectorize the scalar loops by itself, so the
// AVX-512 paths (rounding and widening) are written with intrinsics and
// chosen at run time.
#include "fsdp/nn/bf16_convert.h"

#include <immintrin.h>

#include <cstring>

namespace fsdp {
namespace {

inline uint16_t RoundToBf16(uint32_t bits) {
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(nan ? ((bits >> 16) | 0x0040u) : rounded);
}

void ToBf16Scalar(uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, in + i, sizeof(bits));
    out[i] = RoundToBf16(bits);
  }
}

// 16 floats at a time; the same formula as RoundToBf16, lane by lane. Reads
// a block before writing it, so it is also correct in place (out at the
// start of in), as ToBf16InPlace needs.
__attribute__((target("avx512f"))) void ToBf16Avx512(uint16_t* out, const float* in,
                                                     int64_t n) {
  const __m512i bias = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x0040);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i bits = _mm512_loadu_si512(in + i);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(bias, lsb)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, abs_mask), inf);
    const __m512i nan_value = _mm512_or_si512(_mm512_srli_epi32(bits, 16), quiet);
    const __m512i result = _mm512_mask_mov_epi32(rounded, nan, nan_value);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(result));
  }
  ToBf16Scalar(out + i, in + i, n - i);
}

// Widening is exact (the bf16 bits become the high half): 16 at a time,
// returning how many it did; the caller finishes the tail.
__attribute__((target("avx512f"))) int64_t FromBf16Avx512(float* out, const uint16_t* in,
                                                          int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
  }
  return i;
}

bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

}  // namespace

void ToBf16(uint16_t* out, const float* in, int64_t n) {
  if (HasAvx512()) {
    ToBf16Avx512(out, in, n);
  } else {
    ToBf16Scalar(out, in, n);
  }
}

void ToBf16InPlace(float* data, int64_t n) {
  uint16_t* out = reinterpret_cast<uint16_t*>(data);
  if (HasAvx512()) {
    // Block i (16 floats at bytes 64i..) is loaded before its bf16 half is
    // stored at bytes 32i.., which never reaches a block not yet loaded.
    ToBf16Avx512(out, data, n);
    return;
  }
  // Element i is read (bytes 4i..) before it is written (bytes 2i..).
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, data + i, sizeof(bits));
    out[i] = RoundToBf16(bits);
  }
}

void FromBf16(float* out, const uint16_t* in, int64_t n) {
  int64_t i = 0;
  if (HasAvx512()) i = FromBf16Avx512(out, in, n);
  for (; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(out + i, &bits, sizeof(bits));
  }
}

// In blocks through a small fp32 buffer, so the rounding is ToBf16's.
void AccumulateToBf16(uint16_t* acc, const float* add, int64_t n) {
  ForEachWidenedBlock(acc, n, [&](float* sum, int64_t begin, int64_t m) {
    for (int64_t i = 0; i < m; ++i) sum[i] += add[begin + i];
    ToBf16(acc + begin, sum, m);
  });
}

void ScaleBf16InPlace(uint16_t* data, int64_t n, float scale) {
  ForEachWidenedBlock(data, n, [&](float* widened, int64_t begin, int64_t m) {
    for (int64_t i = 0; i < m; ++i) widened[i] *= scale;
    ToBf16(data + begin, widened, m);
  });
}

void RoundThroughBf16(float* data, int64_t n) {
  uint16_t rounded[kWidenBlock];
  for (int64_t begin = 0; begin < n; begin += kWidenBlock) {
    const int64_t m = std::min(kWidenBlock, n - begin);
    ToBf16(rounded, data + begin, m);
    FromBf16(data + begin, rounded, m);
  }
}

}  // namespace fsdp
