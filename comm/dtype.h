// File: comm/dtype.h
//
// Element types the collectives understand. bf16 values travel as their bits
// (uint16_t); the value type and its conversions are base/bfloat16.h and
// base/bf16_convert.h.
#ifndef COMM_DTYPE_H_
#define COMM_DTYPE_H_

#include <cstddef>

namespace comm {

enum class Dtype { kFloat32, kBFloat16 };

inline size_t DtypeSize(Dtype dtype) {
  return dtype == Dtype::kFloat32 ? 4 : 2;
}

inline const char* DtypeName(Dtype dtype) {
  return dtype == Dtype::kFloat32 ? "fp32" : "bf16";
}

}  // namespace comm

#endif  // COMM_DTYPE_H_
