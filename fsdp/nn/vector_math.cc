// File: fsdp/nn/vector_math.cc
#include "fsdp/nn/vector_math.h"

#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::kLanes;

// The tail goes through the same vector code, padded (see simd.h).
FSDP_SIMD_INLINE void ExpBody(float* out, const float* inp, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::Store(out + i, simd::Exp(simd::Load(inp + i)));
  if (i < n) simd::StorePartial(out + i, simd::Exp(simd::LoadPartial(inp + i, n - i, 0.0f)), n - i);
}

FSDP_SIMD_INLINE void TanhBody(float* out, const float* inp, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::Store(out + i, simd::Tanh(simd::Load(inp + i)));
  if (i < n) {
    simd::StorePartial(out + i, simd::Tanh(simd::LoadPartial(inp + i, n - i, 0.0f)), n - i);
  }
}

FSDP_SIMD_INLINE void WidenBf16Body(float* out, const uint16_t* inp, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::Store(out + i, simd::LoadBf16(inp + i));
  if (i < n) simd::StorePartial(out + i, simd::LoadBf16Partial(inp + i, n - i), n - i);
}

FSDP_SIMD_INLINE void RoundBf16Body(uint16_t* out, const float* inp, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::StoreBf16(out + i, simd::Load(inp + i));
  if (i < n) simd::StoreBf16Partial(out + i, simd::LoadPartial(inp + i, n - i, 0.0f), n - i);
}

FSDP_ISA_VARIANTS(void, Exp, (float* out, const float* inp, int64_t n), (out, inp, n))
FSDP_ISA_VARIANTS(void, Tanh, (float* out, const float* inp, int64_t n), (out, inp, n))
FSDP_ISA_VARIANTS(void, WidenBf16, (float* out, const uint16_t* inp, int64_t n), (out, inp, n))
FSDP_ISA_VARIANTS(void, RoundBf16, (uint16_t* out, const float* inp, int64_t n), (out, inp, n))

}  // namespace

void VectorExp(KernelIsa isa, float* out, const float* inp, int64_t n) {
  FSDP_ISA_DISPATCH(isa, Exp, (out, inp, n));
}

void VectorTanh(KernelIsa isa, float* out, const float* inp, int64_t n) {
  FSDP_ISA_DISPATCH(isa, Tanh, (out, inp, n));
}

void VectorWidenBf16(KernelIsa isa, float* out, const uint16_t* inp, int64_t n) {
  FSDP_ISA_DISPATCH(isa, WidenBf16, (out, inp, n));
}

void VectorRoundBf16(KernelIsa isa, uint16_t* out, const float* inp, int64_t n) {
  FSDP_ISA_DISPATCH(isa, RoundBf16, (out, inp, n));
}

}  // namespace fsdp
