// File: tests/fsdp/nn/flash_attention_test.cc
//
// The blocked attention against the naive one (fsdp/nn/attention.h, itself
// checked against a double-precision reference and finite differences) at
// several sequence lengths, including lengths that are not a multiple of the
// block, on both matmul backends; a finite-difference check of its own
// backward; and run-to-run bit equality.
#include "fsdp/nn/flash_attention.h"

#include <cmath>
#include <string>
#include <vector>

#include "fsdp/nn/attention.h"
#include "base/bf16_convert.h"
#include "fsdp/nn/matmul.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/grad_check.h"

namespace fsdp {
namespace {

using testing_util::ExpectGradMatches;
using testing_util::RandomVector;
using testing_util::WeightedSum;

struct Shape {
  int batch, seq_len, channels, heads;
};

class FlashAttentionEqualsNaive
    : public testing::TestWithParam<std::tuple<int, MatmulBackend>> {};

TEST_P(FlashAttentionEqualsNaive, ForwardAndBackwardWithinFp32Rounding) {
  const auto [T, backend] = GetParam();
  SetMatmulBackend(backend);
  const int B = 2, C = 32, H = 2;
  const std::vector<float> qkv = RandomVector(int64_t{B} * T * 3 * C, 21);
  const std::vector<float> dout = RandomVector(int64_t{B} * T * C, 22);

  std::vector<float> naive_out(B * T * C), probs(int64_t{B} * H * T * T);
  AttentionForward(naive_out.data(), probs.data(), qkv.data(), B, T, C, H);
  std::vector<float> naive_dqkv(qkv.size()), naive_scratch(AttentionBackwardScratchFloats(T));
  AttentionBackward(naive_dqkv.data(), naive_scratch.data(), dout.data(), qkv.data(),
                    probs.data(), B, T, C, H);

  std::vector<float> out(B * T * C), lse(B * H * T), scratch(FlashAttentionScratchFloats(T, C / H));
  FlashAttentionForward(out.data(), lse.data(), scratch.data(), qkv.data(), B, T, C, H);
  // The backward ADDS: start from a non-zero gradient to check that too.
  std::vector<float> dqkv(qkv.size(), 0.5f);
  FlashAttentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(),
                         lse.data(), B, T, C, H);

  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], naive_out[i], 2e-6 * (1 + std::fabs(naive_out[i]))) << "out " << i;
  }
  for (size_t i = 0; i < dqkv.size(); ++i) {
    ASSERT_NEAR(dqkv[i] - 0.5f, naive_dqkv[i], 2e-5 * (1 + std::fabs(naive_dqkv[i])))
        << "dqkv " << i;
  }
  // lse is the log of each row's softmax denominator: exp(s - lse) sums to 1.
  for (int row = 0; row < B * H * T; row += 7) {
    ASSERT_TRUE(std::isfinite(lse[row])) << row;
  }
}

INSTANTIATE_TEST_SUITE_P(
    SeqLens, FlashAttentionEqualsNaive,
    testing::Combine(testing::Values(1, 5, kFlashBlock, kFlashBlock + 1, 2 * kFlashBlock + 3, 256),
                     testing::Values(MatmulBackend::kOneDnn, MatmulBackend::kOpenBlas)),
    [](const testing::TestParamInfo<std::tuple<int, MatmulBackend>>& info) {
      return "T" + std::to_string(std::get<0>(info.param)) + "_" +
             MatmulBackendName(std::get<1>(info.param));
    });

TEST(FlashAttention, BackwardMatchesFiniteDifferencesAcrossBlocks) {
  SetMatmulBackend(MatmulBackend::kOneDnn);
  const int B = 1, T = kFlashBlock + 9, C = 8, H = 2;  // two query and key blocks
  std::vector<float> qkv = RandomVector(int64_t{B} * T * 3 * C, 31);
  const std::vector<float> dout = RandomVector(int64_t{B} * T * C, 32);
  std::vector<float> out(B * T * C), lse(B * H * T), scratch(FlashAttentionScratchFloats(T, C / H));
  auto loss = [&] {
    FlashAttentionForward(out.data(), lse.data(), scratch.data(), qkv.data(), B, T, C, H);
    return WeightedSum(out, dout);
  };
  loss();
  std::vector<float> dqkv(qkv.size());
  FlashAttentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(),
                         lse.data(), B, T, C, H);
  // The gradient reaches every block: keys of the second block get some.
  double second_block_norm = 0;
  for (int t = kFlashBlock; t < T; ++t) {
    for (int c = C; c < 2 * C; ++c) second_block_norm += std::fabs(dqkv[t * 3 * C + c]);
  }
  EXPECT_GT(second_block_norm, 0.0);
  ExpectGradMatches("dqkv", loss, qkv, dqkv, 1e-2f, 1e-2, 1e-3, /*stride=*/3);
}

