// File: base/bf16_convert.cc
//
// Round to nearest even on the dropped 16 bits, NaN kept quiet: the scalar
// formula ToBf16Bits (base/bfloat16.h), which every path reproduces bit for bit on every
// machine (the AVX-512 path lane by lane in integers; the AVX512_BF16 path
// with the CPU's conversion, which agrees except on denormals, which it hands
// to the integer path). GCC 12 does not vectorize the scalar loops by itself,
// so the vector paths (rounding and widening) are written with intrinsics and
// chosen at run time.
#include "base/bf16_convert.h"

#include "base/bf16_avx512.h"
#include "base/bfloat16.h"
#include "base/parallel_for.h"

namespace base {
namespace {

void ToBf16Scalar(uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ToBf16Bits(in[i]);
}

// 16 floats at a time. Reads a block before writing it, so it is also
// correct in place (out at the start of in), as ToBf16InPlace needs.
__attribute__((target("avx512f"))) void ToBf16Avx512(uint16_t* out, const float* in,
                                                     int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        base::RoundBf16Avx512(_mm512_loadu_si512(in + i)));
  }
  ToBf16Scalar(out + i, in + i, n - i);
}

// AVX512_BF16's conversion (vcvtneps2bf16) rounds to nearest even and quiets
// a NaN exactly as ToBf16Bits does, but reads a denormal input as zero: a
// vector holding one takes the integer path, so the bits are ToBf16Bits's
// everywhere (matmul_test sweeps the bit patterns). Why it is here: over
// arrays that stream from memory it ran 1.7-1.9x as fast as the integer path
// (kernel_benchmark's "ToBf16 16.8 M" row: 4.7 against 2.5 ms, AMD EPYC Zen 5,
// 2026-12-05); on blocks already in L1 the two are even. In place as
// ToBf16Avx512.
__attribute__((target("avx512f,avx512bf16"))) inline __m256i RoundVectorAvx512Bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __mmask16 zero_exponent = _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7f800000));
  const __mmask16 denormal =
      _mm512_mask_test_epi32_mask(zero_exponent, bits, _mm512_set1_epi32(0x007fffff));
  return denormal == 0 ? reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v))
                       : base::RoundBf16Avx512(bits);
}

__attribute__((target("avx512f,avx512bf16"))) void ToBf16Avx512Bf16(uint16_t* out,
                                                                    const float* in, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        RoundVectorAvx512Bf16(_mm512_loadu_ps(in + i)));
  }
  ToBf16Scalar(out + i, in + i, n - i);
}

// Widening is exact (the bf16 bits become the high half): 16 at a time,
// returning how many it did; the caller finishes the tail.
__attribute__((target("avx512f"))) int64_t FromBf16Avx512(float* out, const uint16_t* in,
                                                          int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, base::WidenBf16Avx512(in + i));
  }
  return i;
}

// data[i] = bf16(fp32(data[i]) * scale), 16 at a time in registers: the
// widening, the one IEEE multiplication and the rounding of ScaleBf16InPlace's
// scalar loop. Each returns how many it did; the caller finishes the tail.
__attribute__((target("avx512f"))) int64_t ScaleBf16Avx512(uint16_t* data, int64_t n,
                                                           float scale) {
  const __m512 factor = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_mul_ps(base::WidenBf16Avx512(data + i), factor);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(data + i),
                        base::RoundBf16Avx512(_mm512_castps_si512(v)));
  }
  return i;
}

__attribute__((target("avx512f,avx512bf16"))) int64_t ScaleBf16Avx512Bf16(uint16_t* data,
                                                                          int64_t n,
                                                                          float scale) {
  const __m512 factor = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_mul_ps(base::WidenBf16Avx512(data + i), factor);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(data + i), RoundVectorAvx512Bf16(v));
  }
  return i;
}

bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

bool HasAvx512Bf16() {
  static const bool has = HasAvx512() && __builtin_cpu_supports("avx512bf16");
  return has;
}

