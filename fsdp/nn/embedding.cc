// File: fsdp/nn/embedding.cc
#include "fsdp/nn/embedding.h"

#include <cstring>

#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::kLanes;

// Exact adds: every variant equals the scalar loop bit for bit. Backward
// keeps the (b, t) order, so repeated tokens accumulate in a fixed order.
FSDP_SIMD_INLINE void AddRows(float* out, const float* a, const float* b, int channels) {
  int c = 0;
  for (; c + kLanes <= channels; c += kLanes) {
    simd::Store(out + c, simd::Load(a + c) + simd::Load(b + c));
  }
  for (; c < channels; ++c) out[c] = a[c] + b[c];
}

FSDP_SIMD_INLINE void EmbeddingForwardBody(float* out, const int32_t* tokens, const float* wte,
                                           const float* wpe, int batch, int seq_len,
                                           int channels) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq_len; ++t) {
      const long bt = static_cast<long>(b) * seq_len + t;
      AddRows(out + bt * channels, wte + static_cast<long>(tokens[bt]) * channels,
              wpe + static_cast<long>(t) * channels, channels);
    }
  }
}

FSDP_SIMD_INLINE void EmbeddingBackwardBody(float* dwte, float* dwpe, const float* dout,
                                            const int32_t* tokens, int batch, int seq_len,
                                            int channels) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq_len; ++t) {
      const long bt = static_cast<long>(b) * seq_len + t;
      const float* d = dout + bt * channels;
      float* token_row = dwte + static_cast<long>(tokens[bt]) * channels;
      float* position_row = dwpe + static_cast<long>(t) * channels;
      AddRows(token_row, token_row, d, channels);
      AddRows(position_row, position_row, d, channels);
    }
  }
}

FSDP_ISA_VARIANTS(void, EmbeddingForward,
                  (float* out, const int32_t* tokens, const float* wte, const float* wpe,
                   int batch, int seq_len, int channels),
                  (out, tokens, wte, wpe, batch, seq_len, channels))
FSDP_ISA_VARIANTS(void, EmbeddingBackward,
                  (float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int batch,
                   int seq_len, int channels),
                  (dwte, dwpe, dout, tokens, batch, seq_len, channels))

}  // namespace

void EmbeddingForward(KernelIsa isa, float* out, const int32_t* tokens, const float* wte,
                      const float* wpe, int batch, int seq_len, int channels) {
  FSDP_ISA_DISPATCH(isa, EmbeddingForward, (out, tokens, wte, wpe, batch, seq_len, channels));
}

void EmbeddingBackward(KernelIsa isa, float* dwte, float* dwpe, const float* dout,
                       const int32_t* tokens, int batch, int seq_len, int channels) {
  FSDP_ISA_DISPATCH(isa, EmbeddingBackward, (dwte, dwpe, dout, tokens, batch, seq_len, channels));
}

void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                      int batch, int seq_len, int channels) {
  EmbeddingForward(BestKernelIsa(), out, tokens, wte, wpe, batch, seq_len, channels);
}

void EmbeddingForwardBf16(float* out, const int32_t* tokens, const uint16_t* wte,
                          const uint16_t* wpe, int batch, int seq_len, int channels) {
  auto widen = [](uint16_t v) {
    const uint32_t bits = static_cast<uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  };
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq_len; ++t) {
      const long bt = static_cast<long>(b) * seq_len + t;
      const uint16_t* token_row = wte + static_cast<long>(tokens[bt]) * channels;
      const uint16_t* position_row = wpe + static_cast<long>(t) * channels;
      float* o = out + bt * channels;
      for (int c = 0; c < channels; ++c) o[c] = widen(token_row[c]) + widen(position_row[c]);
    }
  }
}

void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                       int batch, int seq_len, int channels) {
  EmbeddingBackward(BestKernelIsa(), dwte, dwpe, dout, tokens, batch, seq_len, channels);
}

}  // namespace fsdp
