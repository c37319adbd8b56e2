// File: tests/fsdp/nn/matmul_test.cc
//
// Matmul against a double-precision reference on both backends, for every
// operand orientation, strided operands, bias, alpha, accumulation, and bf16
// operands and results.
#include "fsdp/nn/matmul.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/bfloat16.h"
#include "comm/dtype.h"
#include "base/bf16_convert.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

struct Case {
  MatmulBackend backend;
  NumType in_type;
  NumType out_type;
  bool a_transposed, b_transposed, bias, accumulate;
  float alpha;
};

std::string Name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(MatmulBackendName(c.backend)) +
         (c.in_type == NumType::kF32 ? "_f32in" : "_bf16in") +
         (c.out_type == NumType::kF32 ? "_f32out" : "_bf16out") + (c.a_transposed ? "_aT" : "") +
         (c.b_transposed ? "_bT" : "") + (c.bias ? "_bias" : "") + (c.accumulate ? "_acc" : "") +
         (c.alpha != 1.0f ? "_alpha" : "");
}

class MatmulTest : public testing::TestWithParam<Case> {};

// A stored rows x cols matrix with leading dimension ld >= cols, values
// already representable in bf16 so both input types see the same numbers.
struct Stored {
  int64_t rows, cols, ld;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  Stored(int64_t r, int64_t c, int64_t pad, std::mt19937& rng)
      : rows(r), cols(c), ld(c + pad), f32(r * (c + pad)), bf16(r * (c + pad)) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (size_t i = 0; i < f32.size(); ++i) {
      bf16[i] = base::ToBf16Bits(dist(rng));
      f32[i] = base::FromBf16Bits(bf16[i]);
    }
  }
  double at(int64_t r, int64_t c) const { return f32[r * ld + c]; }
  const void* data(NumType t) const {
    return t == NumType::kF32 ? static_cast<const void*>(f32.data()) : bf16.data();
  }
};

