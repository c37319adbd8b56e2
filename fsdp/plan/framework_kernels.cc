// File: fsdp/plan/framework_kernels.cc
//
// Op by op, as [Note: counting element-wise bytes] in the header says. In
// the comments a is the activations' element size, f = 4 (fp32
// intermediates), C the width, F the MLP's hidden width, Kv the keys' or
// values' width per token (kv_heads x C / H), V the vocabulary.
#include "fsdp/plan/framework_kernels.h"

namespace fsdp {
namespace plan {
namespace {

constexpr double kFp32 = 4;

// Forward passes, summed; the backward is twice (the header's note).
class Passes {
 public:
  // `kernels` kernels moving `bytes` per token in all.
  void Add(double bytes, double kernels) {
    bytes_ += bytes;
    kernels_ += kernels;
  }
  ElementwiseWork Work() const {
    ElementwiseWork work;
    work.forward_bytes = bytes_;
    work.forward_kernels = kernels_;
    work.backward_bytes = 2 * bytes_;
    work.backward_kernels = 2 * kernels_;
    return work;
  }

 private:
  double bytes_ = 0, kernels_ = 0;
};

double KvWidth(const BlockDimensions& b) {
  return static_cast<double>(b.kv_heads) * (b.width / b.heads);
}

// torchtitan's eager RMSNorm over C: x.float() (a + f), pow (2f), mean
// (f), + eps and rsqrt (per row), x * rsqrt (2f), type_as (f + a),
// * weight (2a): 4a + 7f bytes an element, 8 kernels.
void EagerRmsNorm(double c, double a, Passes& p) { p.Add((4 * a + 7 * kFp32) * c, 8); }

void EagerLlamaBlock(const BlockDimensions& b, double a, Passes& p) {
  const double c = b.width, kv = KvWidth(b), ffn = b.ffn_width;
  EagerRmsNorm(c, a, p);
  EagerRmsNorm(c, a, p);
  // Rotary on q (C) and k (Kv) through complex numbers: float (a + f),
  // the complex product (2f), type_as (f + a); 3 kernels each.
  p.Add((2 * a + 4 * kFp32) * (c + kv), 6);
  // repeat_kv: k and v expanded to every query head, a copy each.
  if (b.kv_heads < b.heads) p.Add(2 * a * (kv + c), 2);
  // The attention output's transpose made contiguous for wo.
  p.Add(2 * a * c, 1);
  // Two residual adds (read two, write one).
  p.Add(2 * 3 * a * c, 2);
  // SwiGLU: silu (2aF) and the product with w3's output (3aF).
  p.Add(5 * a * ffn, 2);
}

// minGPT's block as written: nn.LayerNorm (one kernel each), fused biases
// (addmm), q, k and v copied to batch-major for torch.matmul, the scores'
// scale, causal mask, softmax and dropout as separate kernels, the output
// transposed back, dropout and a residual add on each branch, and GELU's
// tanh formula as eight ops over the MLP's width.
void EagerGptBlock(const BlockDimensions& b, double scores, double a, bool dropout,
                   Passes& p) {
  const double c = b.width, ffn = b.ffn_width;
  p.Add(2 * 2 * a * c, 2);  // two LayerNorms
  if (scores > 0) {
    p.Add(3 * 2 * a * c, 3);                          // q, k, v made batch-major
    p.Add((3 * 2 * a + (dropout ? 2 * a + 1 : 0)) * scores,  // scale, mask, softmax, dropout
          dropout ? 5 : 4);                           // and the mask's comparison
  }
  p.Add(2 * a * c, 1);  // the output's transpose
  if (dropout) p.Add(2 * (2 * a + 1) * c, 2);  // residual dropout (value + mask)
  p.Add(2 * 3 * a * c, 2);                     // residual adds
  // pow, * 0.044715, +, * sqrt(2/pi), tanh, + 1, 0.5 * x, *: six unary (2a)
  // and two binary (3a) passes.
  p.Add((6 * 2 + 2 * 3) * a * ffn, 8);
}

// Megatron-LM's fused kernels: LayerNorm, scale-mask-softmax, bias-GELU and
// bias-dropout-add one kernel each; attention dropout separate; the
// context permuted back.
void FusedGptBlock(const BlockDimensions& b, double scores, double a, bool dropout,
                   Passes& p) {
  const double c = b.width, ffn = b.ffn_width;
  p.Add(2 * 2 * a * c, 2);  // two LayerNorms
  if (scores > 0) p.Add((2 * a + (dropout ? 2 * a + 1 : 0)) * scores, dropout ? 2 : 1);
  p.Add(2 * a * c, 1);                                   // context permute
  p.Add(2 * a * ffn, 1);                                 // bias-GELU
  p.Add(2 * (3 * a + (dropout ? 1 : 0)) * c, 2);         // bias-dropout-add x 2
}

// One kernel per chain between two products (torch.compile): the residual
// add fused with the next norm (read both, write the sum and the normed),
// twice; rotary with repeat_kv (read q, k, v; write q and the expanded k,
// v); the output's transpose; silu times the gate.
void FusedLlamaBlock(const BlockDimensions& b, double a, Passes& p) {
  const double c = b.width, kv = KvWidth(b), ffn = b.ffn_width;
  p.Add(2 * 4 * a * c, 2);
  p.Add(a * (c + 2 * kv) + a * 3 * c, 1);
  p.Add(2 * a * c, 1);
  p.Add(3 * a * ffn, 1);
}

}  // namespace

BlockDimensions GptBlockDimensions(int64_t width, int64_t heads) {
  BlockDimensions b;
  b.family = BlockFamily::kGpt;
  b.width = width;
  b.ffn_width = 4 * width;
  b.heads = heads;
  b.kv_heads = heads;
  return b;
}

ElementwiseWork BlockElementwisePerToken(const BlockDimensions& block, int64_t seq_len,
                                         const KernelOptions& options) {
  if (options.software == KernelSoftware::kThisRuntime) return {};
  const double a = options.activation_bytes;
  // Without flash attention a token's row of scores per head is computed
  // in full (the mask is applied to it, not skipped).
  const double scores =
      options.flash_attention ? 0 : static_cast<double>(block.heads) * seq_len;
  const bool eager = options.software == KernelSoftware::kPyTorchEager;
  Passes p;
  // The products' kernels: seven projections or four, and attention's
  // one (flash) or two.
  p.Add(0, (block.family == BlockFamily::kLlama ? 7 : 4) + (scores > 0 ? 2 : 1));
  if (block.family == BlockFamily::kLlama) {
    // Llama's attention here is flash (SDPA); without it the scores'
    // passes are the GPT's.
    if (eager) {
      EagerLlamaBlock(block, a, p);
    } else {
      FusedLlamaBlock(block, a, p);
    }
    if (scores > 0) p.Add((eager ? 3 * 2 * a : 2 * a) * scores, eager ? 4 : 1);
  } else if (eager) {
    EagerGptBlock(block, scores, a, options.dropout, p);
  } else {
    FusedGptBlock(block, scores, a, options.dropout, p);
  }
  return p.Work();
}

ElementwiseWork HeadElementwisePerToken(const BlockDimensions& block, int64_t vocab,
                                        const KernelOptions& options) {
  if (options.software == KernelSoftware::kThisRuntime) return {};
  const double a = options.activation_bytes, c = block.width, v = vocab;
  Passes p;
  p.Add(0, 1);  // the output projection
  if (options.software == KernelSoftware::kFused) {
    // One norm kernel; the loss one kernel reading the logits and writing
    // fp32 probabilities for the backward.
    p.Add(2 * a * c, 1);
    p.Add((a + kFp32) * v, 1);
  } else if (block.family == BlockFamily::kLlama) {
    // torchtitan: RMSNorm, then cross_entropy(logits.float()): the cast
    // (a + f), log-softmax (2f), the loss's gather (per token).
    EagerRmsNorm(c, a, p);
    p.Add((a + 3 * kFp32) * v, 3);
  } else {
    // minGPT: nn.LayerNorm, cross_entropy on the 16-bit logits: log-softmax
    // (2a), the loss's gather.
    p.Add(2 * a * c, 1);
    p.Add(2 * a * v, 2);
  }
  return p.Work();
}

ElementwiseWork EmbeddingElementwisePerToken(const BlockDimensions& block,
                                             const KernelOptions& options) {
  if (options.software == KernelSoftware::kThisRuntime) return {};
  const double a = options.activation_bytes, c = block.width;
  Passes p;
  p.Add(2 * a * c, 1);  // the token embedding's gather
  if (block.family == BlockFamily::kGpt) {
    p.Add(2 * a * c + 3 * a * c, 2);  // the position's gather and the add
    if (options.dropout) p.Add((2 * a + 1) * c, 1);
  }
  return p.Work();
}

}  // namespace plan
}  // namespace fsdp
