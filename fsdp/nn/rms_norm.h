// File: fsdp/nn/rms_norm.h
//
// Root-mean-square normalization over the last dimension C of n rows, as
// Llama uses it (weight only, no bias, no mean subtracted):
//   out = inp * rstd * weight,  rstd = 1 / sqrt(mean_c(inp^2) + eps)
// Forward saves rstd[n] for backward. The output goes to `out` in its dtype:
// fp32, or bf16 rounded as it is written (only a product reads it then).
// Row sums run in 16 double lanes reduced by a fixed tree, in 16 float
// lanes otherwise, so the bits are fixed for a shape, whatever the
// instruction set (the KernelIsa overloads pick one; tests compare them).
//
//   RmsNormForward(rms.span(), rstd, x, weight, n, C, config.norm_eps);
#ifndef FSDP_NN_RMS_NORM_H_
#define FSDP_NN_RMS_NORM_H_

#include "fsdp/nn/dtype_buffer.h"
#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

void RmsNormForward(DtypeSpan out, float* rstd, const float* inp, const float* weight, int n,
                    int channels, float eps);
void RmsNormForward(KernelIsa isa, DtypeSpan out, float* rstd, const float* inp,
                    const float* weight, int n, int channels, float eps);

// With g = dout, per row: dinp += rstd (g w) - rstd^3 inp / C * sum_c(g w inp),
// dweight += g inp rstd (rows in order). When `dinp_copy` is bf16 it also
// receives bf16(dinp), the sum rounded (the compute copy of
// fsdp/nn/dtype_layers.h); an fp32 `dinp_copy` is dinp itself: nothing more
// to write.
void RmsNormBackward(float* dinp, DtypeSpan dinp_copy, float* dweight, const float* dout,
                     const float* inp, const float* weight, const float* rstd, int n,
                     int channels);
void RmsNormBackward(KernelIsa isa, float* dinp, DtypeSpan dinp_copy, float* dweight,
                     const float* dout, const float* inp, const float* weight, const float* rstd,
                     int n, int channels);

}  // namespace fsdp

#endif  // FSDP_NN_RMS_NORM_H_