TEST_P(MatmulTest, MatchesDoubleReference) {
  const Case& c = GetParam();
  SetMatmulBackend(c.backend);
  const int64_t m = 37, n = 29, k = 45;  // not multiples of any vector width
  std::mt19937 rng(7);
  // Stored shapes follow the orientation; each has 3 elements of row padding.
  Stored a(c.a_transposed ? k : m, c.a_transposed ? m : k, 3, rng);
  Stored b(c.b_transposed ? n : k, c.b_transposed ? k : n, 3, rng);
  Stored c0(m, n, 5, rng);  // initial C, for accumulation
  std::vector<float> bias(n);
  for (int64_t j = 0; j < n; ++j) bias[j] = 0.25f * static_cast<float>(j % 7) - 0.5f;

  std::vector<float> c_f32 = c0.f32;
  std::vector<uint16_t> c_bf16 = c0.bf16;
  MatmulArgs x;
  x.m = m, x.n = n, x.k = k;
  x.a = {a.data(c.in_type), c.in_type, a.ld, c.a_transposed};
  x.b = {b.data(c.in_type), c.in_type, b.ld, c.b_transposed};
  x.c = c.out_type == NumType::kF32 ? static_cast<void*>(c_f32.data()) : c_bf16.data();
  x.c_type = c.out_type;
  x.ldc = c0.ld;
  x.bias = c.bias ? bias.data() : nullptr;
  x.alpha = c.alpha;
  x.accumulate = c.accumulate;
  const MatmulStats before = CurrentMatmulStats();
  Matmul(x);
  const MatmulStats after = CurrentMatmulStats();
  EXPECT_EQ(after.calls, before.calls + 1);
  EXPECT_DOUBLE_EQ(after.flops - before.flops, 2.0 * m * n * k);

  // fp32 accumulation of k products of values in [-1, 1]: rounding well
  // under 1e-4 in fp32; a bf16 result adds its own rounding (2^-8 relative).
  const double tolerance_rel = c.out_type == NumType::kF32 ? 1e-5 : 1.0 / 128;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) {
        want += (c.a_transposed ? a.at(p, i) : a.at(i, p)) *
                (c.b_transposed ? b.at(j, p) : b.at(p, j));
      }
      want *= c.alpha;
      if (c.bias) want += bias[j];
      if (c.accumulate) want += c0.at(i, j);
      const double got = c.out_type == NumType::kF32
                             ? c_f32[i * c0.ld + j]
                             : base::FromBf16Bits(c_bf16[i * c0.ld + j]);
      ASSERT_NEAR(got, want, tolerance_rel * (std::fabs(want) + 1.0)) << i << "," << j;
    }
    // The padding between rows is never written.
    for (int64_t j = n; j < c0.ld; ++j) {
      if (c.out_type == NumType::kF32) {
        ASSERT_EQ(c_f32[i * c0.ld + j], c0.f32[i * c0.ld + j]);
      } else {
        ASSERT_EQ(c_bf16[i * c0.ld + j], c0.bf16[i * c0.ld + j]);
      }
    }
  }
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (MatmulBackend backend : {MatmulBackend::kOneDnn, MatmulBackend::kOpenBlas}) {
    for (NumType in : {NumType::kF32, NumType::kBF16}) {
      for (NumType out : {NumType::kF32, NumType::kBF16}) {
        for (int orient = 0; orient < 4; ++orient) {
          cases.push_back({backend, in, out, (orient & 1) != 0, (orient & 2) != 0, false, false,
                           1.0f});
        }
        cases.push_back({backend, in, out, false, true, true, false, 1.0f});   // Linear forward
        cases.push_back({backend, in, out, false, false, false, true, 1.0f});  // dinp +=
        cases.push_back({backend, in, out, true, false, false, true, 1.0f});   // dweight +=
        cases.push_back({backend, in, out, false, true, false, false, 0.125f});  // q k^T scale
        cases.push_back({backend, in, out, false, true, true, true, 1.0f});
        cases.push_back({backend, in, out, true, false, false, true, 0.125f});  // dk += s dS^T q
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, MatmulTest, testing::ValuesIn(AllCases()), Name);

// A bf16 result is the fp32 result rounded (ToBf16's bits), which the
// layers rely on when a product writes bf16 directly (the weight gradients of
// the 2-byte gradient layout, fsdp/nn/linear.h). Rows of A scaled down so
// that results reach fp32's denormal range.
TEST(MatmulBf16Output, IsTheFp32ResultRounded) {
  for (MatmulBackend backend : {MatmulBackend::kOneDnn, MatmulBackend::kOpenBlas}) {
    SetMatmulBackend(backend);
    for (const bool a_transposed : {false, true}) {
      std::mt19937 rng(5);
      const int m = 48, n = 40, k = 64;
      Stored a(a_transposed ? k : m, a_transposed ? m : k, 0, rng), b(k, n, 0, rng);
      // Row i of the logical A scaled by 2^(-3 i): results from ~1 down to ~2^-141.
      std::vector<uint16_t> a16(a.f32.size()), b16(b.f32.size());
      for (int i = 0; i < m; ++i) {
        for (int p = 0; p < k; ++p) {
          float& v = a_transposed ? a.f32[p * m + i] : a.f32[i * k + p];
          v = std::ldexp(v, -3 * i);
        }
      }
      base::ToBf16(a16.data(), a.f32.data(), static_cast<int64_t>(a16.size()));
      base::ToBf16(b16.data(), b.f32.data(), static_cast<int64_t>(b16.size()));
      std::vector<float> c32(m * n);
      std::vector<uint16_t> c16(m * n), rounded(m * n);
      const MatrixArg a_arg{a16.data(), NumType::kBF16, a_transposed ? m : k, a_transposed};
      const MatrixArg b_arg{b16.data(), NumType::kBF16, n};
      Matmul({.m = m, .n = n, .k = k, .a = a_arg, .b = b_arg, .c = c32.data(), .ldc = n});
      Matmul({.m = m, .n = n, .k = k, .a = a_arg, .b = b_arg, .c = c16.data(),
              .c_type = NumType::kBF16, .ldc = n});
      base::ToBf16(rounded.data(), c32.data(), m * n);
      int denormals = 0, differ = 0;
      for (int i = 0; i < m * n; ++i) {
        if (c32[i] != 0.0f && std::fabs(c32[i]) < std::numeric_limits<float>::min()) ++denormals;
        if (c16[i] != rounded[i]) {
          if (++differ <= 5) {
            ADD_FAILURE() << MatmulBackendName(backend) << (a_transposed ? " A^T" : " A")
                          << " element " << i << ": fp32 " << c32[i] << " rounded 0x" << std::hex
                          << rounded[i] << ", bf16 output 0x" << c16[i] << std::dec;
          }
        }
      }
      // oneDNN's bf16 dot products (vdpbf16ps, AMX) read and write denormals
      // as zero, so its fp32 results have none; OpenBLAS's do.
      if (backend == MatmulBackend::kOpenBlas) {
        EXPECT_GT(denormals, 0);
      }
      EXPECT_EQ(differ, 0) << MatmulBackendName(backend);
    }
  }
}

// The same product twice gives the same bits (the primitive is cached).
TEST(MatmulDeterminism, RepeatedCallsAreBitIdentical) {
  for (MatmulBackend backend : {MatmulBackend::kOneDnn, MatmulBackend::kOpenBlas}) {
    SetMatmulBackend(backend);
    std::mt19937 rng(3);
    Stored a(64, 96, 0, rng), b(80, 96, 0, rng);
    std::vector<float> c1(64 * 80), c2(64 * 80);
    for (std::vector<float>* c : {&c1, &c2}) {
      Matmul({.m = 64, .n = 80, .k = 96, .a = {a.f32.data(), NumType::kF32, 96},
              .b = {b.f32.data(), NumType::kF32, 96, true}, .c = c->data(), .ldc = 80});
    }
    EXPECT_EQ(c1, c2) << MatmulBackendName(backend);
  }
}

TEST(MatmulBackendNames, ParseRoundTripsAndRejectsUnknown) {
  for (MatmulBackend b : {MatmulBackend::kOneDnn, MatmulBackend::kOpenBlas}) {
    ASSERT_TRUE(ParseMatmulBackend(MatmulBackendName(b)).ok());
    EXPECT_EQ(*ParseMatmulBackend(MatmulBackendName(b)), b);
  }
  const absl::StatusOr<MatmulBackend> bad = ParseMatmulBackend("mkl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("onednn"), std::string::npos);
}

TEST(MatmulBackendNames, TheFlagTakesFourChoicesAndExplainsThem) {
  for (const char* name : {"default", "auto", "onednn", "openblas"}) {
    const absl::StatusOr<MatmulBackendChoice> choice = ParseMatmulBackendChoice(name);
    EXPECT_TRUE(choice.ok()) << name;
    EXPECT_STREQ(MatmulBackendChoiceName(choice.value_or(MatmulBackendChoice::kDefault)), name);
  }
  EXPECT_EQ(*ParseMatmulBackendChoice("default"), MatmulBackendChoice::kDefault);
  EXPECT_EQ(*ParseMatmulBackendChoice("onednn"), MatmulBackendChoice::kOneDnn);
  EXPECT_EQ(*ParseMatmulBackendChoice("openblas"), MatmulBackendChoice::kOpenBlas);
  EXPECT_EQ(*ParseMatmulBackendChoice("auto"), MatmulBackendChoice::kAuto);
  for (const char* wrong : {"fastest", "", "OneDNN", "default "}) {
    const absl::Status bad = ParseMatmulBackendChoice(wrong).status();
    ASSERT_FALSE(bad.ok()) << wrong;
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(bad.message()).find(absl::StrCat("--matmul_backend=", wrong, " is not")),
              std::string::npos)
        << bad.message();
  }
  const absl::Status bad = ParseMatmulBackendChoice("fastest").status();
  for (const char* named : {"fastest", "default", "auto", "onednn", "openblas", "bits"}) {
    EXPECT_NE(std::string(bad.message()).find(named), std::string::npos) << bad.message();
  }
}

// The default is a rule of the instruction set: the same answer every call,
// and the reason names the instruction set that decided.
TEST(DefaultMatmulBackend, IsTheSameEveryCallAndSaysWhy) {
  const DefaultBackendChoice first = DefaultMatmulBackend();
  for (int i = 0; i < 3; ++i) {
    const DefaultBackendChoice again = DefaultMatmulBackend();
    EXPECT_EQ(again.backend, first.backend);
    EXPECT_EQ(again.reason, first.reason);
  }
  EXPECT_NE(first.reason.find("instruction set here is "), std::string::npos) << first.reason;
}

TEST(MatmulKernels, DescriptionsNameTheKernels) {
  EXPECT_NE(MatmulKernelDescription(MatmulBackend::kOneDnn).find("f32 "), std::string::npos);
  EXPECT_NE(MatmulKernelDescription(MatmulBackend::kOpenBlas).find("core"), std::string::npos);
}

}  // namespace
}  // namespace fsdp

