// File: fsdp/nn/attention.cc
#include "fsdp/nn/attention.h"

#include <cblas.h>

#include <cmath>

namespace fsdp {

void AttentionForward(float* out, float* probs, const float* qkv, int batch, int seq_len,
                      int channels, int heads) {
  const int T = seq_len;
  const int C = channels;
  const int hs = C / heads;
  const int ld_qkv = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      const float* q = qkv + static_cast<long>(b) * T * ld_qkv + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* p = probs + (static_cast<long>(b) * heads + h) * T * T;
      // scores[T, T] = scale * q[T, hs] @ k[T, hs]^T (the masked upper
      // triangle is computed too: one sgemm beats T small ones at these sizes).
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, ld_qkv, k, ld_qkv,
                  0.0f, p, T);
      for (int t = 0; t < T; ++t) {
        float* row = p + static_cast<long>(t) * T;
        float max_score = row[0];
        for (int t2 = 1; t2 <= t; ++t2) max_score = row[t2] > max_score ? row[t2] : max_score;
        float sum = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) {
          row[t2] = std::exp(row[t2] - max_score);
          sum += row[t2];
        }
        const float inv_sum = 1.0f / sum;
        for (int t2 = 0; t2 <= t; ++t2) row[t2] *= inv_sum;
        for (int t2 = t + 1; t2 < T; ++t2) row[t2] = 0.0f;
      }
      // out[T, hs] (leading dimension C) = probs[T, T] @ v[T, hs]
      float* o = out + static_cast<long>(b) * T * C + h * hs;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, v, ld_qkv,
                  0.0f, o, C);
    }
  }
}

int64_t AttentionBackwardScratchFloats(int seq_len) {
  return static_cast<int64_t>(seq_len) * seq_len;
}

void AttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                       const float* probs, int batch, int seq_len, int channels, int heads) {
  const int T = seq_len;
  const int C = channels;
  const int hs = C / heads;
  const int ld_qkv = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  float* dp = scratch;  // (T, T): d probs, then d scores in place
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      const long qkv_offset = static_cast<long>(b) * T * ld_qkv + h * hs;
      const float* q = qkv + qkv_offset;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + qkv_offset;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* p = probs + (static_cast<long>(b) * heads + h) * T * T;
      const float* d_o = dout + static_cast<long>(b) * T * C + h * hs;
      // dv[T, hs] += probs^T[T, T] @ dout[T, hs]
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, d_o, C, 1.0f,
                  dv, ld_qkv);
      // dprobs[T, T] = dout[T, hs] @ v[T, hs]^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, d_o, C, v, ld_qkv,
                  0.0f, dp, T);
      // Softmax backward per row: dscore = p * (dp - sum_j p_j dp_j). Masked
      // entries have p = 0, so their dscore is 0 without a branch.
      for (int t = 0; t < T; ++t) {
        const float* p_row = p + static_cast<long>(t) * T;
        float* d_row = dp + static_cast<long>(t) * T;
        float dot = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) dot += p_row[t2] * d_row[t2];
        for (int t2 = 0; t2 <= t; ++t2) d_row[t2] = p_row[t2] * (d_row[t2] - dot);
        for (int t2 = t + 1; t2 < T; ++t2) d_row[t2] = 0.0f;
      }
      // scores = scale * q k^T:  dq += scale * dscore @ k,  dk += scale * dscore^T @ q
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dp, T, k, ld_qkv,
                  1.0f, dq, ld_qkv);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dp, T, q, ld_qkv,
                  1.0f, dk, ld_qkv);
    }
  }
}

}  // namespace fsdp
