// File: comm/reduce.cc
#include "comm/reduce.h"

#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace comm {
namespace {

// The bf16 conversions of comm/dtype.h, restated branch-free on integers so
// the loops below vectorize. NaN inputs stay NaN (quieted) as in dtype.h.
inline float Bf16BitsToFloat(uint16_t value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  __builtin_memcpy(&result, &bits, sizeof(result));
  return result;
}

inline uint16_t FloatToBf16Bits(float value) {
  uint32_t bits;
  __builtin_memcpy(&bits, &value, sizeof(bits));
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

void SumFloat(const float* __restrict a, const float* __restrict b, float* __restrict out,
              size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

void SumFloatDivided(const float* __restrict a, const float* __restrict b,
                     float* __restrict out, size_t count, float divisor) {
  for (size_t i = 0; i < count; ++i) out[i] = (a[i] + b[i]) / divisor;
}

void SumFloatInPlace(const float* __restrict in, float* __restrict inout, size_t count) {
  for (size_t i = 0; i < count; ++i) inout[i] = inout[i] + in[i];
}

void SumFloatInPlaceDivided(const float* __restrict in, float* __restrict inout, size_t count,
                            float divisor) {
  for (size_t i = 0; i < count; ++i) inout[i] = (inout[i] + in[i]) / divisor;
}

void SumBf16(const uint16_t* __restrict a, const uint16_t* __restrict b,
             uint16_t* __restrict out, size_t count, float divisor) {
  if (divisor == 1.0f) {
    for (size_t i = 0; i < count; ++i) {
      out[i] = FloatToBf16Bits(Bf16BitsToFloat(a[i]) + Bf16BitsToFloat(b[i]));
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      out[i] = FloatToBf16Bits((Bf16BitsToFloat(a[i]) + Bf16BitsToFloat(b[i])) / divisor);
    }
  }
}

void SumBf16InPlace(const uint16_t* __restrict in, uint16_t* __restrict inout, size_t count,
                    float divisor) {
  if (divisor == 1.0f) {
    for (size_t i = 0; i < count; ++i) {
      inout[i] = FloatToBf16Bits(Bf16BitsToFloat(inout[i]) + Bf16BitsToFloat(in[i]));
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      inout[i] = FloatToBf16Bits((Bf16BitsToFloat(inout[i]) + Bf16BitsToFloat(in[i])) / divisor);
    }
  }
}

// The running sum of ReduceSumChain, one block at a time (fits in L1).
constexpr size_t kChainBlock = 2048;

// sum[i] += in[i]; for bf16 the sum is then rounded to bf16 as the hop's
// store would round it (kept as the float of the rounded value).
void ChainAddFloat(const float* __restrict in, float* __restrict sum, size_t count) {
  for (size_t i = 0; i < count; ++i) sum[i] += in[i];
}

void ChainAddBf16(const uint16_t* __restrict in, float* __restrict sum, size_t count,
                  bool round) {
  if (round) {
    for (size_t i = 0; i < count; ++i) {
      sum[i] = Bf16BitsToFloat(FloatToBf16Bits(sum[i] + Bf16BitsToFloat(in[i])));
    }
  } else {
    for (size_t i = 0; i < count; ++i) sum[i] += Bf16BitsToFloat(in[i]);
  }
}

// Stream-stored outputs go through a stack block of this size.
constexpr size_t kStreamBlockBytes = 8192;

// Copies `bytes` to `dst` with non-temporal stores where dst is 16-byte
// aligned (plain copies for the unaligned head and the tail). Not fenced.
void StreamBytes(const std::byte* src, std::byte* dst, size_t bytes) {
#if defined(__SSE2__)
  size_t head = (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16;
  if (head > bytes) head = bytes;
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 16 <= bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  }
  std::memcpy(dst + i, src + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace

void ReduceSumChain(Dtype dtype, const void* const* inputs, size_t num_inputs, void* out,
                    size_t count, float divisor, bool stream_output) {
  if (num_inputs < 2) return;
  bool out_is_input = false;
  for (size_t k = 0; k < num_inputs; ++k) out_is_input |= inputs[k] == out;
  if (stream_output && !out_is_input) {
    // Each block is reduced into a stack buffer by the plain path below, then
    // streamed out: the same bits, without reading `out`'s lines first.
    const size_t element_size = DtypeSize(dtype);
    const size_t block_elements = kStreamBlockBytes / element_size;
    alignas(64) std::byte block[kStreamBlockBytes];
    std::vector<const void*> shifted(num_inputs);
    for (size_t begin = 0; begin < count; begin += block_elements) {
      const size_t n = count - begin < block_elements ? count - begin : block_elements;
      for (size_t k = 0; k < num_inputs; ++k) {
        shifted[k] = static_cast<const std::byte*>(inputs[k]) + begin * element_size;
      }
      ReduceSumChain(dtype, shifted.data(), num_inputs, block, n, divisor,
                     /*stream_output=*/false);
      StreamBytes(block, static_cast<std::byte*>(out) + begin * element_size, n * element_size);
    }
    StreamFence();
    return;
  }
  if (num_inputs == 2) {
    // One hop; commutative, so the aliased operand may go either side.
    if (out == inputs[1]) {
      ReduceSumInPlace(dtype, inputs[0], out, count, divisor);
    } else if (out == inputs[0]) {
      ReduceSumInPlace(dtype, inputs[1], out, count, divisor);
    } else {
      ReduceSum(dtype, inputs[0], inputs[1], out, count, divisor);
    }
    return;
  }
  const size_t last = num_inputs - 1;
  if (dtype == Dtype::kFloat32) {
    auto input = [&](size_t k) { return static_cast<const float*>(inputs[k]); };
    float* fo = static_cast<float*>(out);
    alignas(64) float sum[kChainBlock];
    for (size_t begin = 0; begin < count; begin += kChainBlock) {
      const size_t n = count - begin < kChainBlock ? count - begin : kChainBlock;
      SumFloat(input(0) + begin, input(1) + begin, sum, n);
      for (size_t k = 2; k < last; ++k) ChainAddFloat(input(k) + begin, sum, n);
      // The last hop; `out` may be the last input itself (in-place
      // all-reduce), which the restrict loops of SumFloat must not see.
      if (static_cast<const void*>(fo) == inputs[last]) {
        if (divisor == 1.0f) {
          SumFloatInPlace(sum, fo + begin, n);
        } else {
          SumFloatInPlaceDivided(sum, fo + begin, n, divisor);
        }
      } else if (divisor == 1.0f) {
        SumFloat(input(last) + begin, sum, fo + begin, n);
      } else {
        SumFloatDivided(input(last) + begin, sum, fo + begin, n, divisor);
      }
    }
    return;
  }
  auto input = [&](size_t k) { return static_cast<const uint16_t*>(inputs[k]); };
  uint16_t* bo = static_cast<uint16_t*>(out);
  alignas(64) float sum[kChainBlock];
  for (size_t begin = 0; begin < count; begin += kChainBlock) {
    const size_t n = count - begin < kChainBlock ? count - begin : kChainBlock;
    for (size_t i = 0; i < n; ++i) sum[i] = Bf16BitsToFloat(input(0)[begin + i]);
    for (size_t k = 1; k < last; ++k) ChainAddBf16(input(k) + begin, sum, n, /*round=*/true);
    const uint16_t* in = input(last) + begin;
    if (divisor == 1.0f) {
      for (size_t i = 0; i < n; ++i) {
        bo[begin + i] = FloatToBf16Bits(sum[i] + Bf16BitsToFloat(in[i]));
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        bo[begin + i] = FloatToBf16Bits((sum[i] + Bf16BitsToFloat(in[i])) / divisor);
      }
    }
  }
}

void ReduceSum(Dtype dtype, const void* a, const void* b, void* out, size_t count,
               float divisor) {
  if (dtype == Dtype::kFloat32) {
    auto* fa = static_cast<const float*>(a);
    auto* fb = static_cast<const float*>(b);
    auto* fo = static_cast<float*>(out);
    if (divisor == 1.0f) {
      SumFloat(fa, fb, fo, count);
    } else {
      SumFloatDivided(fa, fb, fo, count, divisor);
    }
  } else {
    SumBf16(static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b),
            static_cast<uint16_t*>(out), count, divisor);
  }
}

void ReduceSumInPlace(Dtype dtype, const void* in, void* inout, size_t count, float divisor) {
  if (dtype == Dtype::kFloat32) {
    auto* fi = static_cast<const float*>(in);
    auto* fio = static_cast<float*>(inout);
    if (divisor == 1.0f) {
      SumFloatInPlace(fi, fio, count);
    } else {
      SumFloatInPlaceDivided(fi, fio, count, divisor);
    }
  } else {
    SumBf16InPlace(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), count,
                   divisor);
  }
}

}  // namespace comm
