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
//
// The products go through fsdp::Matmul; the per-row work on a block (max,
// exp, sums, rescaling) runs in the 16-lane kernels of fsdp/nn/simd.h, one
// ISA variant per block, with the same bits in every variant.
#include "fsdp/nn/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "base/bf16_convert.h"
#include "fsdp/nn/dense_rows.h"
#include "fsdp/nn/heads_on_threads.h"
#include "fsdp/nn/kernel_isa.h"
#include "fsdp/nn/matmul.h"
#include "fsdp/nn/simd.h"
#include "fsdp/nn/softmax_row.h"

namespace fsdp {
namespace {

using simd::F16;
using simd::kLanes;

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

FSDP_SIMD_INLINE void ZeroTail(float* row, int from, int to) {
  for (int c = from; c < to; ++c) row[c] = 0.0f;
}

FSDP_SIMD_INLINE float ScalarExp(float x) { return simd::Exp(simd::Splat(x))[0]; }

// Forward, one block of scores s[bq, bk] for query rows i0.. and keys j0..:
// into probabilities exp(s - m') with the running maximum m and sum l of
// each row updated, and the row's unnormalized output acc rescaled.
FSDP_SIMD_INLINE void OnlineSoftmaxBlockBody(float* s, float* m, float* l, float* acc, int bq,
                                             int bk, int hs, int i0, int j0) {
  for (int r = 0; r < bq; ++r) {
    float* p = s + r * bk;
    const int visible = VisibleKeys(i0 + r, j0, bk);
    if (visible == 0) {  // the whole block lies after this row
      ZeroTail(p, 0, bk);
      continue;
    }
    const float m_new = std::max(m[r], simd::RowMax(p, visible));
    // m starts at -inf, whose exp is 0: the first block sets l and acc.
    const float correction = ScalarExp(m[r] - m_new);
    const float sum = simd::ExpShiftedInPlace(p, visible, m_new);
    ZeroTail(p, visible, bk);
    l[r] = l[r] * correction + sum;
    m[r] = m_new;
    if (correction != 1.0f) simd::ScaleRow(acc + r * hs, hs, correction);
  }
}

// Backward: s[bq, bk] = exp(s - lse) on the visible keys, 0 after them.
FSDP_SIMD_INLINE void ProbabilitiesFromLseBody(float* s, const float* row_lse, int bq, int bk,
                                               int i0, int j0) {
  for (int r = 0; r < bq; ++r) {
    float* p = s + r * bk;
    const int visible = VisibleKeys(i0 + r, j0, bk);
    simd::ExpShiftedInPlace(p, visible, row_lse[i0 + r]);
    ZeroTail(p, visible, bk);
  }
}

// Backward: dp[r, c] = p[r, c] (dp[r, c] - d[r]) over a block (masked
// entries have p = 0, so they get 0).
FSDP_SIMD_INLINE void ScoreGradientBlockBody(float* dp, const float* p, const float* d, int bq,
                                             int bk) {
  for (int r = 0; r < bq; ++r) {
    const float d_row = d[r];
    float* ds = dp + r * bk;
    const float* pr = p + r * bk;
    int c = 0;
    for (; c + kLanes <= bk; c += kLanes) {
      simd::Store(ds + c, simd::Load(pr + c) * (simd::Load(ds + c) - d_row));
    }
    if (c < bk) {
      const int rest = bk - c;
      simd::StorePartial(ds + c,
                         simd::LoadPartial(pr + c, rest, 0.0f) *
                             (simd::LoadPartial(ds + c, rest, 0.0f) - d_row),
                         rest);
    }
  }
}

// Backward: d[i] = dout_i . out_i over one head's hs channels, T rows with
// leading dimension C.
FSDP_SIMD_INLINE void RowDotsBody(float* d, const float* dout, const float* out, int rows, int hs,
                                  int ld) {
  for (int i = 0; i < rows; ++i) {
    const float* a = dout + static_cast<long>(i) * ld;
    const float* b = out + static_cast<long>(i) * ld;
    F16 lanes = simd::Splat(0.0f);
    int k = 0;
    for (; k + kLanes <= hs; k += kLanes) lanes += simd::Load(a + k) * simd::Load(b + k);
    if (k < hs) {
      lanes += simd::LoadPartial(a + k, hs - k, 0.0f) * simd::LoadPartial(b + k, hs - k, 0.0f);
    }
    d[i] = simd::ReduceAdd(lanes);
  }
}

FSDP_ISA_VARIANTS(void, OnlineSoftmaxBlock,
                  (float* s, float* m, float* l, float* acc, int bq, int bk, int hs, int i0,
                   int j0),
                  (s, m, l, acc, bq, bk, hs, i0, j0))
FSDP_ISA_VARIANTS(void, ProbabilitiesFromLse,
                  (float* s, const float* row_lse, int bq, int bk, int i0, int j0),
                  (s, row_lse, bq, bk, i0, j0))
FSDP_ISA_VARIANTS(void, ScoreGradientBlock,
                  (float* dp, const float* p, const float* d, int bq, int bk), (dp, p, d, bq, bk))
FSDP_ISA_VARIANTS(void, RowDots,
                  (float* d, const float* dout, const float* out, int rows, int hs, int ld),
                  (d, dout, out, rows, hs, ld))

void OnlineSoftmaxBlock(KernelIsa isa, float* s, float* m, float* l, float* acc, int bq, int bk,
                        int hs, int i0, int j0) {
  FSDP_ISA_DISPATCH(isa, OnlineSoftmaxBlock, (s, m, l, acc, bq, bk, hs, i0, j0));
}
void ProbabilitiesFromLse(KernelIsa isa, float* s, const float* row_lse, int bq, int bk, int i0,
                          int j0) {
  FSDP_ISA_DISPATCH(isa, ProbabilitiesFromLse, (s, row_lse, bq, bk, i0, j0));
}
void ScoreGradientBlock(KernelIsa isa, float* dp, const float* p, const float* d, int bq,
                        int bk) {
  FSDP_ISA_DISPATCH(isa, ScoreGradientBlock, (dp, p, d, bq, bk));
}
void RowDots(KernelIsa isa, float* d, const float* dout, const float* out, int rows, int hs,
             int ld) {
  FSDP_ISA_DISPATCH(isa, RowDots, (d, dout, out, rows, hs, ld));
}

// The element type of qkv, dout and out: fp32, or bf16 (uint16_t bits) in
// the bf16 compute mode, whose products take bf16 operands.
template <typename In>
constexpr NumType kInType = std::is_same_v<In, uint16_t> ? NumType::kBF16 : NumType::kF32;

// A block of fp32 values (probabilities, d scores) as a product's operand:
// itself, or its bf16 copy in `bf16` when the products run on bf16.
template <typename In>
const void* Operand(const float* block, uint16_t* bf16, int64_t n) {
  if constexpr (std::is_same_v<In, uint16_t>) {
    base::ToBf16(bf16, block, n);
    return bf16;
  } else {
    (void)bf16;
    (void)n;
    return block;
  }
}

float Bf16BitsToFloat(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &wide, sizeof(f));
  return f;
}

// d[i] = dout_i . out_i for one head's T rows (leading dimension ld); bf16
// rows are widened one at a time into `widen` (2 hs floats).
template <typename In>
void HeadRowDots(KernelIsa isa, float* d, const In* dout, const In* out, int rows, int hs, int ld,
                 float* widen) {
  if constexpr (std::is_same_v<In, uint16_t>) {
    for (int i = 0; i < rows; ++i) {
      for (int c = 0; c < hs; ++c) {
        widen[c] = Bf16BitsToFloat(dout[static_cast<long>(i) * ld + c]);
        widen[hs + c] = Bf16BitsToFloat(out[static_cast<long>(i) * ld + c]);
      }
      RowDots(isa, d + i, widen, widen + hs, 1, hs, hs);
    }
  } else {
    (void)widen;
    RowDots(isa, d, dout, out, rows, hs, ld);
  }
}

// One head's q, k, v (and output gradient) as the products read them: in
// place at a row stride of 3C (C) for fp32, whose strided products are as
// fast as dense ones; copied into dense T x hs blocks of the bf16 scratch for
// bf16 ([Note: contiguous bf16 heads] in fsdp/nn/attention.cc).
template <typename In>
struct HeadOperands {
  const In* q;
  const In* k;
  const In* v;
  const In* d_o;
  int ld;     // of q, k, v
  int ld_do;  // of d_o
};

// `dout_head` may be null (forward).
template <typename In>
HeadOperands<In> Head(const In* q, const In* dout_head, int T, int C, int hs,
                      uint16_t* dense_bf16) {
  if constexpr (std::is_same_v<In, uint16_t>) {
    const long th = static_cast<long>(T) * hs;
    uint16_t* dq = dense_bf16;
    GatherRows(dq, q, T, hs, 3 * C);
    GatherRows(dq + th, q + C, T, hs, 3 * C);
    GatherRows(dq + 2 * th, q + 2 * C, T, hs, 3 * C);
    if (dout_head != nullptr) GatherRows(dq + 3 * th, dout_head, T, hs, C);
    return {dq, dq + th, dq + 2 * th, dq + 3 * th, hs, hs};
  } else {
    (void)T;
    (void)hs;
    (void)dense_bf16;
    return {q, q + C, q + 2 * C, dout_head, 3 * C, C};
  }
}

// One thread's scratch ([Note: heads on the compute threads]): slot i of
// the scratch starts i of these sizes in.
struct SlotSizes {
  int64_t floats;
  int64_t bf16;
};

template <typename In>
SlotSizes SlotSizesOf(int T, int hs) {
  if constexpr (std::is_same_v<In, uint16_t>) {
    return {FlashAttentionBf16ScratchFloats(T, hs), FlashAttentionBf16ScratchElements(T, hs)};
  } else {
    return {FlashAttentionScratchFloats(T, hs), 0};
  }
}

// The output has the element type of qkv: under bf16 only the attention
// projection's product reads it, so each row is rounded as it is written.
template <typename In>
void Forward(In* out, float* lse, float* scratch_base, uint16_t* scratch_bf16_base, const In* qkv,
             int batch, int seq_len, int channels, int heads, int scratch_slots) {
  constexpr NumType kIn = kInType<In>;
  const int T = seq_len, C = channels, hs = C / heads, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const KernelIsa isa = BestKernelIsa();
  const SlotSizes sizes = SlotSizesOf<In>(T, hs);
  ForEachHead(batch, heads, scratch_slots, [&](int b, int h, int slot) {
    float* scratch = scratch_base + slot * sizes.floats;
    uint16_t* scratch_bf16 =
        scratch_bf16_base != nullptr ? scratch_bf16_base + slot * sizes.bf16 : nullptr;
    const Scratch w = Carve(scratch, hs);
    uint16_t* dense_bf16 =
        scratch_bf16 != nullptr ? scratch_bf16 + int64_t{kFlashBlock} * kFlashBlock : nullptr;
    const HeadOperands<In> head =
        Head<In>(qkv + static_cast<long>(b) * T * ld + h * hs, nullptr, T, C, hs, dense_bf16);
    float* row_lse = lse + (static_cast<long>(b) * heads + h) * T;
    for (int i0 = 0; i0 < T; i0 += kFlashBlock) {
      const int bq = std::min(kFlashBlock, T - i0);
      std::fill(w.acc, w.acc + bq * hs, 0.0f);
      std::fill(w.m, w.m + bq, kNegativeInfinity);
      std::fill(w.l, w.l + bq, 0.0f);
      for (int j0 = 0; j0 <= i0 + bq - 1; j0 += kFlashBlock) {
        const int bk = std::min(kFlashBlock, T - j0);
        // S[bq, bk] = scale * q_rows[bq, hs] @ k_rows[bk, hs]^T
        Matmul({.m = bq,
                .n = bk,
                .k = hs,
                .a = {head.q + static_cast<long>(i0) * head.ld, kIn, head.ld},
                .b = {head.k + static_cast<long>(j0) * head.ld, kIn, head.ld,
                      /*transposed=*/true},
                .c = w.s,
                .c_type = NumType::kF32,
                .ldc = bk,
                .alpha = scale});
        OnlineSoftmaxBlock(isa, w.s, w.m, w.l, w.acc, bq, bk, hs, i0, j0);
        // acc[bq, hs] += P[bq, bk] @ v_rows[bk, hs]
        Matmul({.m = bq,
                .n = hs,
                .k = bk,
                .a = {Operand<In>(w.s, scratch_bf16, int64_t{bq} * bk), kIn, bk},
                .b = {head.v + static_cast<long>(j0) * head.ld, kIn, head.ld},
                .c = w.acc,
                .c_type = NumType::kF32,
                .ldc = hs,
                .accumulate = true});
      }
      for (int r = 0; r < bq; ++r) {
        const float inv = 1.0f / w.l[r];
        In* o = out + (static_cast<long>(b) * T + i0 + r) * C + h * hs;
        float* a = w.acc + r * hs;
        for (int d = 0; d < hs; ++d) a[d] *= inv;
        if constexpr (std::is_same_v<In, uint16_t>) {
          base::ToBf16(o, a, hs);
        } else {
          std::copy(a, a + hs, o);
        }
        row_lse[i0 + r] = w.m[r] + std::log(w.l[r]);
      }
    }
  });
}

template <typename In>
void Backward(float* dqkv, float* scratch_base, uint16_t* scratch_bf16_base, const In* dout,
              const In* qkv, const In* out, const float* lse, int batch, int seq_len, int channels,
              int heads, int scratch_slots) {
  constexpr NumType kIn = kInType<In>;
  const int T = seq_len, C = channels, hs = C / heads, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const KernelIsa isa = BestKernelIsa();
  constexpr bool kDense = std::is_same_v<In, uint16_t>;
  const long th = static_cast<long>(T) * hs;
  const SlotSizes sizes = SlotSizesOf<In>(T, hs);
  ForEachHead(batch, heads, scratch_slots, [&](int b, int h, int slot) {
    float* scratch = scratch_base + slot * sizes.floats;
    uint16_t* scratch_bf16 = kDense ? scratch_bf16_base + slot * sizes.bf16 : nullptr;
    const Scratch w = Carve(scratch, hs);
    uint16_t* dense_bf16 = kDense ? scratch_bf16 + int64_t{kFlashBlock} * kFlashBlock : nullptr;
    // bf16: the head's dq, dk, dv as dense blocks after the fp32 scratch,
    // added into the strided dqkv once the head is done.
    float* dense_grads = kDense ? scratch + FlashAttentionScratchFloats(T, hs) : nullptr;
    const long qkv_offset = static_cast<long>(b) * T * ld + h * hs;
    const long o_offset = static_cast<long>(b) * T * C + h * hs;
    const In* o = out + o_offset;
    const In* d_o = dout + o_offset;
    const HeadOperands<In> head = Head<In>(qkv + qkv_offset, d_o, T, C, hs, dense_bf16);
    float* const strided_dq = dqkv + qkv_offset;
    float* dq = kDense ? dense_grads : strided_dq;
    float* dk = kDense ? dense_grads + th : strided_dq + C;
    float* dv = kDense ? dense_grads + 2 * th : strided_dq + 2 * C;
    const int ldg = kDense ? hs : ld;
    if (kDense) std::fill(dense_grads, dense_grads + 3 * th, 0.0f);
    const float* row_lse = lse + (static_cast<long>(b) * heads + h) * T;
    // The forward's accumulator is idle in the backward: it widens rows.
    HeadRowDots<In>(isa, w.d, d_o, o, T, hs, C, w.acc);
    for (int i0 = 0; i0 < T; i0 += kFlashBlock) {
      const int bq = std::min(kFlashBlock, T - i0);
      const In* q_rows = head.q + static_cast<long>(i0) * head.ld;
      const In* do_rows = head.d_o + static_cast<long>(i0) * head.ld_do;
      for (int j0 = 0; j0 <= i0 + bq - 1; j0 += kFlashBlock) {
        const int bk = std::min(kFlashBlock, T - j0);
        const In* k_rows = head.k + static_cast<long>(j0) * head.ld;
        const In* v_rows = head.v + static_cast<long>(j0) * head.ld;
        const int64_t block = int64_t{bq} * bk;
        Matmul({.m = bq,
                .n = bk,
                .k = hs,
                .a = {q_rows, kIn, head.ld},
                .b = {k_rows, kIn, head.ld, /*transposed=*/true},
                .c = w.s,
                .c_type = NumType::kF32,
                .ldc = bk,
                .alpha = scale});
        ProbabilitiesFromLse(isa, w.s, row_lse, bq, bk, i0, j0);
        // dv_rows[bk, hs] += P^T[bk, bq] @ dout_rows[bq, hs]
        Matmul({.m = bk,
                .n = hs,
                .k = bq,
                .a = {Operand<In>(w.s, scratch_bf16, block), kIn, bk, /*transposed=*/true},
                .b = {do_rows, kIn, head.ld_do},
                .c = dv + static_cast<long>(j0) * ldg,
                .c_type = NumType::kF32,
                .ldc = ldg,
                .accumulate = true});
        // dP[bq, bk] = dout_rows[bq, hs] @ v_rows[bk, hs]^T
        Matmul({.m = bq,
                .n = bk,
                .k = hs,
                .a = {do_rows, kIn, head.ld_do},
                .b = {v_rows, kIn, head.ld, /*transposed=*/true},
                .c = w.dp,
                .c_type = NumType::kF32,
                .ldc = bk});
        // dS = P (dP - D): masked entries have P = 0, so dS = 0 there.
        ScoreGradientBlock(isa, w.dp, w.s, w.d + i0, bq, bk);
        // The bf16 copy of P was consumed by dV's product: it now holds dS.
        const void* ds = Operand<In>(w.dp, scratch_bf16, block);
        // dq_rows[bq, hs] += scale dS[bq, bk] @ k_rows[bk, hs]
        Matmul({.m = bq,
                .n = hs,
                .k = bk,
                .a = {ds, kIn, bk},
                .b = {k_rows, kIn, head.ld},
                .c = dq + static_cast<long>(i0) * ldg,
                .c_type = NumType::kF32,
                .ldc = ldg,
                .alpha = scale,
                .accumulate = true});
        // dk_rows[bk, hs] += scale dS^T[bk, bq] @ q_rows[bq, hs]
        Matmul({.m = bk,
                .n = hs,
                .k = bq,
                .a = {ds, kIn, bk, /*transposed=*/true},
                .b = {q_rows, kIn, head.ld},
                .c = dk + static_cast<long>(j0) * ldg,
                .c_type = NumType::kF32,
                .ldc = ldg,
                .alpha = scale,
                .accumulate = true});
      }
    }
    if (kDense) {
      for (int part = 0; part < 3; ++part) {  // q, k, v
        AddRows(isa, strided_dq + part * C, ld, dense_grads + part * th, T, hs);
      }
    }
  });
}

}  // namespace

