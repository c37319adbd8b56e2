// File: fsdp/models/llama_config.cc
#include "fsdp/models/llama_config.h"

namespace fsdp {

LlamaConfig LlamaConfigOf(const TrainOptions& o) {
  LlamaConfig c;
  c.layers = o.layers;
  c.d_model = o.d_model;
  c.heads = o.heads;
  c.kv_heads = o.kv_heads > 0 ? o.kv_heads : o.heads;
  c.ffn_hidden = o.ffn_hidden > 0        ? o.ffn_hidden
                 : o.ffn_multiple_of > 0 ? LlamaDefaultFfnHidden(o.d_model, o.ffn_multiple_of)
                                         : 0;
  c.vocab = o.vocab;
  c.seq_len = o.seq_len;
  c.rope_theta = o.rope_theta > 0.0f ? o.rope_theta : LlamaConfig().rope_theta;
  c.norm_eps = o.norm_eps > 0.0f ? o.norm_eps : LlamaConfig().norm_eps;
  c.tie_embeddings = o.tie_embeddings;
  // bf16 parameters are multiplied in bf16 ([Note: bf16 parameter layout]).
  c.compute_dtype = o.sharding.precision.param_dtype;
  c.param_dtype = o.sharding.precision.param_dtype;
  c.activation_checkpoint_every = o.activation_checkpointing.checkpoint_every();
  c.flash_attention = o.attention == Attention::kFlash;
  // --exact: every product over one sequence (docs/exact.md).
  c.per_sequence_products = o.sharding.precision.reduction == ReductionKind::kExact;
  // Attention keeps a scratch per compute thread ([Note: heads on the
  // compute threads]); the memory formulas count them.
  c.compute_threads = ResolvedComputeThreads(o);
  return c;
}

}  // namespace fsdp
