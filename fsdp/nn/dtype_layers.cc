// File: fsdp/nn/dtype_layers.cc
//
// Each function: the bf16 kernel when its operands are bf16, else the fp32
// one, with the operands' pointers. as<T>() checks every operand's dtype, so
// a mismatch (a bf16 input to an fp32 product) stops at the call.
#include "fsdp/nn/dtype_layers.h"

#include "base/status_macros.h"
#include "fsdp/nn/attention.h"
#include "base/bf16_convert.h"
#include "fsdp/nn/bf16_outputs.h"
#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/embedding.h"
#include "fsdp/nn/flash_attention.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/layer_norm.h"
#include "fsdp/nn/linear.h"

namespace fsdp {
namespace {

bool IsBf16(ConstDtypeSpan s) { return s.dtype() == comm::Dtype::kBFloat16; }
template <typename T>
T* Ptr(DtypeSpan s) {
  return s.as<T>().data();
}
template <typename T>
const T* Ptr(ConstDtypeSpan s) {
  return s.as<T>().data();
}

}  // namespace

void LayerNormForward(DtypeSpan out, float* mean, float* rstd, const float* inp,
                      const float* weight, const float* bias, int n, int channels) {
  if (IsBf16(out)) {
    LayerNormForwardToBf16(Ptr<uint16_t>(out), mean, rstd, inp, weight, bias, n, channels);
  } else {
    LayerNormForward(Ptr<float>(out), mean, rstd, inp, weight, bias, n, channels);
  }
}

void LayerNormBackward(float* dinp, DtypeSpan dinp_copy, float* dweight, float* dbias,
                       const float* dout, const float* inp, const float* weight,
                       const float* mean, const float* rstd, int n, int channels) {
  if (IsBf16(dinp_copy)) {
    LayerNormBackwardWithBf16(dinp, Ptr<uint16_t>(dinp_copy), dweight, dbias, dout, inp, weight,
                              mean, rstd, n, channels);
  } else {
    LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, channels);
  }
}

void LinearForward(DtypeSpan out, ConstDtypeSpan inp, ConstDtypeSpan weight, const float* bias,
                   int n, int in_features, int out_features) {
  if (!IsBf16(inp)) {
    LinearForward(Ptr<float>(out), Ptr<float>(inp), Ptr<float>(weight), bias, n, in_features,
                  out_features);
  } else if (IsBf16(out)) {
    LinearForwardBf16Out(Ptr<uint16_t>(out), Ptr<uint16_t>(inp), Ptr<uint16_t>(weight), bias, n,
                         in_features, out_features);
  } else {
    LinearForwardBf16(Ptr<float>(out), Ptr<uint16_t>(inp), Ptr<uint16_t>(weight), bias, n,
                      in_features, out_features);
  }
}

void LinearForwardInCalls(DtypeSpan out, ConstDtypeSpan inp, ConstDtypeSpan weight,
                          const float* bias, int n, int calls, int in_features, int out_features) {
  const int rows = n / calls;
  for (int c = 0; c < calls; ++c) {
    const int64_t row0 = int64_t{c} * rows;
    LinearForward(out.subspan(row0 * out_features, int64_t{rows} * out_features),
                  inp.subspan(row0 * in_features, int64_t{rows} * in_features), weight, bias, rows,
                  in_features, out_features);
  }
}

void LinearBackward(float* dinp, DtypeSpan dweight, float* dbias, const float* dout,
                    ConstDtypeSpan dout_copy, ConstDtypeSpan inp, ConstDtypeSpan weight, int n,
                    int in_features, int out_features, GradWrite dinp_write,
                    GradWrite param_write) {
  if (!IsBf16(inp)) {
    const float* dout32 = Ptr<float>(dout_copy);
    FSDP_CHECK(dbias == nullptr || dout == dout32);
    LinearBackward(dinp, Ptr<float>(dweight), dbias, dout32, Ptr<float>(inp), Ptr<float>(weight),
                   n, in_features, out_features, dinp_write, param_write);
    return;
  }
  const bool bf16_grads = IsBf16(dweight);
  LinearBackwardBf16(dinp, bf16_grads ? nullptr : Ptr<float>(dweight), dbias, dout,
                     Ptr<uint16_t>(dout_copy), Ptr<uint16_t>(inp), Ptr<uint16_t>(weight), n,
                     in_features, out_features, dinp_write, param_write,
                     bf16_grads ? Ptr<uint16_t>(dweight) : nullptr);
}

ConstDtypeSpan BiasGradientAndComputeCopy(float* dbias, DtypeSpan copy_scratch, const float* dout,
                                          int rows, int width, GradWrite write) {
  const int64_t numel = int64_t{rows} * width;
  if (IsBf16(copy_scratch)) {
    DtypeSpan copy = copy_scratch.subspan(0, numel);
    BiasGradientWithBf16(dbias, Ptr<uint16_t>(copy), dout, rows, width, write);
    return copy;
  }
  BiasGradientWithBf16(dbias, /*dout16=*/nullptr, dout, rows, width, write);
  return Fp32(dout, numel);
}

ConstDtypeSpan ComputeCopy(DtypeSpan copy_scratch, const float* src, int64_t n) {
  if (!IsBf16(copy_scratch)) return Fp32(src, n);
  DtypeSpan copy = copy_scratch.subspan(0, n);
  base::ToBf16(Ptr<uint16_t>(copy), src, n);
  return copy;
}