void FlashAttentionForward(float* out, float* lse, float* scratch, const float* qkv, int batch,
                           int seq_len, int channels, int heads, int scratch_slots) {
  Forward<float>(out, lse, scratch, nullptr, qkv, batch, seq_len, channels, heads, scratch_slots);
}

void FlashAttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                            const float* out, const float* lse, int batch, int seq_len,
                            int channels, int heads, int scratch_slots) {
  Backward<float>(dqkv, scratch, nullptr, dout, qkv, out, lse, batch, seq_len, channels, heads,
                  scratch_slots);
}

void FlashAttentionForwardBf16(uint16_t* out, float* lse, float* scratch, uint16_t* scratch_bf16,
                               const uint16_t* qkv, int batch, int seq_len, int channels, int heads,
                               int scratch_slots) {
  Forward<uint16_t>(out, lse, scratch, scratch_bf16, qkv, batch, seq_len, channels, heads,
                    scratch_slots);
}

void FlashAttentionBackwardBf16(float* dqkv, float* scratch, uint16_t* scratch_bf16,
                                const uint16_t* dout, const uint16_t* qkv, const uint16_t* out,
                                const float* lse, int batch, int seq_len, int channels, int heads,
                                int scratch_slots) {
  Backward<uint16_t>(dqkv, scratch, scratch_bf16, dout, qkv, out, lse, batch, seq_len, channels,
                     heads, scratch_slots);
}

}  // namespace fsdp
