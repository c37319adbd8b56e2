// File: fsdp/nn/bf16_outputs.cc
#include "fsdp/nn/bf16_outputs.h"

#include <algorithm>
#include <vector>

#include "base/bf16_convert.h"
#include "base/parallel_for.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/layer_norm.h"
#include "fsdp/nn/linear.h"

namespace fsdp {
namespace {
// 16 KiB of fp32: half of the smallest L1 data cache of the machines here.
constexpr int64_t kBlockFloats = 4096;

// Blocks per piece of work on the compute threads (base/parallel_for.h).
constexpr int64_t kBlocksPerPiece = 4;
// Columns per piece where a column sum runs over every row.
constexpr int64_t kColumnsPerPiece = 256;

// Whole rows per block (a LayerNorm row is one computation), at least one.
int RowsPerBlock(int channels) {
  return static_cast<int>(std::max<int64_t>(1, kBlockFloats / std::max(channels, 1)));
}
}  // namespace

void LayerNormForwardToBf16(uint16_t* out16, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int n, int channels) {
  // Whole rows per block (a row is normalized as one); a row wider than the
  // block goes one row at a time through a heap buffer. Rows are independent:
  // pieces of rows on the compute threads give the same bits.
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
  base::ParallelFor(n, int64_t{rows_per_block} * kBlocksPerPiece, [&](int64_t first, int64_t end) {
    float block[kBlockFloats];
    for (int r = static_cast<int>(first); r < end; r += rows_per_block) {
      const int rows = std::min(rows_per_block, static_cast<int>(end) - r);
      const int64_t offset = int64_t{r} * channels;
      LayerNormForward(block, mean + r, rstd + r, inp + offset, weight, bias, rows, channels);
      base::ToBf16(out16 + offset, block, int64_t{rows} * channels);
    }
  });
}

void GeluForwardToBf16(uint16_t* out16, const float* inp, int64_t n) {
  base::ParallelFor(n, kBlockFloats * kBlocksPerPiece, [&](int64_t first, int64_t end) {
    float block[kBlockFloats];
    for (int64_t i = first; i < end; i += kBlockFloats) {
      const int64_t m = std::min(kBlockFloats, end - i);
      GeluForward(block, inp + i, m);
      base::ToBf16(out16 + i, block, m);
    }
  });
}

void GeluBackwardToBf16WithBiasGradient(float* dbias, uint16_t* dinp16, const float* inp,
                                        const float* dout, int rows, int width, GradWrite write) {
  if (write == GradWrite::kOverwrite) std::fill(dbias, dbias + width, 0.0f);
  // Pieces of columns on the compute threads, each walking every row in
  // order: a column's bias gradient adds its rows in the same order whichever
  // thread does it. Within a piece, blocks of whole piece rows, or, for a
  // piece wider than a block, one row in parts.
  base::ParallelFor(width, kColumnsPerPiece, [&](int64_t first, int64_t end) {
    float block[kBlockFloats];
    const int piece_width = static_cast<int>(end - first);
    const int rows_per_block = RowsPerBlock(piece_width);
    const int columns_per_block = std::min(piece_width, static_cast<int>(kBlockFloats));
    for (int r = 0; r < rows; r += rows_per_block) {
      const int block_rows = std::min(rows_per_block, rows - r);
      for (int c = static_cast<int>(first); c < end; c += columns_per_block) {
        const int columns = std::min(columns_per_block, static_cast<int>(end) - c);
        for (int i = 0; i < block_rows; ++i) {
          const int64_t offset = int64_t{r + i} * width + c;
          GeluBackwardOverwrite(block + int64_t{i} * columns, inp + offset, dout + offset, columns);
          base::ToBf16(dinp16 + offset, block + int64_t{i} * columns, columns);
        }
        AddBiasGradientRows(dbias + c, block, block_rows, columns);
      }
    }
  });
}

void LayerNormBackwardWithBf16(float* dinp, uint16_t* dinp16, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* weight,
                               const float* mean, const float* rstd, int n, int channels) {
  // The weight and bias gradients are added row by row, so blocks of rows add
  // them in the order one call over all rows does.
  if (base::ParallelThreads() > 1) {
    // On several threads: the backward over all rows (cut by rows, then by
    // columns, inside), then the rounding; the same values.
    LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, channels);
    base::ToBf16(dinp16, dinp, int64_t{n} * channels);
    return;
  }
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
