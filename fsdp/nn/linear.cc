// File: fsdp/nn/linear.cc
#include "fsdp/nn/linear.h"

#include "fsdp/nn/matmul.h"

namespace fsdp {
namespace {

// dbias[o] += sum over rows of dout[., o]; nothing when dbias is null.
void AddColumnSums(float* dbias, const float* dout, int n, int out_features) {
  if (dbias == nullptr) return;
  for (int i = 0; i < n; ++i) {
    const float* row = dout + static_cast<long>(i) * out_features;
    for (int o = 0; o < out_features; ++o) dbias[o] += row[o];
  }
}

}  // namespace

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
                    int out_features, InputGradWrite dinp_write) {
  if (dinp != nullptr) {  // dinp[N, C] (+)= dout[N, OC] @ weight[OC, C]
    Matmul({.m = n, .n = in_features, .k = out_features,
            .a = {dout, NumType::kF32, out_features},
            .b = {weight, NumType::kF32, in_features},
            .c = dinp, .c_type = NumType::kF32, .ldc = in_features,
            .accumulate = dinp_write == InputGradWrite::kAdd});
  }
  if (dweight != nullptr) {  // dweight[OC, C] += dout^T[OC, N] @ inp[N, C]
    Matmul({.m = out_features, .n = in_features, .k = n,
            .a = {dout, NumType::kF32, out_features, /*transposed=*/true},
            .b = {inp, NumType::kF32, in_features},
            .c = dweight, .c_type = NumType::kF32, .ldc = in_features, .accumulate = true});
  }
  AddColumnSums(dbias, dout, n, out_features);
}

void LinearForwardBf16(float* out, const uint16_t* inp, const uint16_t* weight, const float* bias,
                       int n, int in_features, int out_features) {
  Matmul({.m = n, .n = out_features, .k = in_features,
          .a = {inp, NumType::kBF16, in_features},
          .b = {weight, NumType::kBF16, in_features, /*transposed=*/true},
          .c = out, .c_type = NumType::kF32, .ldc = out_features, .bias = bias});
}

void LinearForwardBf16Out(uint16_t* out, const uint16_t* inp, const uint16_t* weight,
                          const float* bias, int n, int in_features, int out_features) {
  Matmul({.m = n, .n = out_features, .k = in_features,
          .a = {inp, NumType::kBF16, in_features},
          .b = {weight, NumType::kBF16, in_features, /*transposed=*/true},
          .c = out, .c_type = NumType::kBF16, .ldc = out_features, .bias = bias});
}

void LinearBackwardBf16(float* dinp, float* dweight, float* dbias, const float* dout,
                        const uint16_t* dout_bf16, const uint16_t* inp, const uint16_t* weight,
                        int n, int in_features, int out_features,
                        InputGradWrite dinp_write) {
  if (dinp != nullptr) {
    Matmul({.m = n, .n = in_features, .k = out_features,
            .a = {dout_bf16, NumType::kBF16, out_features},
            .b = {weight, NumType::kBF16, in_features},
            .c = dinp, .c_type = NumType::kF32, .ldc = in_features,
            .accumulate = dinp_write == InputGradWrite::kAdd});
  }
  if (dweight != nullptr) {
    Matmul({.m = out_features, .n = in_features, .k = n,
            .a = {dout_bf16, NumType::kBF16, out_features, /*transposed=*/true},
            .b = {inp, NumType::kBF16, in_features},
            .c = dweight, .c_type = NumType::kF32, .ldc = in_features, .accumulate = true});
  }
  AddColumnSums(dbias, dout, n, out_features);
}

}  // namespace fsdp
