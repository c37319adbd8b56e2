// File: tests/comm/reduce_test.cc
// The kernels against scalar references built on comm/dtype.h conversions,
// for every instruction-set variant this CPU runs (base/kernel_isa.h).
#include "comm/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/kernel_isa.h"
#include "base/bfloat16.h"
#include "comm/dtype.h"
#include "gtest/gtest.h"

namespace comm {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

class ReduceTest : public ::testing::TestWithParam<base::KernelIsa> {};

INSTANTIATE_TEST_SUITE_P(EveryIsa, ReduceTest,
                         ::testing::ValuesIn(base::SupportedKernelIsas()),
                         [](const ::testing::TestParamInfo<base::KernelIsa>& info) {
                           switch (info.param) {
                             case base::KernelIsa::kAvx512:
                               return "avx512";
                             case base::KernelIsa::kAvx2:
                               return "avx2";
                             case base::KernelIsa::kGeneric:
                               break;
                           }
                           return "generic";
                         });

TEST_P(ReduceTest, Float32SumAndAverage) {
  const size_t n = 1031;  // not a multiple of any vector width
  auto a = RandomFloats(n, 1), b = RandomFloats(n, 2);
  std::vector<float> out(n), inout = b;
  ReduceSum(GetParam(), Dtype::kFloat32, a.data(), b.data(), out.data(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(Bits(out[i]), Bits(a[i] + b[i]));
  ReduceSumInPlace(GetParam(), Dtype::kFloat32, a.data(), inout.data(), n, 3.0f);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(Bits(inout[i]), Bits((a[i] + b[i]) / 3.0f));
}

TEST_P(ReduceTest, BFloat16AddsInFloatAndRoundsOnce) {
  const size_t n = 1031;
  auto fa = RandomFloats(n, 3), fb = RandomFloats(n, 4);
  std::vector<uint16_t> a(n), b(n), out(n), inout(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = base::ToBf16Bits(fa[i]);
    b[i] = base::ToBf16Bits(fb[i]);
  }
  inout = b;
  ReduceSum(GetParam(), Dtype::kBFloat16, a.data(), b.data(), out.data(), n);
  ReduceSumInPlace(GetParam(), Dtype::kBFloat16, a.data(), inout.data(), n, 8.0f / 3.0f);
  for (size_t i = 0; i < n; ++i) {
    float sum = base::FromBf16Bits(a[i]) + base::FromBf16Bits(b[i]);
    EXPECT_EQ(out[i], base::ToBf16Bits(sum));
    EXPECT_EQ(inout[i], base::ToBf16Bits(sum / (8.0f / 3.0f)));
  }
}

TEST_P(ReduceTest, BFloat16RoundsTiesToEvenAndKeepsNaN) {
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0.
  uint16_t one = base::ToBf16Bits(1.0f);
  uint16_t tiny = base::ToBf16Bits(std::ldexp(1.0f, -8));
  uint16_t out;
  ReduceSum(GetParam(), Dtype::kBFloat16, &one, &tiny, &out, 1);
  EXPECT_EQ(out, one);
  uint16_t nan = base::ToBf16Bits(std::nanf(""));
  ReduceSum(GetParam(), Dtype::kBFloat16, &one, &nan, &out, 1);
  EXPECT_TRUE(std::isnan(base::FromBf16Bits(out)));
}

// Every bf16 pattern as one operand, against partners that make sums with
// ties, carries into the exponent, overflow to infinity, denormals, signed
// zeros, infinities of both signs and NaNs of both signs (quieted: bit 6 of
// the result set, the payload kept), with and without a divisor; compared
// with comm/dtype.h's scalar conversion. The vector bodies see all of them
// (65,536 is a multiple of 16) and the tails the last few.
TEST_P(ReduceTest, BFloat16EveryPatternMatchesTheScalarFormula) {
  const std::vector<uint16_t> partners = {
      0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x3f80, 0xbf80, 0x3b80,
      0x3f81, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x4b00};
  const size_t n = 65536 + 7;
  std::vector<uint16_t> a(n);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<uint16_t>(i);
  for (uint16_t partner : partners) {
    std::vector<uint16_t> b(n, partner);
    for (float divisor : {1.0f, 3.0f}) {
      std::vector<uint16_t> out(n), inout = b;
      ReduceSum(GetParam(), Dtype::kBFloat16, a.data(), b.data(), out.data(), n, divisor);
      ReduceSumInPlace(GetParam(), Dtype::kBFloat16, a.data(), inout.data(), n, divisor);
      size_t mismatches = 0;
      for (size_t i = 0; i < n; ++i) {
        float sum = base::FromBf16Bits(a[i]) + base::FromBf16Bits(b[i]);
        uint16_t expected = base::ToBf16Bits(divisor == 1.0f ? sum : sum / divisor);
        if (std::isnan(base::FromBf16Bits(a[i])) && std::isnan(base::FromBf16Bits(b[i]))) {
          // Two NaNs: the CPU keeps the first operand's payload, so a + b and
          // b + a differ; any quiet NaN is right.
          auto quiet_nan = [](uint16_t x) { return (x & 0x7fc0) == 0x7fc0; };
          if (!quiet_nan(out[i]) || !quiet_nan(inout[i])) ++mismatches;
          continue;
        }
        if (out[i] != expected || inout[i] != expected) {
          if (++mismatches <= 3) {
            ADD_FAILURE() << std::hex << "a=0x" << a[i] << " b=0x" << partner
                          << " divisor=" << divisor << ": got 0x" << out[i] << " / 0x"
                          << inout[i] << ", want 0x" << expected;
          }
        }
      }
      EXPECT_EQ(mismatches, 0u) << "partner 0x" << std::hex << partner;
    }
  }
}


// ReduceSumChain must give exactly what a chain of two-operand hops (of the
// generic loops) gives (that is what makes the direct reduce-scatter
// bit-identical to the ring, and every variant equal),
// for every input count, both dtypes, with and without a divisor, across
// the block boundary (5000 > 2048), and when the output is an input.
TEST_P(ReduceTest, ChainEqualsHopByHop) {
  const size_t count = 5003;
  for (Dtype dtype : {Dtype::kFloat32, Dtype::kBFloat16}) {
    const size_t element = DtypeSize(dtype);
    for (size_t k = 2; k <= 5; ++k) {
      std::vector<std::vector<std::byte>> inputs(k, std::vector<std::byte>(count * element));
      for (size_t j = 0; j < k; ++j) {
        std::vector<float> values = RandomFloats(count, 10 + static_cast<uint32_t>(j));
        for (size_t i = 0; i < count; ++i) {
          if (dtype == Dtype::kFloat32) {
            std::memcpy(&inputs[j][i * 4], &values[i], 4);
          } else {
            uint16_t bits = base::ToBf16Bits(values[i]);
            std::memcpy(&inputs[j][i * 2], &bits, 2);
          }
        }
      }
      for (float divisor : {1.0f, static_cast<float>(k)}) {
        // Hop by hop: partial = in0 + in1, then partial + in2, ...; the
        // divisor on the last hop.
        std::vector<std::byte> expected = inputs[0];
        for (size_t j = 1; j < k; ++j) {
          std::vector<std::byte> next(count * element);
          ReduceSum(base::KernelIsa::kGeneric, dtype, expected.data(), inputs[j].data(),
                    next.data(), count, j + 1 == k ? divisor : 1.0f);
          expected = next;
        }
        std::vector<const void*> pointers;
        for (const auto& input : inputs) pointers.push_back(input.data());
        std::vector<std::byte> out(count * element);
        ReduceSumChain(GetParam(), dtype, pointers.data(), k, out.data(), count, divisor);
        EXPECT_EQ(out, expected) << DtypeName(dtype) << " k=" << k << " divisor=" << divisor;
        // Streamed stores, to an output one element off 16-byte alignment.
        std::vector<std::byte> streamed((count + 1) * element);
        ReduceSumChain(GetParam(), dtype, pointers.data(), k, streamed.data() + element, count,
                       divisor, /*stream_output=*/true);
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), streamed.begin() + element))
            << DtypeName(dtype) << " k=" << k << " streamed";
        // In place: the output is the last input (all-reduce's own chunk).
        std::vector<std::byte> last = inputs[k - 1];
        pointers[k - 1] = last.data();
        ReduceSumChain(GetParam(), dtype, pointers.data(), k, last.data(), count, divisor);
        EXPECT_EQ(last, expected) << DtypeName(dtype) << " k=" << k << " in place";
        // In place on the first input (direct reduce-scatter's own chunk
        // may sit anywhere in the order).
        std::vector<std::byte> first = inputs[0];
        pointers[k - 1] = inputs[k - 1].data();
        pointers[0] = first.data();
        ReduceSumChain(GetParam(), dtype, pointers.data(), k, first.data(), count, divisor);
        EXPECT_EQ(first, expected) << DtypeName(dtype) << " k=" << k << " in place, first";
      }
    }
  }
}

}  // namespace
}  // namespace comm

