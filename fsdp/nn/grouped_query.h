// File: fsdp/nn/grouped_query.h
//
// Grouped-query attention on the shared attention kernels
// (fsdp/nn/attention.h, flash_attention.h): the fused q, k, v projection of
// a Llama block writes, per token, `heads` query heads and `kv_heads` key
// and value heads of hs channels each,
//   proj row = [q (heads hs) | k (kv_heads hs) | v (kv_heads hs)]     fp32,
// and this layer turns it into the (B, T, 3C) [q | k | v] rows those kernels
// read (C = heads hs): q and k rotated (fsdp/nn/rotary.h, position t of each
// sequence), and each key and value head repeated for the heads / kv_heads
// query heads of its group (query head h reads kv head h / group), as
// Hugging Face's repeat_kv does. kv_heads == heads is multi-head attention.
// The rotation runs on the fp32 projection, so in bf16 compute q and k are
// rounded once, after it.
//
// The repetition costs (B, T, 2 (heads - kv_heads) hs) elements over the
// projection; the kernels are unchanged, so multi-head attention gives the
// GPT's bits.
#ifndef FSDP_NN_GROUPED_QUERY_H_
#define FSDP_NN_GROUPED_QUERY_H_

#include "fsdp/nn/dtype_buffer.h"

namespace fsdp {

struct GroupedQueryShape {
  int batch = 0;
  int seq_len = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_size = 0;

  int64_t rows() const { return int64_t{batch} * seq_len; }
  int q_width() const { return heads * head_size; }        // C
  int kv_width() const { return kv_heads * head_size; }
  int group() const { return heads / kv_heads; }           // query heads per kv head
  int64_t proj_width() const { return int64_t{heads + 2 * kv_heads} * head_size; }
  int64_t qkv_width() const { return int64_t{3} * heads * head_size; }
};

// qkv (rows x qkv_width, its dtype) from proj (rows x proj_width, fp32);
// `rope_table` as FillRotaryTable wrote it for at least seq_len positions
// (`table_seq_len` of them).
void RotaryQkvForward(DtypeSpan qkv, const float* proj, const float* rope_table,
                      int table_seq_len, const GroupedQueryShape& shape);

// The backward: dproj (rows x proj_width, fp32, written whole) from dqkv
// (rows x qkv_width, fp32): each key and value head's gradient is the sum of
// its group's, in head order, then q and k are rotated back.
void RotaryQkvBackward(float* dproj, const float* dqkv, const float* rope_table,
                       int table_seq_len, const GroupedQueryShape& shape);

}  // namespace fsdp

#endif  // FSDP_NN_GROUPED_QUERY_H_
