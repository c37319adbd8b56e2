// File: fsdp/nn/dense_rows.h
//
// Copies between a block of rows at a row stride (one head inside the
// (B, T, 3C) qkv rows) and a dense block, for the bf16 attentions' dense
// operands ([Note: contiguous bf16 heads] in fsdp/nn/attention.cc).
#ifndef FSDP_NN_DENSE_ROWS_H_
#define FSDP_NN_DENSE_ROWS_H_

#include <cstdint>
#include <cstring>

#include "base/bf16_convert.h"
#include "fsdp/nn/kernel_isa.h"
#include "fsdp/nn/residual.h"

namespace fsdp {

// [Note: prefetching strided rows] A head's rows sit a whole (B, T, 3C) or
// (B, T, C) row apart (3 KB at C 512 in bf16, 6 KB in fp32): nearly every row
// starts a new 4 KB page, where the hardware's stream prefetchers stop, and
// in the backward the rows were written a whole forward ago (out of the
// caches). Copied one by one, each row waited for memory: the copies of bf16
// attention's backward took 3.7% of a bf16 step at 1 rank x 2 threads
// (2026-12-08). Each copy asks for the row kPrefetchRowsAhead ahead first.
constexpr int kPrefetchRowsAhead = 8;

// kWrite: the row is about to be written (ScatterRows), else read.
template <bool kWrite, typename T>
inline void PrefetchRow(const T* row, int cols) {
  const char* bytes = reinterpret_cast<const char*>(row);
  for (long b = 0; b < static_cast<long>(sizeof(T)) * cols; b += 64) {
    __builtin_prefetch(bytes + b, kWrite ? 1 : 0);
  }
}

// rows x cols at a row stride of `ld` into the dense `dense`.
inline void GatherRows(uint16_t* dense, const uint16_t* strided, int rows, int cols, int ld) {
  for (int r = 0; r < rows; ++r) {
    if (r + kPrefetchRowsAhead < rows) {
      PrefetchRow</*kWrite=*/false>(strided + static_cast<long>(r + kPrefetchRowsAhead) * ld, cols);
    }
    std::memcpy(dense + static_cast<long>(r) * cols, strided + static_cast<long>(r) * ld,
                sizeof(uint16_t) * cols);
  }
}

// The dense rows x cols block into rows at a stride of `ld`.
inline void ScatterRows(float* strided, int ld, const float* dense, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    if (r + kPrefetchRowsAhead < rows) {
      PrefetchRow</*kWrite=*/true>(strided + static_cast<long>(r + kPrefetchRowsAhead) * ld, cols);
    }
    std::memcpy(strided + static_cast<long>(r) * ld, dense + static_cast<long>(r) * cols,
                sizeof(float) * cols);
  }
}

// The dense rows x cols block, rounded to bf16, into rows at a stride of `ld`.
inline void ScatterRowsToBf16(uint16_t* strided, int ld, const float* dense, int rows,
                              int cols) {
  for (int r = 0; r < rows; ++r) {
    base::ToBf16(strided + static_cast<long>(r) * ld, dense + static_cast<long>(r) * cols, cols);
  }
}

// strided += dense, row by row (the vectorized residual add).
inline void AddRows(KernelIsa isa, float* strided, int ld, const float* dense, int rows,
                    int cols) {
  for (int r = 0; r < rows; ++r) {
    float* row = strided + static_cast<long>(r) * ld;
    ResidualForward(isa, row, row, dense + static_cast<long>(r) * cols, cols);
  }
}

}  // namespace fsdp

#endif  // FSDP_NN_DENSE_ROWS_H_
