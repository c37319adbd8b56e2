// File: fsdp/nn/token_embedding.cc
#include "fsdp/nn/token_embedding.h"

#include <cstring>

#include "base/bf16_convert.h"

namespace fsdp {

void TokenEmbeddingForward(float* out, const int32_t* tokens, ConstDtypeSpan wte, int64_t n,
                           int channels) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = int64_t{tokens[i]} * channels;
    float* o = out + i * channels;
    if (wte.dtype() == comm::Dtype::kBFloat16) {
      base::FromBf16(o, wte.as<uint16_t>().data() + row, channels);
    } else {
      std::memcpy(o, wte.as<float>().data() + row, sizeof(float) * channels);
    }
  }
}

void TokenEmbeddingBackward(float* dwte, const float* dout, const int32_t* tokens, int64_t n,
                            int channels) {
  for (int64_t i = 0; i < n; ++i) {
    float* d = dwte + int64_t{tokens[i]} * channels;
    const float* g = dout + i * channels;
    for (int c = 0; c < channels; ++c) d[c] += g[c];
  }
}

}  // namespace fsdp
