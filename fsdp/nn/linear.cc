// File: fsdp/nn/linear.cc
#include "fsdp/nn/linear.h"

#include <cblas.h>

namespace fsdp {

void LinearForward(float* out, const float* inp, const float* weight, const float* bias, int n,
                   int in_features, int out_features) {
  // out = inp @ weight^T
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out_features, in_features, 1.0f, inp,
              in_features, weight, in_features, 0.0f, out, out_features);
  if (bias == nullptr) return;
  for (int i = 0; i < n; ++i) {
    float* row = out + static_cast<long>(i) * out_features;
    for (int o = 0; o < out_features; ++o) row[o] += bias[o];
  }
}

void LinearBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                    const float* inp, const float* weight, int n, int in_features,
                    int out_features) {
  if (dinp != nullptr) {  // dinp[N, C] += dout[N, OC] @ weight[OC, C]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_features, out_features, 1.0f,
                dout, out_features, weight, in_features, 1.0f, dinp, in_features);
  }
  if (dweight != nullptr) {  // dweight[OC, C] += dout^T[OC, N] @ inp[N, C]
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_features, in_features, n, 1.0f,
                dout, out_features, inp, in_features, 1.0f, dweight, in_features);
  }
  if (dbias != nullptr) {
    for (int i = 0; i < n; ++i) {
      const float* row = dout + static_cast<long>(i) * out_features;
      for (int o = 0; o < out_features; ++o) dbias[o] += row[o];
    }
  }
}

}  // namespace fsdp
