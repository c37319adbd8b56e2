// File: fsdp/nn/linear.cc
#include "fsdp/nn/linear.h"

#include <algorithm>

#include "base/bf16_convert.h"
#include "base/parallel_for.h"
#include "base/status_macros.h"
#include "fsdp/nn/matmul.h"
#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::kLanes;

// dbias[o] += dout[0, o] + dout[1, o] + ..., added row by row in that order
// for every column, so each ISA variant (16 columns at a time) gives the
// scalar loop's bits, and so does any cut of the columns. `columns` columns
// of rows `stride` floats apart.
FSDP_SIMD_INLINE void AddColumnSumsBody(float* dbias, const float* dout, int64_t n, int64_t columns,
                                        int64_t stride) {
  int64_t o = 0;
  for (; o + kLanes <= columns; o += kLanes) {
    simd::F16 sum = simd::Load(dbias + o);
    for (int64_t i = 0; i < n; ++i) sum = sum + simd::Load(dout + i * stride + o);
    simd::Store(dbias + o, sum);
  }
  for (; o < columns; ++o) {
    float sum = dbias[o];
    for (int64_t i = 0; i < n; ++i) sum += dout[i * stride + o];
    dbias[o] = sum;
  }
}

FSDP_ISA_VARIANTS(void, AddColumnSums,
                  (float* dbias, const float* dout, int64_t n, int64_t columns, int64_t stride),
                  (dbias, dout, n, columns, stride))

void AddColumnSums(KernelIsa isa, float* dbias, const float* dout, int64_t n, int64_t columns,
                   int64_t stride) {
  FSDP_ISA_DISPATCH(isa, AddColumnSums, (dbias, dout, n, columns, stride));
}

// Rows per block of the column sums: ~16 KiB, so a block is read row after
// row from memory and then summed from L1. Each column still adds rows 0, 1,
// ... in order, so the bits do not depend on the blocking. Walking whole
// columns of a (1024 x 1536) gradient instead (a stride of 6 KiB), as this
// did before, took 2.5x as long (kernel_benchmark's "qkv bias sums" row:
// 0.40 ms against 0.16, AMD EPYC Zen 5, 2026-12-05).
int64_t ColumnSumRowsPerBlock(int64_t columns) {
  return std::max<int64_t>(1, 4096 / std::max<int64_t>(columns, 1));
}

// Columns per piece when the sums run on several threads: whole vectors, a
// row's piece 1 KiB. Each piece walks every row in order, so a column's sum
// is the same whichever thread adds it (base/parallel_for.h).
constexpr int64_t kColumnsPerPiece = 256;

// dbias (+)= the column sums of dout (none when dbias is null; written fresh,
// the sums start from 0, as an added sum does into a zeroed buffer), and,
// when dout16 is set, dout16 = bf16(dout), each block rounded while in L1.
void SumColumnsByRowBlocks(float* dbias, uint16_t* dout16, const float* dout, int64_t n,
                           int64_t out_features, GradWrite write) {
  if (dbias != nullptr && write == GradWrite::kOverwrite) {
    std::fill(dbias, dbias + out_features, 0.0f);
  }
  const KernelIsa isa = BestKernelIsa();
  base::ParallelFor(out_features, kColumnsPerPiece, [&](int64_t first, int64_t end) {
    const int64_t columns = end - first;
    const int64_t rows_per_block = ColumnSumRowsPerBlock(columns);
    for (int64_t r = 0; r < n; r += rows_per_block) {
      const int64_t rows = std::min<int64_t>(rows_per_block, n - r);
      const int64_t offset = r * out_features + first;
      if (dbias != nullptr) {
        AddColumnSums(isa, dbias + first, dout + offset, rows, columns, out_features);
      }
      if (dout16 == nullptr) continue;
      if (columns == out_features) {
        base::ToBf16(dout16 + offset, dout + offset, rows * columns);
      } else {
        for (int64_t i = 0; i < rows; ++i) {
          base::ToBf16(dout16 + offset + i * out_features, dout + offset + i * out_features,
                       columns);
        }
      }
    }
  });
}

void BiasGradient(float* dbias, const float* dout, int n, int out_features, GradWrite write) {
  if (dbias == nullptr) return;
  SumColumnsByRowBlocks(dbias, nullptr, dout, n, out_features, write);
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
                    int out_features, GradWrite dinp_write, GradWrite param_write) {
  if (dinp != nullptr) {  // dinp[N, C] (+)= dout[N, OC] @ weight[OC, C]
    Matmul({.m = n, .n = in_features, .k = out_features,
            .a = {dout, NumType::kF32, out_features},
            .b = {weight, NumType::kF32, in_features},
            .c = dinp, .c_type = NumType::kF32, .ldc = in_features,
            .accumulate = dinp_write == GradWrite::kAdd});
  }
  if (dweight != nullptr) {  // dweight[OC, C] (+)= dout^T[OC, N] @ inp[N, C]
    Matmul({.m = out_features, .n = in_features, .k = n,
            .a = {dout, NumType::kF32, out_features, /*transposed=*/true},
            .b = {inp, NumType::kF32, in_features},
            .c = dweight, .c_type = NumType::kF32, .ldc = in_features,
            .accumulate = param_write == GradWrite::kAdd});
  }
  BiasGradient(dbias, dout, n, out_features, param_write);
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
                        GradWrite dinp_write, GradWrite param_write, uint16_t* dweight16) {
  if (dinp != nullptr) {
    Matmul({.m = n, .n = in_features, .k = out_features,
            .a = {dout_bf16, NumType::kBF16, out_features},
            .b = {weight, NumType::kBF16, in_features},
            .c = dinp, .c_type = NumType::kF32, .ldc = in_features,
            .accumulate = dinp_write == GradWrite::kAdd});
  }
  if (dweight16 != nullptr) {
    FSDP_CHECK(param_write == GradWrite::kOverwrite);
    Matmul({.m = out_features, .n = in_features, .k = n,
            .a = {dout_bf16, NumType::kBF16, out_features, /*transposed=*/true},
            .b = {inp, NumType::kBF16, in_features},
            .c = dweight16, .c_type = NumType::kBF16, .ldc = in_features});
  } else if (dweight != nullptr) {
    Matmul({.m = out_features, .n = in_features, .k = n,
            .a = {dout_bf16, NumType::kBF16, out_features, /*transposed=*/true},
            .b = {inp, NumType::kBF16, in_features},
            .c = dweight, .c_type = NumType::kF32, .ldc = in_features,
            .accumulate = param_write == GradWrite::kAdd});
  }
  BiasGradient(dbias, dout, n, out_features, param_write);
}

void BiasGradientWithBf16(float* dbias, uint16_t* dout16, const float* dout, int n,
                          int out_features, GradWrite write) {
  SumColumnsByRowBlocks(dbias, dout16, dout, n, out_features, write);
}

void AddBiasGradientRows(float* dbias, const float* dout_rows, int rows, int out_features) {
  AddColumnSums(BestKernelIsa(), dbias, dout_rows, rows, out_features, out_features);
}

}  // namespace fsdp
