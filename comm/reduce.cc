// File: comm/reduce.cc
#include "comm/reduce.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/bf16_avx512.h"
#include "base/bfloat16.h"
#include "base/status_macros.h"

namespace comm {
namespace {

using ::base::BestKernelIsa;
using ::base::KernelIsa;
using ::base::KernelIsaSupported;

#define COMM_REDUCE_INLINE inline __attribute__((always_inline))

// The bf16 conversions (base/bfloat16.h: branch-free on integers and always
// inlined, so the loops below vectorize; NaN inputs stay NaN, quieted).
using ::base::FromBf16Bits;
using ::base::ToBf16Bits;

// ---------------------------------------------------------------------------
// The plain loops. Each body is compiled twice, for SSE2 (generic) and for
// AVX2 (COMM_REDUCE_VARIANTS), and GCC vectorizes them itself.

COMM_REDUCE_INLINE void SumFloatBody(const float* __restrict a, const float* __restrict b,
                                     float* __restrict out, size_t count, float divisor) {
  if (divisor == 1.0f) {
    for (size_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = (a[i] + b[i]) / divisor;
  }
}

COMM_REDUCE_INLINE void SumFloatInPlaceBody(const float* __restrict in, float* __restrict inout,
                                            size_t count, float divisor) {
  if (divisor == 1.0f) {
    for (size_t i = 0; i < count; ++i) inout[i] = inout[i] + in[i];
  } else {
    for (size_t i = 0; i < count; ++i) inout[i] = (inout[i] + in[i]) / divisor;
  }
}

COMM_REDUCE_INLINE void SumBf16Body(const uint16_t* __restrict a, const uint16_t* __restrict b,
                                    uint16_t* __restrict out, size_t count, float divisor) {
  if (divisor == 1.0f) {
    for (size_t i = 0; i < count; ++i) {
      out[i] = ToBf16Bits(FromBf16Bits(a[i]) + FromBf16Bits(b[i]));
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      out[i] = ToBf16Bits((FromBf16Bits(a[i]) + FromBf16Bits(b[i])) / divisor);
    }
  }
}

COMM_REDUCE_INLINE void SumBf16InPlaceBody(const uint16_t* __restrict in,
                                           uint16_t* __restrict inout, size_t count,
                                           float divisor) {
  if (divisor == 1.0f) {
    for (size_t i = 0; i < count; ++i) {
      inout[i] = ToBf16Bits(FromBf16Bits(inout[i]) + FromBf16Bits(in[i]));
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      inout[i] = ToBf16Bits((FromBf16Bits(inout[i]) + FromBf16Bits(in[i])) / divisor);
    }
  }
}

// int64: two's complement sums, wrapping (as unsigned integers, so that
// even a sum out of range is defined). Exact, so no divisor.
COMM_REDUCE_INLINE void SumInt64Body(const uint64_t* __restrict a, const uint64_t* __restrict b,
                                     uint64_t* __restrict out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

COMM_REDUCE_INLINE void SumInt64InPlaceBody(const uint64_t* __restrict in,
                                            uint64_t* __restrict inout, size_t count) {
  for (size_t i = 0; i < count; ++i) inout[i] = inout[i] + in[i];
}

// The running sum of a chain of three or more inputs, one block at a time
// (fits in L1).
constexpr size_t kChainBlock = 2048;

COMM_REDUCE_INLINE void ChainFloatBody(const void* const* inputs, size_t num_inputs, void* out,
                                       size_t count, float divisor) {
  const size_t last = num_inputs - 1;
  auto input = [&](size_t k) { return static_cast<const float*>(inputs[k]); };
  float* fo = static_cast<float*>(out);
  alignas(64) float sum[kChainBlock];
  for (size_t begin = 0; begin < count; begin += kChainBlock) {
    const size_t n = count - begin < kChainBlock ? count - begin : kChainBlock;
    SumFloatBody(input(0) + begin, input(1) + begin, sum, n, 1.0f);
    for (size_t k = 2; k < last; ++k) SumFloatInPlaceBody(input(k) + begin, sum, n, 1.0f);
    // The last hop; `out` may be the last input itself (in-place
    // all-reduce), which the restrict loops of SumFloatBody must not see.
    if (static_cast<const void*>(fo) == inputs[last]) {
      SumFloatInPlaceBody(sum, fo + begin, n, divisor);
    } else {
      SumFloatBody(input(last) + begin, sum, fo + begin, n, divisor);
    }
  }
}

// Integer sums are associative: the chain's grouping does not matter, but
// it is the same loop shape as fp32's. `out` may be any one input: its
// block is read before it is written.
COMM_REDUCE_INLINE void ChainInt64Body(const void* const* inputs, size_t num_inputs, void* out,
                                       size_t count) {
  auto input = [&](size_t k) { return static_cast<const uint64_t*>(inputs[k]); };
  uint64_t* io = static_cast<uint64_t*>(out);
  alignas(64) uint64_t sum[kChainBlock];
  for (size_t begin = 0; begin < count; begin += kChainBlock) {
    const size_t n = count - begin < kChainBlock ? count - begin : kChainBlock;
    SumInt64Body(input(0) + begin, input(1) + begin, sum, n);
    for (size_t k = 2; k < num_inputs; ++k) SumInt64InPlaceBody(input(k) + begin, sum, n);
    std::memcpy(io + begin, sum, n * sizeof(uint64_t));
  }
}

// sum[i] = bf16(sum[i] + in[i]), kept as the float of the rounded value: what
// the hop's store would give the next hop.
COMM_REDUCE_INLINE void ChainAddBf16(const uint16_t* __restrict in, float* __restrict sum,
                                     size_t count) {
  for (size_t i = 0; i < count; ++i) {
    sum[i] = FromBf16Bits(ToBf16Bits(sum[i] + FromBf16Bits(in[i])));
  }
}

COMM_REDUCE_INLINE void ChainBf16Body(const void* const* inputs, size_t num_inputs, void* out,
                                      size_t count, float divisor) {
  const size_t last = num_inputs - 1;
  auto input = [&](size_t k) { return static_cast<const uint16_t*>(inputs[k]); };
  uint16_t* bo = static_cast<uint16_t*>(out);
  alignas(64) float sum[kChainBlock];
  for (size_t begin = 0; begin < count; begin += kChainBlock) {
    const size_t n = count - begin < kChainBlock ? count - begin : kChainBlock;
    for (size_t i = 0; i < n; ++i) sum[i] = FromBf16Bits(input(0)[begin + i]);
    for (size_t k = 1; k < last; ++k) ChainAddBf16(input(k) + begin, sum, n);
    // `out` may be any one input: every input's block is read before it is
    // written.
    const uint16_t* in = input(last) + begin;
    if (divisor == 1.0f) {
      for (size_t i = 0; i < n; ++i) {
        bo[begin + i] = ToBf16Bits(sum[i] + FromBf16Bits(in[i]));
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        bo[begin + i] = ToBf16Bits((sum[i] + FromBf16Bits(in[i])) / divisor);
      }
    }
  }
}

#define COMM_REDUCE_VARIANTS(name, params, args) \
  void name##Generic params { name##Body args; } \
  __attribute__((target("avx2"))) void name##Avx2 params { name##Body args; }

COMM_REDUCE_VARIANTS(SumFloat, (const float* a, const float* b, float* out, size_t count,
                                float divisor), (a, b, out, count, divisor))
COMM_REDUCE_VARIANTS(SumFloatInPlace, (const float* in, float* inout, size_t count,
                                       float divisor), (in, inout, count, divisor))
COMM_REDUCE_VARIANTS(SumBf16, (const uint16_t* a, const uint16_t* b, uint16_t* out, size_t count,
                               float divisor), (a, b, out, count, divisor))
COMM_REDUCE_VARIANTS(SumBf16InPlace, (const uint16_t* in, uint16_t* inout, size_t count,
                                      float divisor), (in, inout, count, divisor))
COMM_REDUCE_VARIANTS(ChainFloat, (const void* const* inputs, size_t num_inputs, void* out,
                                  size_t count, float divisor),
                     (inputs, num_inputs, out, count, divisor))
COMM_REDUCE_VARIANTS(ChainBf16, (const void* const* inputs, size_t num_inputs, void* out,
                                 size_t count, float divisor),
                     (inputs, num_inputs, out, count, divisor))
COMM_REDUCE_VARIANTS(SumInt64, (const uint64_t* a, const uint64_t* b, uint64_t* out,
                                size_t count), (a, b, out, count))
COMM_REDUCE_VARIANTS(SumInt64InPlace, (const uint64_t* in, uint64_t* inout, size_t count),
                     (in, inout, count))
COMM_REDUCE_VARIANTS(ChainInt64, (const void* const* inputs, size_t num_inputs, void* out,
                                  size_t count), (inputs, num_inputs, out, count))

// ---------------------------------------------------------------------------
// bf16 under AVX-512: 16 lanes in registers, the same integer rounding as
// ToBf16Bits and the same IEEE add and division, so the same bits. GCC
// vectorizes the plain bf16 loops poorly for avx512f without avx512bw (its
// 16-bit narrowing): 2.1 ms against 0.9 for these on 8 M elements, and 4.5
// for SSE2 (AMD EPYC, 2026-12-06). fp32 stays on the AVX2 loops: 64-byte
// vectors ran slower there on buffers not 64-byte aligned, which collective
// segments often are (2.4 against 1.5 ms).

__attribute__((target("avx512f"))) inline void StoreRoundedAvx512(uint16_t* out, __m512 value) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      base::RoundBf16Avx512(_mm512_castps_si512(value)));
}

// The last hop of a sum: (a + b) / divisor (no division when it is 1).
__attribute__((target("avx512f"))) inline __m512 LastHopAvx512(__m512 a, __m512 b,
                                                               float divisor) {
  const __m512 sum = _mm512_add_ps(a, b);
  return divisor == 1.0f ? sum : _mm512_div_ps(sum, _mm512_set1_ps(divisor));
}

__attribute__((target("avx512f"))) void SumBf16Avx512(const uint16_t* a, const uint16_t* b,
                                                      uint16_t* out, size_t count,
                                                      float divisor) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 sum = LastHopAvx512(base::WidenBf16Avx512(a + i), base::WidenBf16Avx512(b + i),
                                     divisor);
    StoreRoundedAvx512(out + i, sum);
  }
  SumBf16Body(a + i, b + i, out + i, count - i, divisor);
}