namespace comm {
namespace {

// int64 sums: exact two's complement, wrapping, in every entry point and
// with the output aliasing each input of a chain.
TEST_P(ReduceTest, Int64SumsWrapExactly) {
  const size_t n = 2048 * 2 + 13;  // more than one chain block, and a tail
  std::vector<std::vector<int64_t>> x(5, std::vector<int64_t>(n));
  std::mt19937_64 rng(17);
  for (auto& v : x) {
    for (int64_t& e : v) e = static_cast<int64_t>(rng());  // full width: sums wrap
  }
  x[0][0] = INT64_MAX;
  x[1][0] = 1;  // INT64_MAX + 1 wraps to INT64_MIN, then + the rest
  auto wrapping_sum = [&](size_t k, size_t i) {
    uint64_t s = 0;
    for (size_t j = 0; j < k; ++j) s += static_cast<uint64_t>(x[j][i]);
    return static_cast<int64_t>(s);
  };
  std::vector<int64_t> out(n), inout = x[1];
  ReduceSum(GetParam(), Dtype::kInt64, x[0].data(), x[1].data(), out.data(), n);
  ReduceSumInPlace(GetParam(), Dtype::kInt64, x[0].data(), inout.data(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], wrapping_sum(2, i)) << i;
    ASSERT_EQ(inout[i], wrapping_sum(2, i)) << i;
  }
  for (size_t k : {size_t{3}, size_t{5}}) {
    for (size_t alias = 0; alias <= k; ++alias) {  // alias == k: a separate output
      for (bool stream : {false, true}) {
        std::vector<std::vector<int64_t>> in(x.begin(), x.begin() + k);
        std::vector<const void*> ptrs;
        for (auto& v : in) ptrs.push_back(v.data());
        std::vector<int64_t> separate(n);
        int64_t* target = alias < k ? in[alias].data() : separate.data();
        ReduceSumChain(GetParam(), Dtype::kInt64, ptrs.data(), k, target, n, 1.0f, stream);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(target[i], wrapping_sum(k, i)) << "k=" << k << " alias=" << alias << " i=" << i;
        }
      }
    }
  }
  EXPECT_EQ(DtypeSize(Dtype::kInt64), 8u);
  EXPECT_STREQ(DtypeName(Dtype::kInt64), "int64");
}

}  // namespace
}  // namespace comm
