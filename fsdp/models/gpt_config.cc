// File: fsdp/models/gpt_config.cc
#include "fsdp/models/gpt_config.h"

#include "comm/dtype.h"

namespace fsdp {

GptConfig GptConfigOf(const TrainOptions& options) {
  GptConfig config;
  config.layers = options.layers;
  config.d_model = options.d_model;
  config.heads = options.heads;
  config.vocab = options.vocab;
  config.seq_len = options.seq_len;
  // The parameters' dtype is the model's compute dtype too: bf16 parameters
  // are multiplied in bf16 ([Note: bf16 parameter layout]).
  config.param_dtype = options.sharding.precision.param_dtype;
  config.compute_dtype = config.param_dtype;
  config.activation_checkpoint_every = options.activation_checkpointing.checkpoint_every();
  config.flash_attention = options.attention == Attention::kFlash;
  // --exact: every product over one sequence (docs/exact.md).
  config.per_sequence_products =
      options.sharding.precision.reduction == ReductionKind::kExact;
  // Attention keeps a scratch per compute thread ([Note: heads on the
  // compute threads]); the memory formulas count them.
  config.compute_threads = ResolvedComputeThreads(options);
  return config;
}

}  // namespace fsdp
