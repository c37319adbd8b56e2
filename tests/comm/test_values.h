// File: tests/comm/test_values.h
//
// Typed views of byte buffers and the reference arithmetic the collective
// tests compare against. The references are written from the documented
// semantics (comm/reduce.h rounding rule, comm/ring_schedule.h chunks), not
// by calling the library's kernels.
#ifndef TESTS_COMM_TEST_VALUES_H_
#define TESTS_COMM_TEST_VALUES_H_

#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "base/bfloat16.h"
#include "comm/dtype.h"

namespace comm {

inline void SetElement(Dtype dtype, std::vector<std::byte>& bytes, size_t i, float value) {
  if (dtype == Dtype::kFloat32) {
    std::memcpy(bytes.data() + 4 * i, &value, 4);
  } else {
    uint16_t h = base::ToBf16Bits(value);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
}

inline float GetElement(Dtype dtype, const std::vector<std::byte>& bytes, size_t i) {
  if (dtype == Dtype::kFloat32) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return base::FromBf16Bits(h);
}

// Integer values in [-8, 8]: exact in bf16, and sums of up to 8 of them are
// exact in both dtypes, so any summation order gives the same bits.
inline float ExactValue(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((rank * 7 + i * 3) % 17) - 8);
}

// One hop of a reduction in `dtype`: fp32 add, optional fp32 division, one
// rounding (the documented rule).
inline float ReferenceHop(Dtype dtype, float a, float b, float divisor) {
  float sum = a + b;
  if (divisor != 1.0f) sum = sum / divisor;
  return dtype == Dtype::kFloat32 ? sum : base::FromBf16Bits(base::ToBf16Bits(sum));
}

// Element range [begin, end) of chunk c in the ceil split of count over n.
inline void ReferenceChunk(size_t count, int n, int c, size_t* begin, size_t* end) {
  size_t per = count / n + (count % n != 0 ? 1 : 0);
  *begin = per * c < count ? per * c : count;
  *end = *begin + per < count ? *begin + per : count;
}

inline std::vector<std::byte> Bytes(size_t count, Dtype dtype) {
  return std::vector<std::byte>(count * DtypeSize(dtype));
}

// Random normal values already representable in `dtype`.
inline std::vector<std::byte> RandomBuffer(size_t count, Dtype dtype, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 10.0f);
  std::vector<std::byte> bytes = Bytes(count, dtype);
  for (size_t i = 0; i < count; ++i) SetElement(dtype, bytes, i, dist(gen));
  return bytes;
}

}  // namespace comm

#endif  // TESTS_COMM_TEST_VALUES_H_