void GeluForward(DtypeSpan out, const float* inp, int64_t n) {
  if (IsBf16(out)) {
    GeluForwardToBf16(Ptr<uint16_t>(out), inp, n);
  } else {
    GeluForward(Ptr<float>(out), inp, n);
  }
}

void GeluBackwardWithBiasGradient(DtypeSpan dinp, float* dbias, const float* inp,
                                  const float* dout, int rows, int width, GradWrite write) {
  if (IsBf16(dinp)) {
    GeluBackwardToBf16WithBiasGradient(dbias, Ptr<uint16_t>(dinp), inp, dout, rows, width, write);
    return;
  }
  // The fp32 gradient written whole, then its column sums: the bits the
  // Linear's backward gives its bias from the same values.
  GeluBackwardOverwrite(Ptr<float>(dinp), inp, dout, int64_t{rows} * width);
  BiasGradientWithBf16(dbias, /*dout16=*/nullptr, Ptr<float>(dinp), rows, width, write);
}

void AttentionForward(DtypeSpan out, DtypeSpan probs, float* scratch, uint16_t* scratch_bf16,
                      ConstDtypeSpan qkv, int batch, int seq_len, int channels, int heads,
                      int scratch_slots) {
  if (IsBf16(qkv)) {
    AttentionForwardBf16(Ptr<uint16_t>(out), Ptr<uint16_t>(probs), scratch, scratch_bf16,
                         Ptr<uint16_t>(qkv), batch, seq_len, channels, heads, scratch_slots);
  } else {
    AttentionForward(Ptr<float>(out), Ptr<float>(probs), Ptr<float>(qkv), batch, seq_len,
                     channels, heads);
  }
}

void AttentionBackward(float* dqkv, float* scratch, uint16_t* scratch_bf16, ConstDtypeSpan dout,
                       ConstDtypeSpan qkv, ConstDtypeSpan probs, int batch, int seq_len,
                       int channels, int heads, int scratch_slots) {
  if (IsBf16(qkv)) {
    AttentionBackwardBf16(dqkv, scratch, scratch_bf16, Ptr<uint16_t>(dout), Ptr<uint16_t>(qkv),
                          Ptr<uint16_t>(probs), batch, seq_len, channels, heads, scratch_slots);
  } else {
    AttentionBackward(dqkv, scratch, Ptr<float>(dout), Ptr<float>(qkv), Ptr<float>(probs), batch,
                      seq_len, channels, heads, scratch_slots);
  }
}

void FlashAttentionForward(DtypeSpan out, float* lse, float* scratch, uint16_t* scratch_bf16,
                           ConstDtypeSpan qkv, int batch, int seq_len, int channels, int heads,
                           int scratch_slots) {
  if (IsBf16(qkv)) {
    FlashAttentionForwardBf16(Ptr<uint16_t>(out), lse, scratch, scratch_bf16, Ptr<uint16_t>(qkv),
                              batch, seq_len, channels, heads, scratch_slots);
  } else {
    FlashAttentionForward(Ptr<float>(out), lse, scratch, Ptr<float>(qkv), batch, seq_len, channels,
                          heads, scratch_slots);
  }
}

void FlashAttentionBackward(float* dqkv, float* scratch, uint16_t* scratch_bf16,
                            ConstDtypeSpan dout, ConstDtypeSpan qkv, ConstDtypeSpan out,
                            const float* lse, int batch, int seq_len, int channels, int heads,
                            int scratch_slots) {
  if (IsBf16(qkv)) {
    FlashAttentionBackwardBf16(dqkv, scratch, scratch_bf16, Ptr<uint16_t>(dout), Ptr<uint16_t>(qkv),
                               Ptr<uint16_t>(out), lse, batch, seq_len, channels, heads,
                               scratch_slots);
  } else {
    FlashAttentionBackward(dqkv, scratch, Ptr<float>(dout), Ptr<float>(qkv), Ptr<float>(out), lse,
                           batch, seq_len, channels, heads, scratch_slots);
  }
}

void EmbeddingForward(float* out, const int32_t* tokens, ConstDtypeSpan wte, ConstDtypeSpan wpe,
                      int batch, int seq_len, int channels) {
  if (IsBf16(wte)) {
    EmbeddingForwardBf16(out, tokens, Ptr<uint16_t>(wte), Ptr<uint16_t>(wpe), batch, seq_len,
                         channels);
  } else {
    EmbeddingForward(out, tokens, Ptr<float>(wte), Ptr<float>(wpe), batch, seq_len, channels);
  }
}

ConstDtypeSpan CrossEntropyBackward(comm::Dtype compute, float* probs_to_dlogits,
                                    const int32_t* targets, int n, int vocab, float loss_scale) {
  const int64_t numel = int64_t{n} * vocab;
  if (compute == comm::Dtype::kBFloat16) {
    CrossEntropyBackwardToBf16(probs_to_dlogits, targets, n, vocab, loss_scale);
    return ConstDtypeSpan::Of(comm::Dtype::kBFloat16,
                              reinterpret_cast<const std::byte*>(probs_to_dlogits), numel);
  }
  CrossEntropyBackward(probs_to_dlogits, targets, n, vocab, loss_scale);
  return Fp32(probs_to_dlogits, numel);
}

}  // namespace fsdp
