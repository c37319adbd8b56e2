// File: fsdp/nn/llama_spec.h
//
// The Llama decoder as data: its configuration, its units and their
// parameter shapes. Pure functions with no allocation proportional to the
// model, so the planner can describe Llama 3 405B without building it.
//
// Units, in forward order (C = d_model, V = vocab, hs = C / heads,
// KV = kv_heads, F = ffn_hidden), parameters named as in Hugging Face's
// LlamaForCausalLM, each weight out_features x in_features:
//   "embedding": model.embed_tokens.weight {V, C}
//   "block<l>":  model.layers.<l>.input_layernorm.weight {C},
//                .self_attn.q_proj.weight {C, C}, .k_proj.weight {KV hs, C},
//                .v_proj.weight {KV hs, C}, .o_proj.weight {C, C},
//                .post_attention_layernorm.weight {C},
//                .mlp.gate_proj.weight {F, C}, .up_proj.weight {F, C},
//                .down_proj.weight {C, F}
//   "head":      model.norm.weight {C}, lm_head.weight {V, C} (absent when
//                tie_embeddings: the head reads model.embed_tokens.weight)
// q, k and v lie next to each other, as do gate and up: the block runs each
// group as one product with the stacked weight ({(heads + 2 KV) hs, C} and
// {2F, C}).
#ifndef FSDP_NN_LLAMA_SPEC_H_
#define FSDP_NN_LLAMA_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/dtype.h"
#include "fsdp/nn/gpt_spec.h"  // GptActivationBreakdown: the breakdown of any of our decoders
#include "fsdp/nn/param_spec.h"

namespace fsdp {

struct LlamaConfig {
  int layers = 2;
  int d_model = 64;
  int heads = 4;
  int kv_heads = 4;     // grouped-query attention; == heads is multi-head
  int ffn_hidden = 0;   // SwiGLU width; LlamaDefaultFfnHidden when built from flags
  int vocab = 256;
  int seq_len = 64;     // maximum sequence length (rows of the rotary table)
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  // The head reads the embedding's weight (lm_head = embed_tokens, as
  // Llama 3.2 1B and 3B): the head unit then holds the final norm alone.
  bool tie_embeddings = false;
  // The products' operands and what only feeds them (fp32, or bf16 with fp32
  // accumulation), and the dtype the parameters arrive in (bf16 needs bf16
  // compute), as GptConfig's bf16_compute and bf16_params.
  comm::Dtype compute_dtype = comm::Dtype::kFloat32;
  comm::Dtype param_dtype = comm::Dtype::kFloat32;
  // As GptConfig's: 0 none, K checkpoints blocks 0, K, 2K, ...
  int activation_checkpoint_every = 0;
  bool flash_attention = false;
  // As GptConfig's: every product over one sequence at a time, the exact
  // mode's model (docs/exact.md), taking exact (int64) gradients only.
  // Not with tied embeddings (the head's share of the embedding's gradient
  // would need per-sequence sums of its own).
  bool per_sequence_products = false;
  // The rank's compute threads (--threads, resolved): the standard
  // attention runs its heads on them, each thread with its own scratch
  // (fsdp/nn/attention_layout.h), which the memory formulas count. 1: the
  // heads in order, one scratch.
  int compute_threads = 1;
};

// Llama's rule for the SwiGLU width: floor(8 d_model / 3) rounded up to a
// multiple of `multiple_of` (256 in Llama 2 7B: 11008 for d_model 4096).
int LlamaDefaultFfnHidden(int d_model, int multiple_of = 256);

// OK, or InvalidArgument naming the bad field and what to change: sizes
// positive, heads divides d_model into an even head size, kv_heads divides
// heads, rope_theta > 1, norm_eps > 0, dtypes fp32 or bf16 (bf16 parameters
// need bf16 compute), activation_checkpoint_every in [0, layers].
absl::Status ValidateLlamaConfig(const LlamaConfig& config);

// "layers=2 d_model=64 heads=4 kv_heads=2 ffn_hidden=192 vocab=256 seq_len=64"
// (then " tied" with tied embeddings).
std::string LlamaConfigToString(const LlamaConfig& config);

// The units, in forward order. Assumes a valid config.
std::vector<UnitSpec> LlamaUnitSpecs(const LlamaConfig& config);

int64_t LlamaNumParams(const LlamaConfig& config);

bool IsCheckpointedLlamaBlock(const LlamaConfig& config, int layer);

// Activation memory of LlamaModel for one micro-batch of `micro_batch`
// sequences of config.seq_len tokens, in bytes, term by term as the model
// allocates it (docs/model.md, "Llama"), in the GPT's breakdown (the same
// units: embedding, blocks, head; the same checkpointing). With
// B = micro_batch, T = seq_len, n = B T, C = d_model, H = heads, hs = C / H,
// F = ffn_hidden, V = vocab, W = (H + 2 kv_heads) hs the fused q, k, v
// projection's width, X = max(2F, 3C), s = the compute dtype's bytes:
//   embedding  4 (n C + n)                             output, tokens
//   block      s (6 n C + n F) + 4 (2 n C + 2 n + 2 n F)
//              + attention: s B H T T (standard) or 4 B H T (flash)
//              rms1, qkv (3), att, rms2 and the SwiGLU output in the compute
//              dtype; res2, out, gate_up (2F) and the two rstd in fp32
//   head       s n C + 4 (2 n + n V)                    norm output, rstd, probs, targets
//   workspace  4 (T hs + 2 n C + n F + n X + n W + A)   rope table, d_residual,
//              d_narrow, d_hidden, d_wide, the projection; A = the
//              attention's scratch floats as for the GPT; in bf16 also
//              2 (n X + attention bf16 scratch) and one unit's parameters
//              in bf16 (2 max unit numel) or, with bf16 parameters, its 1-D
//              ones in fp32 (4 max 1-D numel). With tied embeddings also
//              s V C + 4 V C: the embedding's weight kept from its forward
//              for the head, and the head's gradient of it until the
//              embedding's backward adds it in.
// A checkpointed block saves 4 n C (its output) and holds the rest of a
// block (recompute_bytes) while its forward and again while its backward
// runs.
GptActivationBreakdown LlamaActivationBytesByUnit(const LlamaConfig& config, int micro_batch);

}  // namespace fsdp

#endif  // FSDP_NN_LLAMA_SPEC_H_
