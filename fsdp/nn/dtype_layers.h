// File: fsdp/nn/dtype_layers.h
//
// The layers over dtype-tagged operands (fsdp/nn/dtype_buffer.h): each call
// reads its operands' dtypes and runs the fp32 kernel or the bf16 one
// (fsdp/nn/linear.h, layer_norm.h, attention.h, bf16_outputs.h, ...), so a
// model writes its forward and backward once over the compute dtype and the
// dtype is data it carries in its buffers. The switch costs one branch per
// call; the kernels behind it are the ones a model calling them directly
// would run, with the same bits.
//
//   // ln's dtype is the compute dtype: fp32, or bf16 rounded while in L1.
//   LayerNormForward(ln.span(), mean, rstd, x, ln_weight, ln_bias, n, C);
//   LinearForward(Fp32(qkv), ln.span(), params.weight(kQkv), qkv_bias, n, C, 3 * C);
//
// Conventions: activations and the products' operands are in the compute
// dtype (fp32 or bf16; the two operands of a product always agree); LayerNorm
// parameters, biases, statistics and everything accumulated stay fp32.
// A "compute copy" of an fp32 gradient is what the products read of it: in
// fp32 the same values (a view of the fp32 buffer itself), in bf16 their
// rounding, written by the call that produces the fp32 values.
#ifndef FSDP_NN_DTYPE_LAYERS_H_
#define FSDP_NN_DTYPE_LAYERS_H_

#include <cstdint>

#include "fsdp/nn/dtype_buffer.h"
#include "fsdp/nn/grad_write.h"

namespace fsdp {

// `n` floats at `data` as a tagged view.
inline DtypeSpan Fp32(float* data, int64_t n) { return DtypeSpan(absl::MakeSpan(data, n)); }
inline ConstDtypeSpan Fp32(const float* data, int64_t n) {
  return ConstDtypeSpan(absl::MakeConstSpan(data, n));
}

// out = LN(inp) in out's dtype.
void LayerNormForward(DtypeSpan out, float* mean, float* rstd, const float* inp,
                      const float* weight, const float* bias, int n, int channels);

// LayerNormBackward (dinp += the input gradient, dweight and dbias added);
// when `dinp_copy` is bf16 it also receives bf16(dinp), the sum rounded. An
// fp32 `dinp_copy` means the products read dinp itself: nothing more to write.
void LayerNormBackward(float* dinp, DtypeSpan dinp_copy, float* dweight, float* dbias,
                       const float* dout, const float* inp, const float* weight,
                       const float* mean, const float* rstd, int n, int channels);

// out = inp weight^T + bias; inp and weight in the compute dtype, out fp32 or
// (bf16 compute) bf16.
void LinearForward(DtypeSpan out, ConstDtypeSpan inp, ConstDtypeSpan weight, const float* bias,
                   int n, int in_features, int out_features);
// The same over n rows as `calls` products of n / calls rows each (calls =
// the micro-batch's sequences under per-sequence products, docs/exact.md:
// a sequence's rows then have the same bits wherever it sits; 1 otherwise).
void LinearForwardInCalls(DtypeSpan out, ConstDtypeSpan inp, ConstDtypeSpan weight,
                          const float* bias, int n, int calls, int in_features, int out_features);

// The products of a Linear's backward from `dout_copy` (the compute copy of
// the output gradient): dinp (fp32) and the weight gradient in dweight's
// dtype (bf16 straight from the product's fp32 accumulator, kOverwrite
// only); the bias gradient (dbias, null for none) from the fp32 `dout`
// (null when dbias is). Write modes as LinearBackward's.
void LinearBackward(float* dinp, DtypeSpan dweight, float* dbias, const float* dout,
                    ConstDtypeSpan dout_copy, ConstDtypeSpan inp, ConstDtypeSpan weight, int n,
                    int in_features, int out_features, GradWrite dinp_write,
                    GradWrite param_write);

// dbias (+)= the column sums of the fp32 `dout` (rows x width), and its
// compute copy: in bf16 written into `copy_scratch` (returned, its first
// rows x width elements), in fp32 the view of `dout` itself.
ConstDtypeSpan BiasGradientAndComputeCopy(float* dbias, DtypeSpan copy_scratch, const float* dout,
                                          int rows, int width, GradWrite write);

// The compute copy of the fp32 `src` (n elements): its rounding written into
// `copy_scratch` when that is bf16, else the view of `src`.
ConstDtypeSpan ComputeCopy(DtypeSpan copy_scratch, const float* src, int64_t n);

// out = GELU(inp) in out's dtype.
void GeluForward(DtypeSpan out, const float* inp, int64_t n);

// dinp (overwritten, its dtype) = dout * gelu'(inp) over rows x width, and
// dbias (+)= the column sums of that gradient in fp32: the bias gradient of
// the product whose output GELU read.
void GeluBackwardWithBiasGradient(DtypeSpan dinp, float* dbias, const float* inp,
                                  const float* dout, int rows, int width, GradWrite write);

// Causal attention (fsdp/nn/attention.h) in the dtype of qkv, out and probs;
// `scratch` and `scratch_bf16` (null in fp32) as the kernels size them, each
// `scratch_slots` times (one per thread that may run heads at once).
void AttentionForward(DtypeSpan out, DtypeSpan probs, float* scratch, uint16_t* scratch_bf16,
                      ConstDtypeSpan qkv, int batch, int seq_len, int channels, int heads,
                      int scratch_slots = 1);
void AttentionBackward(float* dqkv, float* scratch, uint16_t* scratch_bf16, ConstDtypeSpan dout,
                       ConstDtypeSpan qkv, ConstDtypeSpan probs, int batch, int seq_len,
                       int channels, int heads, int scratch_slots = 1);
// The blocked (flash) attention, likewise (fsdp/nn/flash_attention.h).
void FlashAttentionForward(DtypeSpan out, float* lse, float* scratch, uint16_t* scratch_bf16,
                           ConstDtypeSpan qkv, int batch, int seq_len, int channels, int heads,
                           int scratch_slots = 1);
void FlashAttentionBackward(float* dqkv, float* scratch, uint16_t* scratch_bf16,
                            ConstDtypeSpan dout, ConstDtypeSpan qkv, ConstDtypeSpan out,
                            const float* lse, int batch, int seq_len, int channels, int heads,
                            int scratch_slots = 1);

// Token plus position embedding into fp32 `out`, the tables in their dtype.
void EmbeddingForward(float* out, const int32_t* tokens, ConstDtypeSpan wte, ConstDtypeSpan wpe,
                      int batch, int seq_len, int channels);

// CrossEntropyBackward in place on the probabilities (n x vocab), returning
// the logits' gradient in `compute`: fp32 where the probabilities were, or
// (bf16) rounded row by row into the first half of the same memory.
ConstDtypeSpan CrossEntropyBackward(comm::Dtype compute, float* probs_to_dlogits,
                                    const int32_t* targets, int n, int vocab, float loss_scale);

}  // namespace fsdp

#endif  // FSDP_NN_DTYPE_LAYERS_H_
