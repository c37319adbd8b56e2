// File: fsdp/nn/bf16_outputs.h
//
// Element-wise layers whose result, under bf16 compute, feeds a bf16 matrix
// product: each computes a block of ~16 KiB in fp32 and rounds it to bf16
// while the block is still in L1, instead of writing the whole fp32 result to
// memory and reading it back for ToBf16 (a full pass over 2-32 MiB per
// layer). The fp32 values are those of the unfused layer and the rounding is
// ToBf16's, so the bits equal the unfused layer followed by ToBf16.
#ifndef FSDP_NN_BF16_OUTPUTS_H_
#define FSDP_NN_BF16_OUTPUTS_H_

#include <cstdint>

#include "fsdp/nn/grad_write.h"

namespace fsdp {

// out16 = bf16(LayerNorm(inp)); mean and rstd saved as LayerNormForward does.
void LayerNormForwardToBf16(uint16_t* out16, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int n, int channels);

// out16 = bf16(gelu(inp)).
void GeluForwardToBf16(uint16_t* out16, const float* inp, int64_t n);

// GELU's backward over `rows` x `width` for the product in front of it:
// dinp16 = bf16(dout * gelu'(inp)) for that product's gradients, and dbias
// (+)= the column sums of the fp32 dout * gelu'(inp), its bias gradient, with
// the bits LinearBackwardBf16 would give them (written fresh under
// kOverwrite). The fp32 gradient exists only one L1 block at a time: it is
// never written to memory and read back for the sums.
void GeluBackwardToBf16WithBiasGradient(float* dbias, uint16_t* dinp16, const float* inp,
                                        const float* dout, int rows, int width, GradWrite write);

// dinp += LayerNorm's input gradient (dweight and dbias added as
// LayerNormBackward adds them) and dinp16 = bf16(dinp), the sum rounded: the
// fp32 sum goes on as the residual gradient, the bf16 copy feeds the product
// that consumes it.
void LayerNormBackwardWithBf16(float* dinp, uint16_t* dinp16, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* weight,
                               const float* mean, const float* rstd, int n, int channels);

}  // namespace fsdp

#endif  // FSDP_NN_BF16_OUTPUTS_H_