TEST(FlashAttention, RepeatedRunsAreBitIdentical) {
  SetMatmulBackend(MatmulBackend::kOneDnn);
  const int B = 2, T = 150, C = 32, H = 4;
  const std::vector<float> qkv = RandomVector(int64_t{B} * T * 3 * C, 41);
  const std::vector<float> dout = RandomVector(int64_t{B} * T * C, 42);
  std::vector<float> first_out, first_dqkv;
  for (int run = 0; run < 2; ++run) {
    std::vector<float> out(B * T * C), lse(B * H * T),
        scratch(FlashAttentionScratchFloats(T, C / H)), dqkv(qkv.size());
    FlashAttentionForward(out.data(), lse.data(), scratch.data(), qkv.data(), B, T, C, H);
    FlashAttentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(),
                           lse.data(), B, T, C, H);
    if (run == 0) {
      first_out = out;
      first_dqkv = dqkv;
    } else {
      EXPECT_EQ(out, first_out);
      EXPECT_EQ(dqkv, first_dqkv);
    }
  }
}

}  // namespace
}  // namespace fsdp

namespace fsdp {
namespace {

// The bf16 variant against the bf16 standard attention (the same products on
// bf16 operands, but per-block probabilities and the bf16 output in D):
// within bf16 rounding of each other, at one, two and three blocks.
TEST(FlashAttentionBf16Test, MatchesTheStandardBf16AttentionWithinBf16Rounding) {
  for (const int T : {5, kFlashBlock + 9, 2 * kFlashBlock + 3}) {
    const int B = 2, C = 32, H = 2;
    const std::vector<float> qkv32 = testing_util::RandomVector(int64_t{B} * T * 3 * C, 31);
    const std::vector<float> dout32 = testing_util::RandomVector(int64_t{B} * T * C, 32);
    std::vector<uint16_t> qkv(qkv32.size()), dout(dout32.size());
    base::ToBf16(qkv.data(), qkv32.data(), qkv32.size());
    base::ToBf16(dout.data(), dout32.data(), dout32.size());

    std::vector<float> ref_out(B * T * C), dp(AttentionBf16ScratchFloats(T, C / H)),
        ref_dqkv(qkv.size());
    std::vector<uint16_t> probs(int64_t{B} * H * T * T),
        p16(AttentionBf16ScratchElements(T, C / H)), ref_out16(ref_out.size());
    AttentionForwardBf16(ref_out16.data(), probs.data(), dp.data(), p16.data(), qkv.data(), B, T,
                         C, H);
    base::FromBf16(ref_out.data(), ref_out16.data(), ref_out16.size());
    AttentionBackwardBf16(ref_dqkv.data(), dp.data(), p16.data(), dout.data(), qkv.data(),
                          probs.data(), B, T, C, H);

    std::vector<float> out(B * T * C), lse(B * H * T),
        scratch(FlashAttentionBf16ScratchFloats(T, C / H)), dqkv(qkv.size());
    std::vector<uint16_t> s16(FlashAttentionBf16ScratchElements(T, C / H)), out16(out.size());
    FlashAttentionForwardBf16(out16.data(), lse.data(), scratch.data(), s16.data(), qkv.data(),
                              B, T, C, H);
    base::FromBf16(out.data(), out16.data(), out16.size());
    FlashAttentionBackwardBf16(dqkv.data(), scratch.data(), s16.data(), dout.data(), qkv.data(),
                               out16.data(), lse.data(), B, T, C, H);
    auto relative_l2 = [](const std::vector<float>& x, const std::vector<float>& ref) {
      double diff = 0, norm = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        diff += std::pow(double(x[i]) - ref[i], 2);
        norm += double(ref[i]) * ref[i];
      }
      return std::sqrt(diff / norm);
    };
    EXPECT_LT(relative_l2(out, ref_out), 1e-2) << "T=" << T;
    EXPECT_LT(relative_l2(dqkv, ref_dqkv), 2e-2) << "T=" << T;
  }
}

}  // namespace
}  // namespace fsdp
