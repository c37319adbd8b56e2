// File: fsdp/nn/bf16_outputs.cc
#include "fsdp/nn/bf16_outputs.h"

#include <algorithm>
#include <vector>

#include "fsdp/nn/bf16_convert.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/layer_norm.h"

namespace fsdp {
namespace {
// 16 KiB of fp32: half of the smallest L1 data cache of the machines here.
constexpr int64_t kBlockFloats = 4096;
}  // namespace

void LayerNormForwardToBf16(uint16_t* out16, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int n, int channels) {
  float block[kBlockFloats];
  // Whole rows per block (a row is normalized as one); a row wider than the
  // block goes one row at a time through a heap buffer.
  if (channels > kBlockFloats) {
    std::vector<float> row(channels);
    for (int r = 0; r < n; ++r) {
      LayerNormForward(row.data(), mean + r, rstd + r, inp + int64_t{r} * channels, weight, bias,
                       1, channels);
      ToBf16(out16 + int64_t{r} * channels, row.data(), channels);
    }
    return;
  }
  const int rows_per_block = static_cast<int>(kBlockFloats / channels);
  for (int r = 0; r < n; r += rows_per_block) {
    const int rows = std::min(rows_per_block, n - r);
    const int64_t offset = int64_t{r} * channels;
    LayerNormForward(block, mean + r, rstd + r, inp + offset, weight, bias, rows, channels);
    ToBf16(out16 + offset, block, int64_t{rows} * channels);
  }
}

void GeluForwardToBf16(uint16_t* out16, const float* inp, int64_t n) {
  float block[kBlockFloats];
  for (int64_t i = 0; i < n; i += kBlockFloats) {
    const int64_t m = std::min(kBlockFloats, n - i);
    GeluForward(block, inp + i, m);
    ToBf16(out16 + i, block, m);
  }
}

void GeluBackwardWithBf16(float* dinp, uint16_t* dinp16, const float* inp, const float* dout,
                          int64_t n) {
  for (int64_t i = 0; i < n; i += kBlockFloats) {
    const int64_t m = std::min(kBlockFloats, n - i);
    GeluBackwardOverwrite(dinp + i, inp + i, dout + i, m);
    ToBf16(dinp16 + i, dinp + i, m);
  }
}

}  // namespace fsdp
