// File: fsdp/nn/attention.cc
#include "fsdp/nn/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/bf16_convert.h"
#include "base/parallel_for.h"
#include "fsdp/nn/dense_rows.h"
#include "fsdp/nn/heads_on_threads.h"
#include "fsdp/nn/matmul.h"
#include "fsdp/nn/softmax_row.h"

namespace fsdp {
namespace {
using simd::F16;
using simd::kLanes;

// Causal softmax of row t of the scores: entries [0, t] take part, the
// masked rest becomes 0. Vector exp and 16-lane sums (simd.h); issue 11
// measured the scalar expf here at 2.4% of a GPT step. The probabilities go
// to `out`: the row itself (fp32), or a bf16 row (then `row` is left holding
// the unnormalized exps).
template <typename Out>
FSDP_SIMD_INLINE void CausalSoftmaxRow(Out* out, float* row, int valid, int row_length) {
  const float max_score = simd::RowMax(row, valid, row_length);
  const float sum = simd::ExpShiftedInPlace(row, valid, max_score, row_length);
  simd::ScaleRowInto(out, row, valid, row_length, 1.0f / sum);
  std::fill(out + valid, out + row_length, Out{0});
}

// Softmax backward of one row: dscore = p * (dp - sum_j p_j dp_j) over the
// valid entries; the masked ones are 0 (their p is 0). The probabilities are
// fp32, or the bf16 that the bf16 compute mode saves ([Note: bf16
// probabilities]), widened exactly as they are loaded; the row tails are read
// and written whole where the row's storage allows ([Note: row tails in
// registers]). The d scores go to `out`: d_row itself (fp32), or a bf16 row,
// rounded as they are stored.
template <typename Prob, typename Out>
FSDP_SIMD_INLINE void CausalSoftmaxBackwardRow(Out* out, const float* d_row, const Prob* p_row,
                                               int valid, int row_length) {
  F16 dot_lanes = simd::Splat(0.0f);
  int i = 0;
  for (; i + kLanes <= valid; i += kLanes) {
    dot_lanes += simd::LoadAsFloat(p_row + i) * simd::Load(d_row + i);
  }
  const int tail = i;
  if (tail < valid) {
    dot_lanes += simd::LoadTail(p_row, tail, valid, row_length, 0.0f) *
                 simd::LoadTail(d_row, tail, valid, row_length, 0.0f);
  }
  const float dot = simd::ReduceAdd(dot_lanes);
  for (i = 0; i + kLanes <= valid; i += kLanes) {
    simd::StoreRow(out + i, simd::LoadAsFloat(p_row + i) * (simd::Load(d_row + i) - dot));
  }
  if (tail < valid) {
    simd::StoreTail(out, tail, valid, row_length,
                    simd::LoadTail(p_row, tail, valid, row_length, 0.0f) *
                        (simd::LoadTail(d_row, tail, valid, row_length, 0.0f) - dot));
  }
  // Also what a whole tail vector wrote past `valid` (signed zeros).
  std::fill(out + valid, out + row_length, Out{0});
}

// `rows` rows of `row_length` entries, the first of them query row
// `first_row`: row i sees keys 0..first_row + i. The square T x T layout is
// (T, T, 0); the bf16 path's causal row blocks ([Note: causal row blocks])
// are (rows of the block, keys they see, the block's first row).
template <typename Out>
FSDP_SIMD_INLINE void CausalSoftmaxRowsOf(Out* out, float* p, int rows, int row_length,
                                          int first_row) {
  for (int i = 0; i < rows; ++i) {
    const long offset = static_cast<long>(i) * row_length;
    CausalSoftmaxRow(out + offset, p + offset, first_row + i + 1, row_length);
  }
}

template <typename Prob, typename Out>
FSDP_SIMD_INLINE void CausalSoftmaxBackwardRowsOf(Out* out, const float* dp, const Prob* p,
                                                  int rows, int row_length, int first_row) {
  for (int i = 0; i < rows; ++i) {
    const long offset = static_cast<long>(i) * row_length;
    CausalSoftmaxBackwardRow(out + offset, dp + offset, p + offset, first_row + i + 1,
                             row_length);
  }
}

FSDP_SIMD_INLINE void CausalSoftmaxRowsBody(float* p, int rows, int row_length, int first_row) {
  CausalSoftmaxRowsOf(p, p, rows, row_length, first_row);
}

FSDP_SIMD_INLINE void CausalSoftmaxRowsToBf16Body(uint16_t* out, float* scores, int rows,
                                                  int row_length, int first_row) {
  CausalSoftmaxRowsOf(out, scores, rows, row_length, first_row);
}

FSDP_SIMD_INLINE void CausalSoftmaxBackwardRowsBody(float* dp, const float* p, int rows,
                                                    int row_length, int first_row) {
  CausalSoftmaxBackwardRowsOf(dp, dp, p, rows, row_length, first_row);
}

FSDP_SIMD_INLINE void CausalSoftmaxBackwardRowsBf16Body(uint16_t* dscores, const float* dp,
                                                        const uint16_t* p, int rows,
                                                        int row_length, int first_row) {
  CausalSoftmaxBackwardRowsOf(dscores, dp, p, rows, row_length, first_row);
}

FSDP_ISA_VARIANTS(void, CausalSoftmaxRows, (float* p, int rows, int row_length, int first_row),
                  (p, rows, row_length, first_row))
FSDP_ISA_VARIANTS(void, CausalSoftmaxRowsToBf16,
                  (uint16_t* out, float* scores, int rows, int row_length, int first_row),
                  (out, scores, rows, row_length, first_row))
FSDP_ISA_VARIANTS(void, CausalSoftmaxBackwardRows,
                  (float* dp, const float* p, int rows, int row_length, int first_row),
                  (dp, p, rows, row_length, first_row))
FSDP_ISA_VARIANTS(void, CausalSoftmaxBackwardRowsBf16,
                  (uint16_t* dscores, const float* dp, const uint16_t* p, int rows,
                   int row_length, int first_row),
                  (dscores, dp, p, rows, row_length, first_row))

void CausalSoftmaxRows(KernelIsa isa, float* p, int rows, int row_length, int first_row) {
  FSDP_ISA_DISPATCH(isa, CausalSoftmaxRows, (p, rows, row_length, first_row));
}

// The probabilities of `scores` rounded into `out` (same layout); `scores`
// keeps the unnormalized exps.
void CausalSoftmaxRowsToBf16(KernelIsa isa, uint16_t* out, float* scores, int rows,
                             int row_length, int first_row) {
  FSDP_ISA_DISPATCH(isa, CausalSoftmaxRowsToBf16, (out, scores, rows, row_length, first_row));
}

void CausalSoftmaxBackwardRows(KernelIsa isa, float* dp, const float* p, int rows,
                               int row_length, int first_row) {
  FSDP_ISA_DISPATCH(isa, CausalSoftmaxBackwardRows, (dp, p, rows, row_length, first_row));
}

// The d scores from the d probabilities `dp` (left unchanged) and the saved
// bf16 probabilities, rounded into `dscores` (same layout).
void CausalSoftmaxBackwardRowsBf16(KernelIsa isa, uint16_t* dscores, const float* dp,
                                   const uint16_t* p, int rows, int row_length, int first_row) {
  FSDP_ISA_DISPATCH(isa, CausalSoftmaxBackwardRowsBf16,
                    (dscores, dp, p, rows, row_length, first_row));
}

}  // namespace

void AttentionForward(float* out, float* probs, const float* qkv, int batch, int seq_len,
                      int channels, int heads) {
  AttentionForward(BestKernelIsa(), out, probs, qkv, batch, seq_len, channels, heads);
}

void AttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                       const float* probs, int batch, int seq_len, int channels, int heads,
                       int scratch_slots) {
  AttentionBackward(BestKernelIsa(), dqkv, scratch, dout, qkv, probs, batch, seq_len, channels,
                    heads, scratch_slots);
}

