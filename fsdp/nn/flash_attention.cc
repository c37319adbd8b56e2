// File: fsdp/nn/flash_attention.cc
//
// Forward, per (b, h) and query block I (rows i0..i0+bq), over key blocks J
// up to I's last row, with m (running row maximum), l (running row sum) and
// acc (bq x hs, the unnormalized output):
//   S = scale Q_I K_J^T              (keys after a row masked)
//   m' = max(m, rowmax S);  P = exp(S - m');  c = exp(m - m')
//   l = c l + rowsum P;  acc = c acc + P V_J;  m = m'
// then out_I = acc / l and lse_I = m + log l.
//
// Backward (FlashAttention-2's order): D_i = dout_i . out_i, then per (I, J)
//   P = exp(scale Q_I K_J^T - lse_I)           (masked entries 0)
//   dV_J += P^T dout_I;  dP = dout_I V_J^T;  dS = P (dP - D_I)
//   dQ_I += scale dS K_J;  dK_J += scale dS^T Q_I
// I runs outer and J inner, so every gradient row accumulates its blocks in
// one fixed order.
#include "fsdp/nn/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fsdp/nn/matmul.h"

namespace fsdp {
namespace {

constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

struct Scratch {
  float* s;    // kFlashBlock x kFlashBlock: scores, then probabilities
  float* dp;   // kFlashBlock x kFlashBlock: d probabilities, then d scores
  float* acc;  // kFlashBlock x hs
  float* m;    // kFlashBlock
  float* l;    // kFlashBlock
  float* d;    // T: dout . out per row (backward)
};

Scratch Carve(float* scratch, int hs) {
  Scratch s;
  s.s = scratch;
  s.dp = s.s + kFlashBlock * kFlashBlock;
  s.acc = s.dp + kFlashBlock * kFlashBlock;
  s.m = s.acc + kFlashBlock * hs;
  s.l = s.m + kFlashBlock;
  s.d = s.l + kFlashBlock;
  return s;
}

// Keys j0.. of a block that query row i may see: min(bk, i - j0 + 1), >= 0.
inline int VisibleKeys(int i, int j0, int bk) { return std::max(0, std::min(bk, i - j0 + 1)); }

// S[bq, bk] = scale * q_rows[bq, hs] @ k_rows[bk, hs]^T, both with leading
// dimension ld (rows of the packed qkv).
void Scores(float* s, const float* q_rows, const float* k_rows, int bq, int bk, int hs, int ld,
            float scale) {
  Matmul({.m = bq, .n = bk, .k = hs,
          .a = {q_rows, NumType::kF32, ld},
          .b = {k_rows, NumType::kF32, ld, /*transposed=*/true},
          .c = s, .c_type = NumType::kF32, .ldc = bk, .alpha = scale});
}

}  // namespace

void FlashAttentionForward(float* out, float* lse, float* scratch, const float* qkv, int batch,
                           int seq_len, int channels, int heads) {
  const int T = seq_len, C = channels, hs = C / heads, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const Scratch w = Carve(scratch, hs);
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      const float* q = qkv + static_cast<long>(b) * T * ld + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* row_lse = lse + (static_cast<long>(b) * heads + h) * T;
      for (int i0 = 0; i0 < T; i0 += kFlashBlock) {
        const int bq = std::min(kFlashBlock, T - i0);
        std::fill(w.acc, w.acc + bq * hs, 0.0f);
        std::fill(w.m, w.m + bq, kNegativeInfinity);
        std::fill(w.l, w.l + bq, 0.0f);
        for (int j0 = 0; j0 <= i0 + bq - 1; j0 += kFlashBlock) {
          const int bk = std::min(kFlashBlock, T - j0);
          Scores(w.s, q + static_cast<long>(i0) * ld, k + static_cast<long>(j0) * ld, bq, bk, hs,
                 ld, scale);
          for (int r = 0; r < bq; ++r) {
            float* p = w.s + r * bk;
            const int visible = VisibleKeys(i0 + r, j0, bk);
            float row_max = kNegativeInfinity;
            for (int c = 0; c < visible; ++c) row_max = std::max(row_max, p[c]);
            const float m_new = std::max(w.m[r], row_max);
            // Every row sees key 0 in the first block, so m_new is finite.
            const float correction = std::exp(w.m[r] - m_new);
            float sum = 0.0f;
            for (int c = 0; c < visible; ++c) {
              p[c] = std::exp(p[c] - m_new);
              sum += p[c];
            }
            for (int c = visible; c < bk; ++c) p[c] = 0.0f;
            w.l[r] = w.l[r] * correction + sum;
            w.m[r] = m_new;
            if (correction != 1.0f) {
              float* a = w.acc + r * hs;
              for (int d = 0; d < hs; ++d) a[d] *= correction;
            }
          }
          // acc[bq, hs] += P[bq, bk] @ v_rows[bk, hs]
          Matmul({.m = bq, .n = hs, .k = bk,
                  .a = {w.s, NumType::kF32, bk},
                  .b = {v + static_cast<long>(j0) * ld, NumType::kF32, ld},
                  .c = w.acc, .c_type = NumType::kF32, .ldc = hs, .accumulate = true});
        }
        for (int r = 0; r < bq; ++r) {
          const float inv = 1.0f / w.l[r];
          float* o = out + (static_cast<long>(b) * T + i0 + r) * C + h * hs;
          const float* a = w.acc + r * hs;
          for (int d = 0; d < hs; ++d) o[d] = a[d] * inv;
          row_lse[i0 + r] = w.m[r] + std::log(w.l[r]);
        }
      }
    }
  }
}

void FlashAttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                            const float* out, const float* lse, int batch, int seq_len,
                            int channels, int heads) {
  const int T = seq_len, C = channels, hs = C / heads, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const Scratch w = Carve(scratch, hs);
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      const long qkv_offset = static_cast<long>(b) * T * ld + h * hs;
      const float* q = qkv + qkv_offset;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + qkv_offset;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const long o_offset = static_cast<long>(b) * T * C + h * hs;
      const float* o = out + o_offset;
      const float* d_o = dout + o_offset;
      const float* row_lse = lse + (static_cast<long>(b) * heads + h) * T;
      for (int i = 0; i < T; ++i) {
        float dot = 0.0f;
        for (int d = 0; d < hs; ++d) dot += d_o[static_cast<long>(i) * C + d] * o[static_cast<long>(i) * C + d];
        w.d[i] = dot;
      }
      for (int i0 = 0; i0 < T; i0 += kFlashBlock) {
        const int bq = std::min(kFlashBlock, T - i0);
        const float* q_rows = q + static_cast<long>(i0) * ld;
        const float* do_rows = d_o + static_cast<long>(i0) * C;
        for (int j0 = 0; j0 <= i0 + bq - 1; j0 += kFlashBlock) {
          const int bk = std::min(kFlashBlock, T - j0);
          const float* k_rows = k + static_cast<long>(j0) * ld;
          const float* v_rows = v + static_cast<long>(j0) * ld;
          Scores(w.s, q_rows, k_rows, bq, bk, hs, ld, scale);
          for (int r = 0; r < bq; ++r) {
            float* p = w.s + r * bk;
            const int visible = VisibleKeys(i0 + r, j0, bk);
            const float row = row_lse[i0 + r];
            for (int c = 0; c < visible; ++c) p[c] = std::exp(p[c] - row);
            for (int c = visible; c < bk; ++c) p[c] = 0.0f;
          }
          // dv_rows[bk, hs] += P^T[bk, bq] @ dout_rows[bq, hs]
          Matmul({.m = bk, .n = hs, .k = bq,
                  .a = {w.s, NumType::kF32, bk, /*transposed=*/true},
                  .b = {do_rows, NumType::kF32, C},
                  .c = dv + static_cast<long>(j0) * ld, .c_type = NumType::kF32, .ldc = ld,
                  .accumulate = true});
          // dP[bq, bk] = dout_rows[bq, hs] @ v_rows[bk, hs]^T
          Matmul({.m = bq, .n = bk, .k = hs,
                  .a = {do_rows, NumType::kF32, C},
                  .b = {v_rows, NumType::kF32, ld, /*transposed=*/true},
                  .c = w.dp, .c_type = NumType::kF32, .ldc = bk});
          // dS = P (dP - D): masked entries have P = 0, so dS = 0 there.
          for (int r = 0; r < bq; ++r) {
            const float* p = w.s + r * bk;
            float* ds = w.dp + r * bk;
            const float d_row = w.d[i0 + r];
            for (int c = 0; c < bk; ++c) ds[c] = p[c] * (ds[c] - d_row);
          }
          // dq_rows[bq, hs] += scale dS[bq, bk] @ k_rows[bk, hs]
          Matmul({.m = bq, .n = hs, .k = bk,
                  .a = {w.dp, NumType::kF32, bk},
                  .b = {k_rows, NumType::kF32, ld},
                  .c = dq + static_cast<long>(i0) * ld, .c_type = NumType::kF32, .ldc = ld,
                  .alpha = scale, .accumulate = true});
          // dk_rows[bk, hs] += scale dS^T[bk, bq] @ q_rows[bq, hs]
          Matmul({.m = bk, .n = hs, .k = bq,
                  .a = {w.dp, NumType::kF32, bk, /*transposed=*/true},
                  .b = {q_rows, NumType::kF32, ld},
                  .c = dk + static_cast<long>(j0) * ld, .c_type = NumType::kF32, .ldc = ld,
                  .alpha = scale, .accumulate = true});
        }
      }
    }
  }
}

}  // namespace fsdp