// The fastest exact rounding this CPU has.
void ToBf16Best(uint16_t* out, const float* in, int64_t n) {
  if (HasAvx512Bf16()) {
    ToBf16Avx512Bf16(out, in, n);
  } else if (HasAvx512()) {
    ToBf16Avx512(out, in, n);
  } else {
    ToBf16Scalar(out, in, n);
  }
}

void FromBf16Serial(float* out, const uint16_t* in, int64_t n) {
  int64_t i = 0;
  if (HasAvx512()) i = FromBf16Avx512(out, in, n);
  for (; i < n; ++i) out[i] = FromBf16Bits(in[i]);
}

}  // namespace

// Element-wise: any cut gives the same bits (base/parallel_for.h).
constexpr int64_t kPiece = 16384;

void ToBf16(uint16_t* out, const float* in, int64_t n) {
  ParallelFor(n, kPiece, [&](int64_t begin, int64_t end) {
    ToBf16Best(out + begin, in + begin, end - begin);
  });
}

void ToBf16IntegerPath(uint16_t* out, const float* in, int64_t n) {
  if (HasAvx512()) {
    ToBf16Avx512(out, in, n);
  } else {
    ToBf16Scalar(out, in, n);
  }
}

const char* ToBf16PathName() {
  if (HasAvx512Bf16()) return "avx512_bf16";
  return HasAvx512() ? "avx512 integer" : "scalar";
}

// Every path reads in increasing order and never writes ahead of what it has
// read: the vector ones load block i (16 floats at bytes 64i..) before
// storing its bf16 half at bytes 32i.., the scalar one reads element i
// (bytes 4i..) before writing it (bytes 2i..).
void ToBf16InPlace(float* data, int64_t n) {
  ToBf16Best(reinterpret_cast<uint16_t*>(data), data, n);
}

void FromBf16(float* out, const uint16_t* in, int64_t n) {
  ParallelFor(n, kPiece, [&](int64_t begin, int64_t end) {
    FromBf16Serial(out + begin, in + begin, end - begin);
  });
}

// In blocks through a small fp32 buffer, so the rounding is ToBf16's.
void AccumulateToBf16(uint16_t* acc, const float* add, int64_t n) {
  ParallelFor(n, kPiece, [&](int64_t piece_begin, int64_t piece_end) {
    uint16_t* piece_acc = acc + piece_begin;
    const float* piece_add = add + piece_begin;
    ForEachWidenedBlock(piece_acc, piece_end - piece_begin,
                        [&](float* sum, int64_t begin, int64_t m) {
                          for (int64_t i = 0; i < m; ++i) sum[i] += piece_add[begin + i];
                          ToBf16Best(piece_acc + begin, sum, m);
                        });
  });
}

void ScaleBf16InPlace(uint16_t* data, int64_t n, float scale) {
  ParallelFor(n, kPiece, [&](int64_t begin, int64_t end) {
    uint16_t* piece = data + begin;
    const int64_t m = end - begin;
    int64_t i = 0;
    if (HasAvx512Bf16()) {
      i = ScaleBf16Avx512Bf16(piece, m, scale);
    } else if (HasAvx512()) {
      i = ScaleBf16Avx512(piece, m, scale);
    }
    for (; i < m; ++i) piece[i] = ToBf16Bits(FromBf16Bits(piece[i]) * scale);
  });
}

void RoundThroughBf16(float* data, int64_t n) {
  ParallelFor(n, kPiece, [&](int64_t piece_begin, int64_t piece_end) {
    uint16_t rounded[kWidenBlock];
    for (int64_t begin = piece_begin; begin < piece_end; begin += kWidenBlock) {
      const int64_t m = std::min(kWidenBlock, piece_end - begin);
      ToBf16Best(rounded, data + begin, m);
      FromBf16Serial(data + begin, rounded, m);
    }
  });
}

}  // namespace base
