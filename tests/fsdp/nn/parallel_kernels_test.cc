// File: tests/fsdp/nn/parallel_kernels_test.cc
//
// The kernels that run on the compute threads (base/parallel_for.h) give, at
// 2 and 3 threads, the bits they give at 1: element-wise ones cut anywhere,
// per-row ones cut between rows, the column sums (bias, LayerNorm weight
// and bias gradients) cut between columns with each column adding its rows
// in order, and attention's heads each on one thread with a scratch slot of
// its own. Sizes span several pieces with ragged ends.
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "absl/types/span.h"
#include "base/bf16_convert.h"
#include "base/parallel_for.h"
#include "fsdp/nn/attention.h"
#include "fsdp/nn/attention_layout.h"
#include "fsdp/nn/bf16_outputs.h"
#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/layer_norm.h"
#include "fsdp/nn/linear.h"
#include "fsdp/nn/residual.h"
#include "fsdp/nn/rms_norm.h"
#include "fsdp/nn/swiglu.h"
#include "fsdp/optim/adamw.h"
#include "fsdp/optim/grad_clip.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/grad_check.h"

namespace fsdp {
namespace {

using testing_util::RandomVector;

// Runs `kernel` (which fills `out`) at 1, 2 and 3 threads: success when it
// wrote the same bytes each time, else which thread count differed.
template <typename T>
::testing::AssertionResult SameBitsAtEveryThreadCount(const char* what, std::vector<T>* out,
                                                      const std::function<void()>& kernel) {
  base::SetParallelThreads(1);
  kernel();
  const std::vector<T> one = *out;
  for (int threads : {2, 3}) {
    base::SetParallelThreads(threads);
    kernel();
    if (std::memcmp(out->data(), one.data(), one.size() * sizeof(T)) != 0) {
      base::SetParallelThreads(1);
      return ::testing::AssertionFailure() << what << " differs at " << threads << " threads";
    }
  }
  base::SetParallelThreads(1);
  return ::testing::AssertionSuccess();
}

constexpr int64_t kN = 3 * 16384 + 37;
constexpr int kRows = 70;
constexpr int kWidth = 2 * 256 + 48;     // two column pieces and a ragged one
constexpr int kChannels = 4 * 128 + 24;  // LayerNorm: four column pieces and a tail

TEST(ParallelKernels, ElementWiseKernels) {
  const std::vector<float> a = RandomVector(kN, 1), b = RandomVector(kN, 2);
  std::vector<float> out(kN), out2(kN);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("GeluForward", &out,
                                         [&] { GeluForward(out.data(), a.data(), kN); }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("GeluBackward", &out, [&] {
    out = b;
    GeluBackward(out.data(), a.data(), b.data(), kN);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("GeluBackwardOverwrite", &out, [&] {
    GeluBackwardOverwrite(out.data(), a.data(), b.data(), kN);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount(
      "ResidualForward", &out, [&] { ResidualForward(out.data(), a.data(), b.data(), kN); }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("ResidualBackward", &out, [&] {
    out = a;
    out2 = b;
    ResidualBackward(out.data(), out2.data(), b.data(), kN);
    for (int64_t i = 0; i < kN; ++i) out[i] += 3.0f * out2[i];
  }));
  AdamWOptions options;
  options.weight_decay = 0.1f;
  std::vector<float> m(kN), v(kN);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("AdamWUpdate", &out, [&] {
    out = a;
    std::fill(m.begin(), m.end(), 0.01f);
    std::fill(v.begin(), v.end(), 0.02f);
    AdamWUpdate(options, 1e-3f, 3, absl::MakeSpan(out), b, absl::MakeSpan(m), absl::MakeSpan(v),
                0.5f);
    for (int64_t i = 0; i < kN; ++i) out[i] += m[i] + v[i];
  }));
}

TEST(ParallelKernels, GradientNormsAndClipping) {
  std::vector<float> a = RandomVector(kN, 12, 3.0f);
  a[kN - 5] = 100.0f;  // the largest, in the last piece
  std::vector<uint16_t> a16(kN);
  base::ToBf16(a16.data(), a.data(), kN);
  // The largest |value| bits and the 128-bit sums, exactly.
  std::vector<uint64_t> results(6);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("gradient norms", &results, [&] {
    const float largest = MaxAbs(a), largest16 = MaxAbsBf16(a16);
    const int exponent = SquareUnitExponent(largest);
    const SquareUnits units = SumOfSquareUnits(a, exponent);
    const SquareUnits units16 = SumOfSquareUnitsBf16(a16, exponent);
    uint32_t bits = 0, bits16 = 0;
    std::memcpy(&bits, &largest, sizeof(bits));
    std::memcpy(&bits16, &largest16, sizeof(bits16));
    results = {bits,
               bits16,
               static_cast<uint64_t>(units),
               static_cast<uint64_t>(units >> 64),
               static_cast<uint64_t>(units16),
               static_cast<uint64_t>(units16 >> 64)};
  }));
  EXPECT_EQ(results[0], 0x42c80000u);  // 100.0f
  std::vector<float> scaled(kN);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("ScaleInPlace", &scaled, [&] {
    scaled = a;
    ScaleInPlace(absl::MakeSpan(scaled), 0.3f);
  }));
}

TEST(ParallelKernels, Bf16Conversions) {
  const std::vector<float> a = RandomVector(kN, 3), b = RandomVector(kN, 4);
  std::vector<uint16_t> out16(kN);
  std::vector<float> out(kN);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("ToBf16", &out16,
                                         [&] { base::ToBf16(out16.data(), a.data(), kN); }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("FromBf16", &out,
                                         [&] { base::FromBf16(out.data(), out16.data(), kN); }));
  std::vector<uint16_t> start(kN);
  base::ToBf16(start.data(), b.data(), kN);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("AccumulateToBf16", &out16, [&] {
    out16 = start;
    base::AccumulateToBf16(out16.data(), a.data(), kN);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("ScaleBf16InPlace", &out16, [&] {
    out16 = start;
    base::ScaleBf16InPlace(out16.data(), kN, 0.37f);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("RoundThroughBf16", &out, [&] {
    out = a;
    base::RoundThroughBf16(out.data(), kN);
  }));
}

TEST(ParallelKernels, ColumnSumsAndGeluBackwardToBf16) {
  const int64_t n = int64_t{kRows} * kWidth;
  const std::vector<float> inp = RandomVector(n, 5), dout = RandomVector(n, 6);
  std::vector<float> both(kWidth + n / 2);  // dbias, then dout16 as bytes
  EXPECT_TRUE(SameBitsAtEveryThreadCount("BiasGradientWithBf16", &both, [&] {
    std::fill(both.begin(), both.end(), 0.5f);
    BiasGradientWithBf16(both.data(), reinterpret_cast<uint16_t*>(both.data() + kWidth),
                         dout.data(), kRows, kWidth, GradWrite::kAdd);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("GeluBackwardToBf16WithBiasGradient", &both, [&] {
    std::fill(both.begin(), both.end(), 0.5f);
    GeluBackwardToBf16WithBiasGradient(both.data(),
                                       reinterpret_cast<uint16_t*>(both.data() + kWidth),
                                       inp.data(), dout.data(), kRows, kWidth, GradWrite::kAdd);
  }));
  std::vector<uint16_t> out16(n);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("GeluForwardToBf16", &out16,
                                         [&] { GeluForwardToBf16(out16.data(), inp.data(), n); }));
}

TEST(ParallelKernels, LayerNorm) {
  const int rows = 3 * 16 + 5;
  const int64_t n = int64_t{rows} * kChannels;
  const std::vector<float> inp = RandomVector(n, 7), dout = RandomVector(n, 8);
  const std::vector<float> weight = RandomVector(kChannels, 9), bias = RandomVector(kChannels, 10);
  // out, mean, rstd in one buffer.
  std::vector<float> forward(n + 2 * rows);
  float* out = forward.data();
  float* mean = out + n;
  float* rstd = mean + rows;
  EXPECT_TRUE(SameBitsAtEveryThreadCount("LayerNormForward", &forward, [&] {
    LayerNormForward(out, mean, rstd, inp.data(), weight.data(), bias.data(), rows, kChannels);
  }));
  std::vector<uint16_t> out16(n);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("LayerNormForwardToBf16", &out16, [&] {
    LayerNormForwardToBf16(out16.data(), mean, rstd, inp.data(), weight.data(), bias.data(), rows,
                           kChannels);
  }));
  // dinp, dweight, dbias (added into), then dinp16 as bytes.
  std::vector<float> backward(n + 2 * kChannels + n / 2);
  float* dinp = backward.data();
  float* dweight = dinp + n;
  float* dbias = dweight + kChannels;
  uint16_t* dinp16 = reinterpret_cast<uint16_t*>(dbias + kChannels);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("LayerNormBackward", &backward, [&] {
    std::fill(backward.begin(), backward.end(), 0.25f);
    LayerNormBackward(dinp, dweight, dbias, dout.data(), inp.data(), weight.data(), mean, rstd,
                      rows, kChannels);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("LayerNormBackwardWithBf16", &backward, [&] {
    std::fill(backward.begin(), backward.end(), 0.25f);
    LayerNormBackwardWithBf16(dinp, dinp16, dweight, dbias, dout.data(), inp.data(), weight.data(),
                              mean, rstd, rows, kChannels);
  }));
}

TEST(ParallelKernels, CrossEntropy) {
  const int rows = 2 * 1024 + 77;  // the forward holds 1024 rows' losses at a time
  const int vocab = 300;
  const std::vector<float> logits = RandomVector(int64_t{rows} * vocab, 11, 4.0f);
  std::vector<int32_t> targets(rows);
  for (int i = 0; i < rows; ++i) targets[i] = (i * 37) % vocab;
  std::vector<float> probs(logits.size() + 1);  // the loss in the last element
  EXPECT_TRUE(SameBitsAtEveryThreadCount("CrossEntropyForward", &probs, [&] {
    std::copy(logits.begin(), logits.end(), probs.begin());
    probs.back() = CrossEntropyForward(probs.data(), targets.data(), rows, vocab);
  }));
  const std::vector<float> forward = probs;
  EXPECT_TRUE(SameBitsAtEveryThreadCount("CrossEntropyBackward", &probs, [&] {
    probs = forward;
    CrossEntropyBackward(probs.data(), targets.data(), rows, vocab, 0.75f);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("CrossEntropyBackwardToBf16", &probs, [&] {
    probs = forward;
    CrossEntropyBackwardToBf16(probs.data(), targets.data(), rows, vocab, 0.75f);
    // Only the first half of the buffer is the bf16 gradient; the rest is
    // what the rows left behind, the same at any thread count too.
  }));
}

TEST(ParallelKernels, LlamaRmsNormAndSwiglu) {
  const int rows = 3 * 16 + 5;
  const int64_t n = int64_t{rows} * kChannels;
  const std::vector<float> inp = RandomVector(n, 13), dout = RandomVector(n, 14);
  const std::vector<float> weight = RandomVector(kChannels, 15);
  std::vector<float> out(n), rstd(rows);
  std::vector<uint16_t> out16(n);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("RmsNormForward fp32", &out, [&] {
    RmsNormForward(DtypeSpan(absl::MakeSpan(out)), rstd.data(), inp.data(), weight.data(), rows,
                   kChannels, 1e-5f);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("RmsNormForward bf16", &out16, [&] {
    RmsNormForward(DtypeSpan(absl::MakeSpan(out16)), rstd.data(), inp.data(), weight.data(), rows,
                   kChannels, 1e-5f);
  }));
  // dinp and dweight (added into), then the bf16 copy as bytes.
  std::vector<float> backward(n + kChannels + n / 2);
  float* dinp = backward.data();
  float* dweight = dinp + n;
  std::vector<uint16_t> copy16(n);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("RmsNormBackward", &backward, [&] {
    std::fill(backward.begin(), backward.end(), 0.25f);
    RmsNormBackward(dinp, DtypeSpan(absl::MakeSpan(copy16)), dweight, dout.data(), inp.data(),
                    weight.data(), rstd.data(), rows, kChannels);
    std::memcpy(dweight + kChannels, copy16.data(), copy16.size() * sizeof(uint16_t));
  }));
  const int hidden = 300;
  const std::vector<float> gate_up = RandomVector(int64_t{rows} * 2 * hidden, 16);
  const std::vector<float> dswiglu = RandomVector(int64_t{rows} * hidden, 17);
  std::vector<float> swiglu(int64_t{rows} * hidden);
  EXPECT_TRUE(SameBitsAtEveryThreadCount("SwigluForward", &swiglu, [&] {
    SwigluForward(DtypeSpan(absl::MakeSpan(swiglu)), gate_up.data(), rows, hidden);
  }));
  std::vector<float> dgate_up(gate_up.size());
  EXPECT_TRUE(SameBitsAtEveryThreadCount("SwigluBackward", &dgate_up, [&] {
    std::fill(dgate_up.begin(), dgate_up.end(), 0.5f);
    SwigluBackward(dgate_up.data(), dswiglu.data(), gate_up.data(), rows, hidden);
  }));
}

// Attention's heads on the threads, each with its own scratch slot: the
// outputs, probabilities and input gradients have the bits of the heads run
// in order. T spans two causal row blocks with a ragged end; three slots, so
// that every thread count here has one per thread.
TEST(ParallelKernels, AttentionHeads) {
  constexpr int B = 2, T = 150, C = 64, H = 4, hs = C / H, kSlots = 3;
  const int64_t qkv_n = int64_t{B} * T * 3 * C, out_n = int64_t{B} * T * C,
                probs_n = int64_t{B} * H * T * T;
  const std::vector<float> qkv = RandomVector(qkv_n, 7), dout = RandomVector(out_n, 8);
  std::vector<float> out(out_n), probs(probs_n), dqkv(qkv_n);
  std::vector<float> scratch(kSlots * AttentionBackwardScratchFloats(T));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("AttentionForward out", &out, [&] {
    AttentionForward(out.data(), probs.data(), qkv.data(), B, T, C, H);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("AttentionForward probs", &probs, [&] {
    AttentionForward(out.data(), probs.data(), qkv.data(), B, T, C, H);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("AttentionBackward", &dqkv, [&] {
    AttentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), probs.data(), B, T, C,
                      H, kSlots);
  }));

  std::vector<uint16_t> qkv16(qkv_n), dout16(out_n), out16(out_n), probs16(probs_n);
  base::ToBf16(qkv16.data(), qkv.data(), qkv_n);
  base::ToBf16(dout16.data(), dout.data(), out_n);
  std::vector<float> scratch_bf16_mode(kSlots * AttentionBf16ScratchFloats(T, hs));
  std::vector<uint16_t> scratch16(kSlots * AttentionBf16ScratchElements(T, hs));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("AttentionForwardBf16 out", &out16, [&] {
    AttentionForwardBf16(out16.data(), probs16.data(), scratch_bf16_mode.data(), scratch16.data(),
                         qkv16.data(), B, T, C, H, kSlots);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("AttentionForwardBf16 probs", &probs16, [&] {
    AttentionForwardBf16(out16.data(), probs16.data(), scratch_bf16_mode.data(), scratch16.data(),
                         qkv16.data(), B, T, C, H, kSlots);
  }));
  EXPECT_TRUE(SameBitsAtEveryThreadCount("AttentionBackwardBf16", &dqkv, [&] {
    AttentionBackwardBf16(dqkv.data(), scratch_bf16_mode.data(), scratch16.data(), dout16.data(),
                          qkv16.data(), probs16.data(), B, T, C, H, kSlots);
  }));
}

}  // namespace
}  // namespace fsdp
