// File: fsdp/nn/embedding.cc
#include "fsdp/nn/embedding.h"

namespace fsdp {

void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                      int batch, int seq_len, int channels) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq_len; ++t) {
      const long bt = static_cast<long>(b) * seq_len + t;
      float* o = out + bt * channels;
      const float* token_row = wte + static_cast<long>(tokens[bt]) * channels;
      const float* position_row = wpe + static_cast<long>(t) * channels;
      for (int c = 0; c < channels; ++c) o[c] = token_row[c] + position_row[c];
    }
  }
}

void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                       int batch, int seq_len, int channels) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq_len; ++t) {
      const long bt = static_cast<long>(b) * seq_len + t;
      const float* d = dout + bt * channels;
      float* token_row = dwte + static_cast<long>(tokens[bt]) * channels;
      float* position_row = dwpe + static_cast<long>(t) * channels;
      for (int c = 0; c < channels; ++c) {
        token_row[c] += d[c];
        position_row[c] += d[c];
      }
    }
  }
}

}  // namespace fsdp