// [Note: causal row blocks] Query row t sees keys 0..t only, so the scores
// of query rows [r0, r1) need keys [0, r1) and nothing right of that: the
// fp32 products run per block of kCausalRowBlock query rows (and, in the
// backward, per block of as many keys) over the visible part only. At T = 256
// with 128-row blocks that is 3/4 of the full T x T products (the masked
// upper triangle was computed and thrown away before). The softmax writes the
// masked entries (0) itself; nothing else reads them.
namespace {
constexpr int kCausalRowBlock = 128;

constexpr int kNoScratch = 1 << 30;  // the fp32 forward needs no slot
}  // namespace

void AttentionForward(KernelIsa isa, float* out, float* probs, const float* qkv, int batch,
                      int seq_len, int channels, int heads) {
  const int T = seq_len;
  const int C = channels;
  const int hs = C / heads;
  const int ld_qkv = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  ForEachHead(batch, heads, kNoScratch, [&](int b, int h, int) {
    const float* q = qkv + static_cast<long>(b) * T * ld_qkv + h * hs;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* p = probs + (static_cast<long>(b) * heads + h) * T * T;
    // scores[r0:r1, 0:r1] = scale * q[r0:r1] @ k[0:r1]^T
    for (int r0 = 0; r0 < T; r0 += kCausalRowBlock) {
      const int r1 = std::min(T, r0 + kCausalRowBlock);
      Matmul({.m = r1 - r0,
              .n = r1,
              .k = hs,
              .a = {q + static_cast<long>(r0) * ld_qkv, NumType::kF32, ld_qkv},
              .b = {k, NumType::kF32, ld_qkv, /*transposed=*/true},
              .c = p + static_cast<long>(r0) * T,
              .ldc = T,
              .alpha = scale});
    }
    CausalSoftmaxRows(isa, p, T, T, 0);
    // out[r0:r1] (leading dimension C) = probs[r0:r1, 0:r1] @ v[0:r1]
    float* o = out + static_cast<long>(b) * T * C + h * hs;
    for (int r0 = 0; r0 < T; r0 += kCausalRowBlock) {
      const int r1 = std::min(T, r0 + kCausalRowBlock);
      Matmul({.m = r1 - r0,
              .n = hs,
              .k = r1,
              .a = {p + static_cast<long>(r0) * T, NumType::kF32, T},
              .b = {v, NumType::kF32, ld_qkv},
              .c = o + static_cast<long>(r0) * C,
              .ldc = C});
    }
  });
}

