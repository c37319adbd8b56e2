// File: tests/fsdp/plan/framework_kernels_test.cc
// The element-wise bytes and kernels of a framework's block, head and
// embedding, recomputed here op by op from the header's list.
#include "fsdp/plan/framework_kernels.h"

#include "gtest/gtest.h"

namespace fsdp {
namespace plan {
namespace {

KernelOptions Options(KernelSoftware software, bool flash, bool dropout) {
  KernelOptions o;
  o.software = software;
  o.activation_bytes = 2;
  o.flash_attention = flash;
  o.dropout = dropout;
  return o;
}

// Llama 3 8B in eager PyTorch, bf16 (a = 2, f = 4), C 4096, F 14336, Kv
// 1024 per token: two RMSNorms 2 (4a + 7f) C, rotary (2a + 4f)(C + Kv),
// repeat_kv 2a (Kv + C), the output transpose 2aC, two residual adds
// 2 x 3aC, SwiGLU 5aF.
TEST(FrameworkKernelsTest, EagerLlamaBlock) {
  const BlockDimensions llama{BlockFamily::kLlama, 4096, 14336, 32, 8};
  const ElementwiseWork w = BlockElementwisePerToken(
      llama, 8192, Options(KernelSoftware::kPyTorchEager, /*flash=*/true, false));
  const double c = 4096, f = 14336, kv = 1024;
  const double forward = 2 * 36 * c + 20 * (c + kv) + 4 * (kv + c) + 4 * c + 12 * c + 10 * f;
  EXPECT_DOUBLE_EQ(w.forward_bytes, forward);
  EXPECT_DOUBLE_EQ(forward, 626688);
  EXPECT_DOUBLE_EQ(w.backward_bytes, 2 * forward);
  // 8 products (7 projections, flash attention), 2 x 8 norm, 6 rotary, 2
  // repeat_kv, 1 transpose, 2 adds, 2 SwiGLU.
  EXPECT_DOUBLE_EQ(w.forward_kernels, 8 + 16 + 6 + 2 + 1 + 2 + 2);
  EXPECT_DOUBLE_EQ(w.backward_kernels, 2 * w.forward_kernels);
  // Without grouped-query attention nothing is repeated.
  const BlockDimensions mha{BlockFamily::kLlama, 4096, 14336, 32, 32};
  const ElementwiseWork m = BlockElementwisePerToken(
      mha, 8192, Options(KernelSoftware::kPyTorchEager, true, false));
  EXPECT_DOUBLE_EQ(m.forward_bytes, forward - 4 * (kv + c) + 20 * (c - kv));
}

// minGPT eagerly, T = 2048, H = 96, C = 12288: scores H T per token at
// 3 x 2a + (2a + 1) with dropout; LayerNorms 4aC, q k v copies 6aC, the
// transpose 2aC, residual dropout 2 (2a + 1) C, adds 6aC, GELU 18a x 4C.
TEST(FrameworkKernelsTest, EagerMinGptBlock) {
  const BlockDimensions gpt = GptBlockDimensions(12288, 96);
  EXPECT_EQ(gpt.ffn_width, 4 * 12288);
  EXPECT_EQ(gpt.kv_heads, 96);
  const ElementwiseWork w = BlockElementwisePerToken(
      gpt, 2048, Options(KernelSoftware::kPyTorchEager, /*flash=*/false, /*dropout=*/true));
  const double c = 12288, scores = 96.0 * 2048;
  EXPECT_DOUBLE_EQ(w.forward_bytes,
                   8 * c + 12 * c + 17 * scores + 4 * c + 10 * c + 12 * c + 36 * 4 * c);
  EXPECT_DOUBLE_EQ(w.forward_kernels, 6 + 2 + 3 + 5 + 1 + 2 + 2 + 8);
}

// Megatron-LM's fused kernels: LayerNorms 4aC, fused softmax 2a and dropout
// (2a + 1) per score, the context permute 2aC, bias-GELU 2a x 4C,
// bias-dropout-add 2 (3a + 1) C.
TEST(FrameworkKernelsTest, FusedGptBlockMovesFewerBytes) {
  const BlockDimensions gpt = GptBlockDimensions(8192, 32);
  const KernelOptions fused = Options(KernelSoftware::kFused, false, true);
  const ElementwiseWork w = BlockElementwisePerToken(gpt, 1024, fused);
  const double c = 8192, scores = 32.0 * 1024;
  EXPECT_DOUBLE_EQ(w.forward_bytes, 8 * c + 9 * scores + 4 * c + 16 * c + 14 * c);
  const ElementwiseWork eager =
      BlockElementwisePerToken(gpt, 1024, Options(KernelSoftware::kPyTorchEager, false, true));
  EXPECT_LT(w.forward_bytes, eager.forward_bytes);
  EXPECT_LT(w.forward_kernels, eager.forward_kernels);
  // torch.compile on Llama: fewer bytes than eager too.
  const BlockDimensions llama{BlockFamily::kLlama, 4096, 14336, 32, 8};
  EXPECT_LT(BlockElementwisePerToken(llama, 8192, Options(KernelSoftware::kFused, true, false))
                .forward_bytes,
            BlockElementwisePerToken(llama, 8192,
                                     Options(KernelSoftware::kPyTorchEager, true, false))
                .forward_bytes);
}

// torchtitan's loss: RMSNorm, then the fp32 cast and log-softmax of V logits.
TEST(FrameworkKernelsTest, HeadAndEmbedding) {
  const BlockDimensions llama{BlockFamily::kLlama, 4096, 14336, 32, 8};
  const KernelOptions eager = Options(KernelSoftware::kPyTorchEager, true, false);
  const ElementwiseWork head = HeadElementwisePerToken(llama, 128256, eager);
  EXPECT_DOUBLE_EQ(head.forward_bytes, 36 * 4096.0 + 14 * 128256.0);
  EXPECT_DOUBLE_EQ(head.forward_kernels, 1 + 8 + 3);
  const ElementwiseWork embedding = EmbeddingElementwisePerToken(llama, eager);
  EXPECT_DOUBLE_EQ(embedding.forward_bytes, 4 * 4096.0);
  EXPECT_DOUBLE_EQ(embedding.backward_bytes, 8 * 4096.0);
}

// This runtime's own count lives in gpt_work.h: nothing here.
TEST(FrameworkKernelsTest, ThisRuntimeCountsNothingHere) {
  const KernelOptions own = Options(KernelSoftware::kThisRuntime, false, true);
  const BlockDimensions gpt = GptBlockDimensions(64, 4);
  for (const ElementwiseWork& w :
       {BlockElementwisePerToken(gpt, 32, own), HeadElementwisePerToken(gpt, 100, own),
        EmbeddingElementwisePerToken(gpt, own)}) {
    EXPECT_EQ(w.forward_bytes + w.backward_bytes + w.forward_kernels + w.backward_kernels, 0);
  }
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