namespace fsdp {
namespace {

// The array conversion rounds exactly like base::ToBf16Bits, in place
// too, for lengths around the vector width and special values.
TEST(Bf16Convert, MatchesTheScalarRoundingIncludingInPlace) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int64_t n : {0, 1, 15, 16, 17, 33, 1000}) {
    std::vector<float> in(n);
    for (float& v : in) {
      const uint32_t bits = any_bits(rng);
      std::memcpy(&v, &bits, sizeof(v));
    }
    if (n > 3) {
      in[0] = std::numeric_limits<float>::infinity();
      in[1] = std::numeric_limits<float>::quiet_NaN();
      in[2] = 1.00390625f;  // exactly halfway between two bf16: ties to even
    }
    std::vector<uint16_t> out(n);
    base::ToBf16(out.data(), in.data(), n);
    std::vector<float> in_place = in;
    base::ToBf16InPlace(in_place.data(), n);
    const uint16_t* packed = reinterpret_cast<const uint16_t*>(in_place.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], base::ToBf16Bits(in[i])) << n << " " << i;
      ASSERT_EQ(packed[i], out[i]) << n << " " << i;
    }
  }
}

// Every path (AVX512_BF16's conversion where the CPU has it, the integer
// AVX-512 one, the scalar tail) against the scalar formula over a sweep of
// all 2^32 bit patterns (every 4099th), and over vectors that mix a denormal
// (which the CPU's conversion reads as zero) with NaN, infinity and normal
// values, in every lane position.
TEST(Bf16Convert, MatchesTheScalarRoundingOverTheBitPatterns) {
  std::vector<float> in;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) {
    const uint32_t b = static_cast<uint32_t>(bits);
    float v;
    std::memcpy(&v, &b, sizeof(v));
    in.push_back(v);
  }
  const uint32_t specials[] = {0x00000001u, 0x007fffffu, 0x80400000u, 0x7fc00000u,
                               0xff800001u, 0x7f800000u, 0x3f808000u, 0x7f7fffffu};
  for (int lane = 0; lane < 16; ++lane) {
    for (int j = 0; j < 16; ++j) {
      const uint32_t b = j == lane ? 0x00012345u : specials[(j + lane) % 8];
      float v;
      std::memcpy(&v, &b, sizeof(v));
      in.push_back(v);
    }
  }
  const int64_t n = static_cast<int64_t>(in.size());
  std::vector<uint16_t> out(n), integer(n);
  base::ToBf16(out.data(), in.data(), n);
  base::ToBf16IntegerPath(integer.data(), in.data(), n);
  std::vector<float> in_place = in;
  base::ToBf16InPlace(in_place.data(), n);
  const uint16_t* packed = reinterpret_cast<const uint16_t*>(in_place.data());
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &in[i], sizeof(bits));
    ASSERT_EQ(out[i], base::ToBf16Bits(in[i]))
        << base::ToBf16PathName() << std::hex << " bits 0x" << bits;
    ASSERT_EQ(integer[i], out[i]) << std::hex << "bits 0x" << bits;
    ASSERT_EQ(packed[i], out[i]) << std::hex << "bits 0x" << bits;
  }
}

