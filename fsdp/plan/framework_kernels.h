// File: fsdp/plan/framework_kernels.h
//
// The element-wise work a GPU framework does around a transformer's matrix
// products, per token: the bytes its kernels read and write and how many
// kernels it launches, counted op by op from the model's shapes, for the
// software a published run states. The step-time model turns bytes into
// time at the description's memory bandwidth and kernels at its
// framework_overhead.kernel_launch_s (proto/hardware.proto).
//
//   BlockDimensions llama{BlockFamily::kLlama, 4096, 14336, 32, 8};
//   ElementwiseWork w = BlockElementwisePerToken(llama, KernelSoftware::kPyTorchEager,
//                                                /*seq_len=*/8192, ...);
//   w.forward_bytes   // 626,688: two RMSNorms, rotary, repeat_kv, SwiGLU, ...
//
// [Note: counting element-wise bytes] Each kernel reads its inputs and
// writes its output once at the element size it runs in (a = 2 for bf16 or
// fp16 activations, 4 for fp32 intermediates); per-row statistics and
// broadcast weights are left out (a row of C elements against one value).
// Backward is counted as twice the forward, in bytes and kernels: a unary
// op's backward reads the output gradient and a saved tensor and writes the
// input gradient (3 tensors against the forward's 2), a product of two
// tensors writes both gradients (5 against 3), and autograd adds the
// gradients of a branch point. These are counts of what the ops must
// touch, not measurements; caches and partial fusion make kernels move a
// little less.
//
// Software:
//   kPyTorchEager   one kernel per PyTorch op as the model's code calls it
//                   (torchtitan without torch.compile, minGPT): an
//                   RMSNorm written as x.float(), pow, mean, rsqrt, mul,
//                   type_as, * weight is seven passes; nn.LayerNorm, SDPA
//                   and cross-entropy's log-softmax are single kernels.
//   kFused          each chain of element-wise ops between two products is
//                   one kernel reading its inputs once and writing its
//                   output once (Megatron-LM's fused LayerNorm, bias-GELU,
//                   scale-mask-softmax and bias-dropout-add; torch.compile).
#ifndef FSDP_PLAN_FRAMEWORK_KERNELS_H_
#define FSDP_PLAN_FRAMEWORK_KERNELS_H_

#include <cstdint>

namespace fsdp {
namespace plan {

enum class KernelSoftware {
  kThisRuntime,  // this framework's kernels (fsdp/plan/gpt_work.h's own count)
  kPyTorchEager,
  kFused,
};

// kGpt: LayerNorm, a GELU MLP, multi-head attention, biases (GPT-2,
// minGPT, Megatron-LM). kLlama: RMSNorm, a SwiGLU MLP, rotary positions,
// grouped-query attention, no biases.
enum class BlockFamily { kGpt, kLlama };

// The block a published run's framework ran (for the presets, the original
// model's, not the planner's equal-parameter GPT).
struct BlockDimensions {
  BlockFamily family = BlockFamily::kGpt;
  int64_t width = 0;      // C
  int64_t ffn_width = 0;  // the MLP's hidden width (GPT: 4C; Llama: F)
  int64_t heads = 0;      // H; the head dimension is C / H
  int64_t kv_heads = 0;   // key/value heads (GPT: H)
};

// The GPT family's block of this width and head count.
BlockDimensions GptBlockDimensions(int64_t width, int64_t heads);

// What the software does beyond the block's shape.
struct KernelOptions {
  KernelSoftware software = KernelSoftware::kThisRuntime;
  int activation_bytes = 2;  // a: the activations' element size (2 under bf16/fp16)
  bool flash_attention = true;  // attention scores stay in the kernel (none streamed)
  bool dropout = false;         // dropout after attention and each residual branch
};

// Bytes read + written per token, and kernels launched per pass (one
// launch covers every token of a micro-batch).
struct ElementwiseWork {
  double forward_bytes = 0;
  double backward_bytes = 0;
  double forward_kernels = 0;  // the products' kernels included
  double backward_kernels = 0;
};

// One block, per token, for sequences of `seq_len` (the scores of an
// attention without flash: H x seq_len per token, the full square, as
// eager and fused softmax kernels compute it). Zeros for kThisRuntime.
ElementwiseWork BlockElementwisePerToken(const BlockDimensions& block, int64_t seq_len,
                                         const KernelOptions& options);

// The final norm, the output projection's kernels and the loss over
// `vocab` logits, per token. Zeros for kThisRuntime.
ElementwiseWork HeadElementwisePerToken(const BlockDimensions& block, int64_t vocab,
                                        const KernelOptions& options);

// The token and position embedding's gather, per token. Zeros for
// kThisRuntime.
ElementwiseWork EmbeddingElementwisePerToken(const BlockDimensions& block,
                                             const KernelOptions& options);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_FRAMEWORK_KERNELS_H_
