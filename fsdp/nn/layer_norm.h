// File: fsdp/nn/layer_norm.h
//
// Layer normalization over the last dimension C of n rows:
//   out = (inp - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var + 1e-5)
// (biased variance, as GPT-2). Forward saves mean[n] and rstd[n] for backward.
// Backward ADDS into dinp, dweight and dbias. Vectorized (fsdp/nn/simd.h):
// the row statistics are summed in 16 double lanes in a fixed order. The
// overloads taking a KernelIsa run one variant (the CPU must support it); all
// variants give bit-identical results, the plain ones use BestKernelIsa().
#ifndef FSDP_NN_LAYER_NORM_H_
#define FSDP_NN_LAYER_NORM_H_

#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

inline constexpr float kLayerNormEpsilon = 1e-5f;

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp,
                      const float* weight, const float* bias, int n, int channels);

void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, const float* mean,
                       const float* rstd, int n, int channels);

void LayerNormForward(KernelIsa isa, float* out, float* mean, float* rstd, const float* inp,
                      const float* weight, const float* bias, int n, int channels);

void LayerNormBackward(KernelIsa isa, float* dinp, float* dweight, float* dbias,
                       const float* dout, const float* inp, const float* weight,
                       const float* mean, const float* rstd, int n, int channels);

}  // namespace fsdp

#endif  // FSDP_NN_LAYER_NORM_H_
