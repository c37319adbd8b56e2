// File: fsdp/nn/gpt_spec.h
//
// The GPT-2-style decoder as data: its configuration, its units and their
// parameter shapes, and the exact activation bytes GptModel allocates. Pure
// functions with no allocation proportional to the model, so the shard
// planner can describe a 7.5e9-parameter model it could never build here.
//
// Units, in forward order (C = d_model, V = vocab, T = seq_len):
//   "embedding": embedding.wte {V, C}, embedding.wpe {T, C}
//   "block<l>":  ln1.{weight,bias} {C}, attn.qkv.{weight {3C, C}, bias {3C}},
//                attn.proj.{weight {C, C}, bias {C}}, ln2.{weight,bias} {C},
//                mlp.fc.{weight {4C, C}, bias {4C}}, mlp.proj.{weight {C, 4C}, bias {C}}
//   "head":      head.ln_f.{weight,bias} {C}, head.lm_head.weight {V, C} (untied
//                from wte so that every unit owns its parameters)
#ifndef FSDP_NN_GPT_SPEC_H_
#define FSDP_NN_GPT_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/dtype.h"
#include "fsdp/nn/activation_checkpointing.h"
#include "fsdp/nn/param_spec.h"

namespace fsdp {

struct GptConfig {
  int layers = 2;
  int d_model = 64;
  int heads = 4;
  int vocab = 256;
  int seq_len = 64;  // maximum sequence length (rows of wpe)
  // The dtype of the matrix products' operands, accumulated in fp32 either
  // way (docs/compute.md, "Precision"). kBFloat16: weights converted per
  // unit, the activations that only feed products saved in bf16;
  // parameters, gradients and everything else fp32.
  comm::Dtype compute_dtype = comm::Dtype::kFloat32;
  // The dtype the parameters arrive in (Model::param_dtype; the trainer's
  // --precision=bf16 layout is kBFloat16): then the weights need no
  // conversion, and the small 1-D parameters (LayerNorm, biases) are widened
  // to fp32 into the workspace. kBFloat16 needs compute_dtype kBFloat16.
  comm::Dtype param_dtype = comm::Dtype::kFloat32;
  // Activation checkpointing (docs/memory.md): 0 keeps every block's
  // activations; K >= 1 checkpoints blocks 0, K, 2K, ... (1: every block).
  // A checkpointed block keeps only its output (the next unit's input)
  // after its forward and recomputes the rest at the start of its backward.
  int activation_checkpoint_every = 0;
  // Memory-efficient attention (fsdp/nn/flash_attention.h): each block saves
  // one log-sum-exp per query row instead of the B H T T probabilities.
  // Either precision.
  bool flash_attention = false;
  // Every matrix product over one sequence at a time (Model::
  // per_sequence_products): the exact mode's model (docs/exact.md), which
  // takes exact (int64) gradients only. Either precision.
  bool per_sequence_products = false;
  // The rank's compute threads (--threads, resolved): the standard
  // attention runs its heads on them, each thread with its own scratch
  // (fsdp/nn/attention_layout.h), which the memory formulas count. 1: the
  // heads in order, one scratch.
  int compute_threads = 1;
};

// OK, or InvalidArgument naming the bad field: all sizes positive, heads
// divides d_model, activation_checkpoint_every in [0, layers].
absl::Status ValidateGptConfig(const GptConfig& config);

// Whether block `layer` (0-based) is checkpointed under config.
bool IsCheckpointedBlock(const GptConfig& config, int layer);

// "layers=2 d_model=64 heads=4 vocab=256 seq_len=64".
std::string GptConfigToString(const GptConfig& config);

// The units, in forward order. Assumes a valid config.
std::vector<UnitSpec> GptUnitSpecs(const GptConfig& config);

// Total parameters over all units.
int64_t GptNumParams(const GptConfig& config);

// The elements of a unit's 1-D parameters (LayerNorm weights and biases,
// Linear biases): what the bf16 parameter layout widens to fp32 per unit.
int64_t SmallParamNumel(const UnitSpec& unit);

// Activation memory of GptModel for one micro-batch of `micro_batch`
// sequences of config.seq_len tokens, in bytes, term by term as the model
// allocates it (see docs/model.md, "Activation memory"):
//   B = micro_batch, T = seq_len, C = d_model, H = heads, V = vocab
//   embedding  4 (BTC + BT)                      output + saved tokens
//   block      4 (16 BTC + 4 BT + B H T T)       ln1, qkv, probs, att, res2, ln2,
//                                                fc, gelu, output (+ LN stats)
//   head       4 (BTC + 3 BT + BTV)              ln_f output + stats, probs, targets
//   workspace  4 (10 BTC + T T)                  backward scratch, allocated once
// With bf16 compute_dtype, ln1, att, ln2 (BTC each), qkv (3 BTC) and gelu (4 BTC) of
// a block and ln_f (head) are saved in 2 bytes instead of 4, and the workspace
// adds 2 (max unit numel + 4 BTC + T T): the bf16 copy of one unit's
// parameters, of an output gradient and of one head's probabilities. With
// bf16 param_dtype the parameters need no copy: 2 (max unit numel) becomes
// 4 (max SmallParamNumel), the fp32 copy of one unit's 1-D parameters.
// With flash_attention a block saves 4 B H T (one log-sum-exp per query row)
// instead of 4 B H T T, and the workspace's T T becomes the blocked
// attention's scratch, FlashAttentionScratchFloats(T, C / H) floats (with
// bf16 compute also the bf16 T T: FlashAttentionBf16ScratchElements()).
// A checkpointed block saves 4 BTC (its output) and, while its forward and
// again while its recomputation and backward run, holds the rest of a block
// (recompute_bytes) on top.
// Every unit's saved activations are alive at the end of the forward; the
// peak of kActivations is peak_bytes() and kWorkspace holds workspace_bytes.
struct GptActivationBreakdown {
  int layers = 0;
  int64_t embedding_bytes = 0;
  int64_t block_bytes = 0;               // saved by a block that is not checkpointed
  int64_t checkpointed_block_bytes = 0;  // saved by a checkpointed block: its output
  int64_t recompute_bytes = 0;           // a checkpointed block's transient: the rest
  std::vector<bool> checkpointed;        // per layer
  int64_t head_bytes = 0;
  int64_t workspace_bytes = 0;

  // Saved by block `layer` from its forward to its backward.
  int64_t block_saved_bytes(int layer) const;
  // Saved by model unit `unit` (0 embedding, 1..layers blocks, layers+1 head),
  // and what it holds on top only while its forward or its backward runs.
  int64_t unit_saved_bytes(int unit) const;
  int64_t unit_transient_bytes(int unit) const;
  // Alive at the end of the forward.
  int64_t saved_bytes() const;
  // The peak of kActivations over a step: the end of the forward, or a
  // checkpointed block's transient over the saved activations of the units
  // before it and its own, whichever is larger.
  int64_t peak_bytes() const;
  int64_t total_bytes() const { return peak_bytes() + workspace_bytes; }
};
GptActivationBreakdown GptActivationBytesByUnit(const GptConfig& config, int micro_batch);

// Peak activations plus workspace: GptActivationBytesByUnit(...).total_bytes().
int64_t GptActivationBytes(const GptConfig& config, int micro_batch);

}  // namespace fsdp

#endif  // FSDP_NN_GPT_SPEC_H_
