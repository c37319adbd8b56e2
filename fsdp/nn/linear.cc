// File: fsdp/nn/linear.cc
#include "fsdp/nn/linear.h"

#include "fsdp/nn/matmul.h"

namespace fsdp {

void LinearForward(float* out, const float* inp, const float* weight, const float* bias, int n,
                   int in_features, int out_features) {
  // out = inp @ weight^T + bias, the bias added inside the product's epilogue
  // (one pass over out instead of two).
  Matmul({.m = n, .n = out_features, .k = in_features,
          .a = {inp, NumType::kF32, in_features},
          .b = {weight, NumType::kF32, in_features, /*transposed=*/true},
          .c = out, .c_type = NumType::kF32, .ldc = out_features, .bias = bias});
}

void LinearBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                    const float* inp, const float* weight, int n, int in_features,
                    int out_features) {
  if (dinp != nullptr) {  // dinp[N, C] += dout[N, OC] @ weight[OC, C]
    Matmul({.m = n, .n = in_features, .k = out_features,
            .a = {dout, NumType::kF32, out_features},
            .b = {weight, NumType::kF32, in_features},
            .c = dinp, .c_type = NumType::kF32, .ldc = in_features, .accumulate = true});
  }
  if (dweight != nullptr) {  // dweight[OC, C] += dout^T[OC, N] @ inp[N, C]
    Matmul({.m = out_features, .n = in_features, .k = n,
            .a = {dout, NumType::kF32, out_features, /*transposed=*/true},
            .b = {inp, NumType::kF32, in_features},
            .c = dweight, .c_type = NumType::kF32, .ldc = in_features, .accumulate = true});
  }
  if (dbias != nullptr) {
    for (int i = 0; i < n; ++i) {
      const float* row = dout + static_cast<long>(i) * out_features;
      for (int o = 0; o < out_features; ++o) dbias[o] += row[o];
    }
  }
}

}  // namespace fsdp
