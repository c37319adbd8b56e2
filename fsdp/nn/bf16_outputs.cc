// File: fsdp/nn/bf16_outputs.cc
#include "fsdp/nn/bf16_outputs.h"

#include <algorithm>
#include <vector>

#include "base/bf16_convert.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/layer_norm.h"
#include "fsdp/nn/linear.h"

namespace fsdp {
namespace {
// 16 KiB of fp32: half of the smallest L1 data cache of the machines here.
constexpr int64_t kBlockFloats = 4096;

// Whole rows per block (a LayerNorm row is one computation), at least one.
int RowsPerBlock(int channels) {
  return static_cast<int>(std::max<int64_t>(1, kBlockFloats / std::max(channels, 1)));
}
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
      base::ToBf16(out16 + int64_t{r} * channels, row.data(), channels);
    }
    return;
  }
  const int rows_per_block = static_cast<int>(kBlockFloats / channels);
  for (int r = 0; r < n; r += rows_per_block) {
    const int rows = std::min(rows_per_block, n - r);
    const int64_t offset = int64_t{r} * channels;
    LayerNormForward(block, mean + r, rstd + r, inp + offset, weight, bias, rows, channels);
    base::ToBf16(out16 + offset, block, int64_t{rows} * channels);
  }
}

void GeluForwardToBf16(uint16_t* out16, const float* inp, int64_t n) {
  float block[kBlockFloats];
  for (int64_t i = 0; i < n; i += kBlockFloats) {
    const int64_t m = std::min(kBlockFloats, n - i);
    GeluForward(block, inp + i, m);
    base::ToBf16(out16 + i, block, m);
  }
}

void GeluBackwardToBf16WithBiasGradient(float* dbias, uint16_t* dinp16, const float* inp,
                                        const float* dout, int rows, int width, GradWrite write) {
  if (write == GradWrite::kOverwrite) std::fill(dbias, dbias + width, 0.0f);
  float block[kBlockFloats];
  // Whole rows per block, or, for a row wider than a block, one row in
  // pieces: either way the block is contiguous and each column still adds its
  // rows in order.
  const int rows_per_block = RowsPerBlock(width);
  const int columns_per_block = static_cast<int>(std::min<int64_t>(width, kBlockFloats));
  for (int r = 0; r < rows; r += rows_per_block) {
    const int block_rows = std::min(rows_per_block, rows - r);
    for (int c = 0; c < width; c += columns_per_block) {
      const int columns = std::min(columns_per_block, width - c);
      const int64_t offset = int64_t{r} * width + c;
      const int64_t m = int64_t{block_rows} * columns;  // block_rows is 1 when columns < width
      GeluBackwardOverwrite(block, inp + offset, dout + offset, m);
      AddBiasGradientRows(dbias + c, block, block_rows, columns);
      base::ToBf16(dinp16 + offset, block, m);
    }
  }
}

void LayerNormBackwardWithBf16(float* dinp, uint16_t* dinp16, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* weight,
                               const float* mean, const float* rstd, int n, int channels) {
  // The weight and bias gradients are added row by row, so blocks of rows add
  // them in the order one call over all rows does.
  const int rows_per_block = RowsPerBlock(channels);
  for (int r = 0; r < n; r += rows_per_block) {
    const int rows = std::min(rows_per_block, n - r);
    const int64_t offset = int64_t{r} * channels;
    LayerNormBackward(dinp + offset, dweight, dbias, dout + offset, inp + offset, weight,
                      mean + r, rstd + r, rows, channels);
    base::ToBf16(dinp16 + offset, dinp + offset, int64_t{rows} * channels);
  }
}

}  // namespace fsdp
