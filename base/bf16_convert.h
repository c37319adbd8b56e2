// File: base/bf16_convert.h
//
// The bulk bf16 conversions, used by comm/ and fsdp/: fp32 -> bf16 over
// arrays (ToBf16), rounding to nearest even (NaN stays NaN), the bits of
// base::ToBf16Bits (base/bfloat16.h) element for element, vectorized with
// AVX-512 where the CPU has it; bf16 -> fp32 (FromBf16) is exact: the bf16
// bits become the top half of the float. The bf16 compute mode
// (docs/compute.md, "Precision") converts weights, matmul inputs and output
// gradients with it, the bf16 gradients are accumulated and averaged with it.
#ifndef BASE_BF16_CONVERT_H_
#define BASE_BF16_CONVERT_H_

#include <algorithm>
#include <cstdint>

namespace base {

void ToBf16(uint16_t* out, const float* in, int64_t n);

// ToBf16 without the CPU's bf16 conversion (integer AVX-512 or scalar), the
// same bits: for the tests and the benchmark that compare the two paths.
void ToBf16IntegerPath(uint16_t* out, const float* in, int64_t n);

// Which path ToBf16 takes here: "avx512_bf16", "avx512 integer" or "scalar".
const char* ToBf16PathName();

// Converts `n` floats at `data` to bf16 in the same memory: the bf16 values
// end up packed in the first 2n bytes. Safe because element i is written at
// byte 2i after element i (at byte 4i) has been read, in increasing order.
void ToBf16InPlace(float* data, int64_t n);

// Widens `n` bf16 values to fp32 (exact).
void FromBf16(float* out, const uint16_t* in, int64_t n);

// acc[i] = bf16(fp32(acc[i]) + add[i]): a bf16 accumulator (the 2-byte
// gradients of --reduce_dtype=bf16) takes one fp32 addition per element and
// one rounding, the same bits in every ISA path.
void AccumulateToBf16(uint16_t* acc, const float* add, int64_t n);

// data[i] = bf16(fp32(data[i]) * scale), in one pass, 16 values at a time in
// registers where the CPU has AVX-512: the averaging of reduced bf16
// gradients.
void ScaleBf16InPlace(uint16_t* data, int64_t n, float scale);

// data[i] = fp32(bf16(data[i])): the values a bf16 buffer would hold, kept
// as floats.
void RoundThroughBf16(float* data, int64_t n);

// Elements per block of ForEachWidenedBlock: 4 KiB of floats, which stay in
// L1 while the consumer works on them.
inline constexpr int64_t kWidenBlock = 1024;

// Calls fn(block, begin, len) for consecutive blocks of the `n` bf16 values
// at `in`, each widened (exactly) into `block` (float*, writable scratch):
// a consumer that wants floats reads every bf16 value from memory once and
// never writes a widened copy of the whole array (SGD and the gradient
// norm's sum of squares under --precision=bf16).
template <typename Fn>
void ForEachWidenedBlock(const uint16_t* in, int64_t n, Fn&& fn) {
  alignas(64) float block[kWidenBlock];
  for (int64_t begin = 0; begin < n; begin += kWidenBlock) {
    const int64_t len = std::min(kWidenBlock, n - begin);
    FromBf16(block, in + begin, len);
    fn(block, begin, len);
  }
}

}  // namespace base

#endif  // BASE_BF16_CONVERT_H_