int64_t AttentionBackwardScratchFloats(int seq_len) {
  return static_cast<int64_t>(seq_len) * seq_len;
}

void AttentionBackward(KernelIsa isa, float* dqkv, float* scratch, const float* dout,
                       const float* qkv, const float* probs, int batch, int seq_len, int channels,
                       int heads, int scratch_slots) {
  const int T = seq_len;
  const int C = channels;
  const int hs = C / heads;
  const int ld_qkv = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  ForEachHead(batch, heads, scratch_slots, [&](int b, int h, int slot) {
    float* dp = scratch + slot * AttentionBackwardScratchFloats(T);  // d probs, then d scores
    const long qkv_offset = static_cast<long>(b) * T * ld_qkv + h * hs;
    const float* q = qkv + qkv_offset;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* dq = dqkv + qkv_offset;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const float* p = probs + (static_cast<long>(b) * heads + h) * T * T;
    const float* d_o = dout + static_cast<long>(b) * T * C + h * hs;
    // [Note: causal row blocks] Query rows [r0, r1) reach keys [0, r1);
    // key rows [c0, c1) are reached by query rows [c0, T).
    // dv[c0:c1] = probs[c0:T, c0:c1]^T @ dout[c0:T]
    for (int c0 = 0; c0 < T; c0 += kCausalRowBlock) {
      const int c1 = std::min(T, c0 + kCausalRowBlock);
      Matmul({.m = c1 - c0,
              .n = hs,
              .k = T - c0,
              .a = {p + static_cast<long>(c0) * T + c0, NumType::kF32, T, /*transposed=*/true},
              .b = {d_o + static_cast<long>(c0) * C, NumType::kF32, C},
              .c = dv + static_cast<long>(c0) * ld_qkv,
              .ldc = ld_qkv});
    }
    // dprobs[r0:r1, 0:r1] = dout[r0:r1] @ v[0:r1]^T
    for (int r0 = 0; r0 < T; r0 += kCausalRowBlock) {
      const int r1 = std::min(T, r0 + kCausalRowBlock);
      Matmul({.m = r1 - r0,
              .n = r1,
              .k = hs,
              .a = {d_o + static_cast<long>(r0) * C, NumType::kF32, C},
              .b = {v, NumType::kF32, ld_qkv, /*transposed=*/true},
              .c = dp + static_cast<long>(r0) * T,
              .ldc = T});
    }
    // Softmax backward per row: dscore = p * (dp - sum_j p_j dp_j).
    CausalSoftmaxBackwardRows(isa, dp, p, T, T, 0);
    // scores = scale * q k^T:  dq = scale * dscore @ k,  dk = scale * dscore^T @ q
    for (int r0 = 0; r0 < T; r0 += kCausalRowBlock) {
      const int r1 = std::min(T, r0 + kCausalRowBlock);
      Matmul({.m = r1 - r0,
              .n = hs,
              .k = r1,
              .a = {dp + static_cast<long>(r0) * T, NumType::kF32, T},
              .b = {k, NumType::kF32, ld_qkv},
              .c = dq + static_cast<long>(r0) * ld_qkv,
              .ldc = ld_qkv,
              .alpha = scale});
    }
    for (int c0 = 0; c0 < T; c0 += kCausalRowBlock) {
      const int c1 = std::min(T, c0 + kCausalRowBlock);
      Matmul({.m = c1 - c0,
              .n = hs,
              .k = T - c0,
              .a = {dp + static_cast<long>(c0) * T + c0, NumType::kF32, T, /*transposed=*/true},
              .b = {q + static_cast<long>(c0) * ld_qkv, NumType::kF32, ld_qkv},
              .c = dk + static_cast<long>(c0) * ld_qkv,
              .ldc = ld_qkv,
              .alpha = scale});
    }
  });
}