__attribute__((target("avx512f"))) void SumBf16InPlaceAvx512(const uint16_t* in,
                                                             uint16_t* inout, size_t count,
                                                             float divisor) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 sum = LastHopAvx512(base::WidenBf16Avx512(inout + i),
                                     base::WidenBf16Avx512(in + i), divisor);
    StoreRoundedAvx512(inout + i, sum);
  }
  SumBf16InPlaceBody(in + i, inout + i, count - i, divisor);
}

// The whole chain for 16 elements at a time in one register, every input
// read once. `out` may be any one input: its 16 elements are read first.
__attribute__((target("avx512f"))) void ChainBf16Avx512(const void* const* inputs,
                                                        size_t num_inputs, void* out,
                                                        size_t count, float divisor) {
  const size_t last = num_inputs - 1;
  auto input = [&](size_t k) { return static_cast<const uint16_t*>(inputs[k]); };
  uint16_t* bo = static_cast<uint16_t*>(out);
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __m512 sum = base::WidenBf16Avx512(input(0) + i);
    for (size_t k = 1; k < last; ++k) {
      const __m512i rounded = base::RoundBf16LanesAvx512(
          _mm512_castps_si512(_mm512_add_ps(sum, base::WidenBf16Avx512(input(k) + i))));
      sum = _mm512_castsi512_ps(_mm512_slli_epi32(rounded, 16));
    }
    StoreRoundedAvx512(bo + i,
                       LastHopAvx512(sum, base::WidenBf16Avx512(input(last) + i), divisor));
  }
  for (; i < count; ++i) {  // the tail, the same arithmetic one element at a time
    float sum = FromBf16Bits(input(0)[i]);
    for (size_t k = 1; k < last; ++k) {
      sum = FromBf16Bits(ToBf16Bits(sum + FromBf16Bits(input(k)[i])));
    }
    const float total = sum + FromBf16Bits(input(last)[i]);
    bo[i] = ToBf16Bits(divisor == 1.0f ? total : total / divisor);
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

// The loops each dtype runs for `isa` (see the AVX-512 section for why fp32
// stops at AVX2).
void SumFloat(KernelIsa isa, const float* a, const float* b, float* out, size_t count,
              float divisor) {
  if (isa == KernelIsa::kGeneric) return SumFloatGeneric(a, b, out, count, divisor);
  SumFloatAvx2(a, b, out, count, divisor);
}

void SumFloatInPlace(KernelIsa isa, const float* in, float* inout, size_t count,
                     float divisor) {
  if (isa == KernelIsa::kGeneric) return SumFloatInPlaceGeneric(in, inout, count, divisor);
  SumFloatInPlaceAvx2(in, inout, count, divisor);
}

void SumBf16(KernelIsa isa, const uint16_t* a, const uint16_t* b, uint16_t* out, size_t count,
             float divisor) {
  FSDP_ISA_DISPATCH(isa, SumBf16, (a, b, out, count, divisor));
}

void SumBf16InPlace(KernelIsa isa, const uint16_t* in, uint16_t* inout, size_t count,
                    float divisor) {
  FSDP_ISA_DISPATCH(isa, SumBf16InPlace, (in, inout, count, divisor));
}

// The int64 loops for `isa` (the AVX-512 variant is the AVX2 one: integer
// adds gain nothing from wider vectors here).
void SumInt64(KernelIsa isa, const void* a, const void* b, void* out, size_t count) {
  auto* a64 = static_cast<const uint64_t*>(a);
  auto* b64 = static_cast<const uint64_t*>(b);
  auto* o64 = static_cast<uint64_t*>(out);
  if (isa == KernelIsa::kGeneric) return SumInt64Generic(a64, b64, o64, count);
  SumInt64Avx2(a64, b64, o64, count);
}

void SumInt64InPlace(KernelIsa isa, const void* in, void* inout, size_t count) {
  auto* in64 = static_cast<const uint64_t*>(in);
  auto* io64 = static_cast<uint64_t*>(inout);
  if (isa == KernelIsa::kGeneric) return SumInt64InPlaceGeneric(in64, io64, count);
  SumInt64InPlaceAvx2(in64, io64, count);
}

void Chain(KernelIsa isa, Dtype dtype, const void* const* inputs, size_t num_inputs, void* out,
           size_t count, float divisor) {
  if (dtype == Dtype::kInt64) {
    if (isa == KernelIsa::kGeneric) return ChainInt64Generic(inputs, num_inputs, out, count);
    return ChainInt64Avx2(inputs, num_inputs, out, count);
  }
  if (dtype == Dtype::kFloat32) {
    if (isa == KernelIsa::kGeneric) {
      return ChainFloatGeneric(inputs, num_inputs, out, count, divisor);
    }
    return ChainFloatAvx2(inputs, num_inputs, out, count, divisor);
  }
  FSDP_ISA_DISPATCH(isa, ChainBf16, (inputs, num_inputs, out, count, divisor));
}

}  // namespace