// The bf16 accumulator and the round-trip, element by element against the
// scalar formula, across the 1024-element blocks they work in.
TEST(Bf16Convert, AccumulateAndRoundThroughMatchTheScalarFormula) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t n : {0, 1, 17, 1023, 1024, 1025, 3000}) {
    std::vector<uint16_t> acc(n);
    std::vector<float> add(n);
    for (int64_t i = 0; i < n; ++i) {
      acc[i] = base::ToBf16Bits(normal(rng));
      add[i] = normal(rng) * 1e-2f;
    }
    std::vector<uint16_t> expected(n);
    for (int64_t i = 0; i < n; ++i) {
      expected[i] = base::ToBf16Bits(base::FromBf16Bits(acc[i]) + add[i]);
    }
    base::AccumulateToBf16(acc.data(), add.data(), n);
    std::vector<float> round_trip = add;
    base::RoundThroughBf16(round_trip.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(acc[i], expected[i]) << n << " " << i;
      ASSERT_EQ(round_trip[i], base::FromBf16Bits(base::ToBf16Bits(add[i])))
          << n << " " << i;
    }
    if (n > 1) {
      EXPECT_NE(round_trip, add);  // the rounding did something
    }
  }
}

// The one-pass averaging of bf16 gradients, against the scalar formula:
// normal values, and vectors where one lane is special (a bf16 denormal, a
// value whose product becomes denormal, which the AVX512_BF16 path must hand
// to its integer rounding, NaN, inf, -0, the largest finite), in every lane
// position and in the tail, for a factor that is a power of two and one that
// is not.
TEST(Bf16Convert, ScaleInPlaceMatchesTheScalarFormula) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint16_t specials[] = {0x0001, 0x8003, 0x0080, 0x00c1, 0x0100, 0x7fc0,
                               0xffc1, 0x7f80, 0xff80, 0x8000, 0x7f7f, 0xff7f};
  for (const float scale : {1.0f / 3.0f, 0.5f}) {
    for (int64_t n : {0, 1, 17, 1024, 3000}) {
      std::vector<uint16_t> data(n), expected(n);
      for (int64_t i = 0; i < n; ++i) {
        data[i] = base::ToBf16Bits(normal(rng));
        if (n > 100 && i % 37 == 0) data[i] = specials[(i / 37) % std::size(specials)];
      }
      for (int64_t i = 0; i < n; ++i) {
        expected[i] = base::ToBf16Bits(base::FromBf16Bits(data[i]) * scale);
      }
      base::ScaleBf16InPlace(data.data(), n, scale);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(data[i], expected[i]) << "n=" << n << " i=" << i << " scale=" << scale;
      }
    }
  }
}

}  // namespace
}  // namespace fsdp