// [Note: contiguous bf16 heads] oneDNN 2.6 runs a bf16 product on AMX or
// AVX512_BF16 (brg kernels) only when every operand and the destination are
// dense; one strided operand (a head inside the (B, T, 3C) qkv rows) sends it
// to its gemm:jit path, which with an output scale took 0.8-1.1 ms for one
// head's 256 x 256 x 64 scores against 37-47 us dense (Xeon with AMX,
// 2026-12-03; a quarter of a bf16 GPT step went there). So each head's q, k,
// v and output gradient are first copied into dense T x hs blocks (a few KB,
// once per head), products write dense fp32 blocks, and those are copied
// into the strided rows. fp32 keeps the strided products: there
// gemm:jit is as fast as the dense brg kernel.
namespace {

// One head's dense bf16 blocks inside the bf16 scratch.
struct DenseHead {
  uint16_t* p;  // T x T, backward only: the dv product's column slabs, then the
                // head's d scores, laid out as the saved probabilities
  uint16_t* q;  // T x hs each
  uint16_t* k;
  uint16_t* v;
  uint16_t* d_o;
};

DenseHead CarveHead(uint16_t* scratch_bf16, int T, int hs) {
  const long tt = static_cast<long>(T) * T, th = static_cast<long>(T) * hs;
  return DenseHead{scratch_bf16, scratch_bf16 + tt, scratch_bf16 + tt + th,
                   scratch_bf16 + tt + 2 * th, scratch_bf16 + tt + 3 * th};
}

}  // namespace

