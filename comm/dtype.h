// File: comm/dtype.h
//
// Element types the collectives understand, and bf16 <-> fp32 conversion.
// bf16 is the top 16 bits of an IEEE fp32; conversion rounds to nearest even.
#ifndef COMM_DTYPE_H_
#define COMM_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace comm {

enum class Dtype { kFloat32, kBFloat16 };

inline size_t DtypeSize(Dtype dtype) {
  return dtype == Dtype::kFloat32 ? 4 : 2;
}

inline const char* DtypeName(Dtype dtype) {
  return dtype == Dtype::kFloat32 ? "fp32" : "bf16";
}

// Raw bf16 bits.
using BFloat16 = uint16_t;

inline float BFloat16ToFloat(BFloat16 value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

inline BFloat16 FloatToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<BFloat16>((bits >> 16) | 0x0040u);  // keep NaN a NaN
  }
  // Round to nearest, ties to even, on the 16 bits dropped.
  uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<BFloat16>((bits + rounding_bias) >> 16);
}

}  // namespace comm

#endif  // COMM_DTYPE_H_