void ReduceSum(KernelIsa isa, Dtype dtype, const void* a, const void* b, void* out,
               size_t count, float divisor) {
  FSDP_CHECK(KernelIsaSupported(isa));
  if (dtype == Dtype::kInt64) {
    FSDP_CHECK(divisor == 1.0f);
    SumInt64(isa, a, b, out, count);
  } else if (dtype == Dtype::kFloat32) {
    SumFloat(isa, static_cast<const float*>(a), static_cast<const float*>(b),
             static_cast<float*>(out), count, divisor);
  } else {
    SumBf16(isa, static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b),
            static_cast<uint16_t*>(out), count, divisor);
  }
}

void ReduceSumInPlace(KernelIsa isa, Dtype dtype, const void* in, void* inout, size_t count,
                      float divisor) {
  FSDP_CHECK(KernelIsaSupported(isa));
  if (dtype == Dtype::kInt64) {
    FSDP_CHECK(divisor == 1.0f);
    SumInt64InPlace(isa, in, inout, count);
  } else if (dtype == Dtype::kFloat32) {
    SumFloatInPlace(isa, static_cast<const float*>(in), static_cast<float*>(inout), count,
                    divisor);
  } else {
    SumBf16InPlace(isa, static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), count,
                   divisor);
  }
}

void ReduceSumChain(KernelIsa isa, Dtype dtype, const void* const* inputs, size_t num_inputs,
                    void* out, size_t count, float divisor, bool stream_output) {
  FSDP_CHECK(KernelIsaSupported(isa));
  FSDP_CHECK(dtype != Dtype::kInt64 || divisor == 1.0f);
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
      ReduceSumChain(isa, dtype, shifted.data(), num_inputs, block, n, divisor,
                     /*stream_output=*/false);
      StreamBytes(block, static_cast<std::byte*>(out) + begin * element_size, n * element_size);
    }
    StreamFence();
    return;
  }
  if (num_inputs == 2) {
    // One hop; commutative, so the aliased operand may go either side.
    if (out == inputs[1]) {
      ReduceSumInPlace(isa, dtype, inputs[0], out, count, divisor);
    } else if (out == inputs[0]) {
      ReduceSumInPlace(isa, dtype, inputs[1], out, count, divisor);
    } else {
      ReduceSum(isa, dtype, inputs[0], inputs[1], out, count, divisor);
    }
    return;
  }
  Chain(isa, dtype, inputs, num_inputs, out, count, divisor);
}

void ReduceSum(Dtype dtype, const void* a, const void* b, void* out, size_t count,
               float divisor) {
  ReduceSum(BestKernelIsa(), dtype, a, b, out, count, divisor);
}

void ReduceSumInPlace(Dtype dtype, const void* in, void* inout, size_t count, float divisor) {
  ReduceSumInPlace(BestKernelIsa(), dtype, in, inout, count, divisor);
}

void ReduceSumChain(Dtype dtype, const void* const* inputs, size_t num_inputs, void* out,
                    size_t count, float divisor, bool stream_output) {
  ReduceSumChain(BestKernelIsa(), dtype, inputs, num_inputs, out, count, divisor,
                 stream_output);
}

}  // namespace comm