// The bf16 products run per causal row block as well ([Note: causal row
// blocks]), on dense operands only: the probabilities of query rows [r0, r1)
// are saved as a dense (r1 - r0) x r1 block at row r0 of the head's T x T
// buffer (the blocks fit: r1 <= T), the d scores likewise in the scratch, and
// the products that run over key columns [c0, c1) read a dense bf16 copy of
// that column slab of rows [c0, T).
//
// [Note: bf16 probabilities] The saved probabilities are bf16: half the
// bytes of the largest activation at long sequences (B H T^2), and no
// rounding pass in the backward, whose dv product needs them in bf16 anyway.
// The products already read the rounded values; what changes is the
// softmax backward, dscore = p (dp - sum p dp), which now uses them too
// (2^-9 relative per p). Megatron's fused softmax saves its output in half
// precision the same way. The scores and the softmax stay fp32.
namespace {

// Rows [c0, T), columns [c0, c1) of a head's block-laid bf16 values
// `blocks` (the probabilities or the d scores) copied into the dense
// (T - c0) x (c1 - c0) `slab`.
void ColumnSlab(uint16_t* slab, const uint16_t* blocks, int T, int c0, int c1) {
  const int width = c1 - c0;
  for (int r0 = 0; r0 < T; r0 += kCausalRowBlock) {
    const int r1 = std::min(T, r0 + kCausalRowBlock);
    for (int t = std::max(r0, c0); t < r1; ++t) {
      std::memcpy(slab + static_cast<long>(t - c0) * width,
                  blocks + static_cast<long>(r0) * T + static_cast<long>(t - r0) * r1 + c0,
                  sizeof(uint16_t) * width);
    }
  }
}

// dst[c0:c1] = alpha * blocks[c0:T, c0:c1]^T @ rows[c0:T] for every key block
// [c0, c1): the transposed products of the backward (dv from the
// probabilities, dk from the d scores), each over a dense bf16 column slab
// (in `slab`) into the dense T x hs `dense`, then copied into the strided
// dst (leading dimension ld). `rows` is a dense T x hs bf16 block.
void KeyBlockProducts(float* dst, int ld, const uint16_t* blocks, const uint16_t* rows,
                      float alpha, int T, int hs, uint16_t* slab, float* dense) {
  for (int c0 = 0; c0 < T; c0 += kCausalRowBlock) {
    const int c1 = std::min(T, c0 + kCausalRowBlock);
    ColumnSlab(slab, blocks, T, c0, c1);
    Matmul({.m = c1 - c0, .n = hs, .k = T - c0,
            .a = {slab, NumType::kBF16, c1 - c0, /*transposed=*/true},
            .b = {rows + static_cast<long>(c0) * hs, NumType::kBF16, hs},
            .c = dense + static_cast<long>(c0) * hs, .ldc = hs, .alpha = alpha});
  }
  ScatterRows(dst, ld, dense, T, hs);
}

}  // namespace

// The probabilities are saved in bf16 ([Note: bf16 probabilities]): the
// products read them so already, and the backward's softmax reads the same
// rounded values. Each head's output is rounded as it is copied into its
// strided rows: only the attention projection's product reads it.
// [Note: bf16 head products on one thread] One head's products are small
// (256 x 256 x 64 at the GPT's T 256): on AMX, splitting each over 2 threads
// made the whole bf16 attention slower than one thread, 22.1 ms against 13.6
// for B 8, T 256, C 512, H 8 forward and backward (attention_benchmark, Xeon
// with AMX, 2026-12-07). Each runs on one thread, whatever --threads says;
// the heads themselves spread over the threads ([Note: heads on the compute
// threads] in fsdp/nn/heads_on_threads.h).
void AttentionForwardBf16(uint16_t* out, uint16_t* probs, float* scratch, uint16_t* scratch_bf16,
                          const uint16_t* qkv, int batch, int seq_len, int channels, int heads,
                          int scratch_slots) {
  const MatmulThreadsScope one_thread(1);  // [Note: bf16 head products on one thread]
  const KernelIsa isa = BestKernelIsa();
  const int T = seq_len, C = channels, hs = C / heads, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  ForEachHead(batch, heads, scratch_slots, [&](int b, int h, int slot) {
    const DenseHead d = CarveHead(scratch_bf16 + slot * AttentionBf16ScratchElements(T, hs), T, hs);
    float* scores = scratch + slot * AttentionBf16ScratchFloats(T, hs);  // a row block
    float* head_out = scores + static_cast<long>(T) * T;                 // T x hs
    const uint16_t* q = qkv + static_cast<long>(b) * T * ld + h * hs;
    GatherRows(d.q, q, T, hs, ld);
    GatherRows(d.k, q + C, T, hs, ld);
    GatherRows(d.v, q + 2 * C, T, hs, ld);
    uint16_t* p = probs + (static_cast<long>(b) * heads + h) * T * T;
    for (int r0 = 0; r0 < T; r0 += kCausalRowBlock) {
      const int r1 = std::min(T, r0 + kCausalRowBlock), rows = r1 - r0;
      uint16_t* block = p + static_cast<long>(r0) * T;  // rows x r1, dense
      Matmul({.m = rows,
              .n = r1,
              .k = hs,
              .a = {d.q + static_cast<long>(r0) * hs, NumType::kBF16, hs},
              .b = {d.k, NumType::kBF16, hs, /*transposed=*/true},
              .c = scores,
              .ldc = r1,
              .alpha = scale});
      CausalSoftmaxRowsToBf16(isa, block, scores, rows, r1, r0);
      Matmul({.m = rows,
              .n = hs,
              .k = r1,
              .a = {block, NumType::kBF16, r1},
              .b = {d.v, NumType::kBF16, hs},
              .c = head_out + static_cast<long>(r0) * hs,
              .ldc = hs});
    }
    ScatterRowsToBf16(out + static_cast<long>(b) * T * C + h * hs, C, head_out, T, hs);
  });
}

