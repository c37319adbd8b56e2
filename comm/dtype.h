// File: comm/dtype.h
//
// Element types the collectives understand. bf16 values travel as their bits
// (uint16_t); the value type and its conversions are base/bfloat16.h and
// base/bf16_convert.h. int64 is for exact sums: integer addition is
// associative, so a sum of int64 contributions has the same bits for any
// group size, algorithm and order (two's complement, wrapping; the caller
// keeps its sums in range). It sums only (ReduceOp::kSum).
#ifndef COMM_DTYPE_H_
#define COMM_DTYPE_H_

#include <cstddef>

namespace comm {

enum class Dtype { kFloat32, kBFloat16, kInt64 };

inline size_t DtypeSize(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32:
      return 4;
    case Dtype::kBFloat16:
      return 2;
    case Dtype::kInt64:
      return 8;
  }
  return 0;
}

inline const char* DtypeName(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32:
      return "fp32";
    case Dtype::kBFloat16:
      return "bf16";
    case Dtype::kInt64:
      return "int64";
  }
  return "unknown";
}

}  // namespace comm

#endif  // COMM_DTYPE_H_
