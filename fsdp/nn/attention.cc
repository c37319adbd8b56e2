// File: fsdp/nn/attention.cc
#include "fsdp/nn/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "fsdp/nn/softmax_row.h"

namespace fsdp {
namespace {
using simd::F16;
using simd::kLanes;

// Causal softmax of row t of the scores: entries [0, t] take part, the
// masked rest becomes 0. Vector exp and 16-lane sums (simd.h); issue 11
// measured the scalar expf here at 2.4% of a GPT step.
FSDP_SIMD_INLINE void CausalSoftmaxRow(float* row, int valid, int row_length) {
  const float max_score = simd::RowMax(row, valid);
  const float sum = simd::ExpShiftedInPlace(row, valid, max_score);
  simd::ScaleRow(row, valid, 1.0f / sum);
  std::fill(row + valid, row + row_length, 0.0f);
}

// Softmax backward of one row: dscore = p * (dp - sum_j p_j dp_j) over the
// valid entries; the masked ones are 0 (their p is 0).
FSDP_SIMD_INLINE void CausalSoftmaxBackwardRow(float* d_row, const float* p_row, int valid,
                                               int row_length) {
  F16 dot_lanes = simd::Splat(0.0f);
  int i = 0;
  for (; i + kLanes <= valid; i += kLanes) {
    dot_lanes += simd::Load(p_row + i) * simd::Load(d_row + i);
  }
  const int rest = valid - i;
  if (rest > 0) {
    dot_lanes += simd::LoadPartial(p_row + i, rest, 0.0f) * simd::LoadPartial(d_row + i, rest, 0.0f);
  }
  const float dot = simd::ReduceAdd(dot_lanes);
  for (i = 0; i + kLanes <= valid; i += kLanes) {
    simd::Store(d_row + i, simd::Load(p_row + i) * (simd::Load(d_row + i) - dot));
  }
  if (rest > 0) {
    simd::StorePartial(d_row + i,
                       simd::LoadPartial(p_row + i, rest, 0.0f) *
                           (simd::LoadPartial(d_row + i, rest, 0.0f) - dot),
                       rest);
  }
  std::fill(d_row + valid, d_row + row_length, 0.0f);
}

FSDP_SIMD_INLINE void CausalSoftmaxRowsBody(float* p, int seq_len) {
  for (int t = 0; t < seq_len; ++t) CausalSoftmaxRow(p + static_cast<long>(t) * seq_len, t + 1, seq_len);
}

FSDP_SIMD_INLINE void CausalSoftmaxBackwardRowsBody(float* dp, const float* p, int seq_len) {
  for (int t = 0; t < seq_len; ++t) {
    const long offset = static_cast<long>(t) * seq_len;
    CausalSoftmaxBackwardRow(dp + offset, p + offset, t + 1, seq_len);
  }
}

FSDP_ISA_VARIANTS(void, CausalSoftmaxRows, (float* p, int seq_len), (p, seq_len))
FSDP_ISA_VARIANTS(void, CausalSoftmaxBackwardRows, (float* dp, const float* p, int seq_len),
                  (dp, p, seq_len))

void CausalSoftmaxRows(KernelIsa isa, float* p, int seq_len) {
  FSDP_ISA_DISPATCH(isa, CausalSoftmaxRows, (p, seq_len));
}

void CausalSoftmaxBackwardRows(KernelIsa isa, float* dp, const float* p, int seq_len) {
  FSDP_ISA_DISPATCH(isa, CausalSoftmaxBackwardRows, (dp, p, seq_len));
}

}  // namespace

void AttentionForward(float* out, float* probs, const float* qkv, int batch, int seq_len,
                      int channels, int heads) {
  AttentionForward(BestKernelIsa(), out, probs, qkv, batch, seq_len, channels, heads);
}

void AttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                       const float* probs, int batch, int seq_len, int channels, int heads) {
  AttentionBackward(BestKernelIsa(), dqkv, scratch, dout, qkv, probs, batch, seq_len, channels,
                    heads);
}

void AttentionForward(KernelIsa isa, float* out, float* probs, const float* qkv, int batch,
                      int seq_len, int channels, int heads) {
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
      CausalSoftmaxRows(isa, p, T);
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

void AttentionBackward(KernelIsa isa, float* dqkv, float* scratch, const float* dout,
                       const float* qkv, const float* probs, int batch, int seq_len, int channels,
                       int heads) {
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
      // Softmax backward per row: dscore = p * (dp - sum_j p_j dp_j).
      CausalSoftmaxBackwardRows(isa, dp, p, T);
      // scores = scale * q k^T:  dq += scale * dscore @ k,  dk += scale * dscore^T @ q
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dp, T, k, ld_qkv,
                  1.0f, dq, ld_qkv);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dp, T, q, ld_qkv,
                  1.0f, dk, ld_qkv);
    }
  }
}

}  // namespace fsdp