void AttentionBackwardBf16(float* dqkv, float* scratch, uint16_t* scratch_bf16,
                           const uint16_t* dout, const uint16_t* qkv, const uint16_t* probs,
                           int batch, int seq_len, int channels, int heads, int scratch_slots) {
  const MatmulThreadsScope one_thread(1);  // [Note: bf16 head products on one thread]
  const KernelIsa isa = BestKernelIsa();
  const int T = seq_len, C = channels, hs = C / heads, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  ForEachHead(batch, heads, scratch_slots, [&](int b, int h, int slot) {
    const DenseHead d = CarveHead(scratch_bf16 + slot * AttentionBf16ScratchElements(T, hs), T, hs);
    float* dp = scratch + slot * AttentionBf16ScratchFloats(T, hs);  // T x T, as the probs
    float* head_grad = dp + static_cast<long>(T) * T;                // T x hs
    const long qkv_offset = static_cast<long>(b) * T * ld + h * hs;
    GatherRows(d.q, qkv + qkv_offset, T, hs, ld);
    GatherRows(d.k, qkv + qkv_offset + C, T, hs, ld);
    GatherRows(d.v, qkv + qkv_offset + 2 * C, T, hs, ld);
    GatherRows(d.d_o, dout + static_cast<long>(b) * T * C + h * hs, T, hs, C);
    float* dq = dqkv + qkv_offset;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const uint16_t* p = probs + (static_cast<long>(b) * heads + h) * T * T;
    // dv[c0:c1] = probs[c0:T, c0:c1]^T @ dout[c0:T]
    KeyBlockProducts(dv, ld, p, d.d_o, 1.0f, T, hs, d.p, head_grad);
    // Per row block: dprobs = dout @ v^T, the softmax backward (the d
    // scores rounded into d.p, laid out as the probabilities), then
    // dq[r0:r1] = scale * dscores @ k[0:r1].
    for (int r0 = 0; r0 < T; r0 += kCausalRowBlock) {
      const int r1 = std::min(T, r0 + kCausalRowBlock), rows = r1 - r0;
      const long at = static_cast<long>(r0) * T;
      Matmul({.m = rows,
              .n = r1,
              .k = hs,
              .a = {d.d_o + static_cast<long>(r0) * hs, NumType::kBF16, hs},
              .b = {d.v, NumType::kBF16, hs, /*transposed=*/true},
              .c = dp + at,
              .ldc = r1});
      CausalSoftmaxBackwardRowsBf16(isa, d.p + at, dp + at, p + at, rows, r1, r0);
      Matmul({.m = rows,
              .n = hs,
              .k = r1,
              .a = {d.p + at, NumType::kBF16, r1},
              .b = {d.k, NumType::kBF16, hs},
              .c = head_grad + static_cast<long>(r0) * hs,
              .ldc = hs,
              .alpha = scale});
    }
    ScatterRows(dq, ld, head_grad, T, hs);
    // dk[c0:c1] = scale * dscores[c0:T, c0:c1]^T @ q[c0:T], over slabs of
    // the d scores rounded once above. The fp32 d probabilities are dead
    // now: their storage holds the slabs (at most T x kCausalRowBlock bf16
    // values).
    KeyBlockProducts(dk, ld, d.p, d.q, scale, T, hs, reinterpret_cast<uint16_t*>(dp), head_grad);
  });
}

}  // namespace fsdp
