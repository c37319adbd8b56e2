// File: tests/fsdp/nn/bf16_outputs_test.cc
//
// The fused bf16-output layers (fsdp/nn/bf16_outputs.h, and linear.h's
// BiasGradientWithBf16) give the bits of the unfused layer followed by
// base::ToBf16 (and, for GELU's backward, the bias gradient of the unfused fp32
// gradient), at sizes below, at and across their 4096-float block, and for
// rows wider than a block.
#include "fsdp/nn/bf16_outputs.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/bf16_convert.h"
#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/kernel_isa.h"
#include "fsdp/nn/layer_norm.h"
#include "fsdp/nn/linear.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/grad_check.h"

namespace fsdp {
namespace {

using testing_util::RandomVector;

std::vector<uint16_t> Rounded(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  base::ToBf16(out.data(), v.data(), static_cast<int64_t>(v.size()));
  return out;
}

TEST(Bf16OutputsTest, GeluForwardToBf16IsGeluThenRounding) {
  for (int64_t n : {1, 17, 4095, 4096, 4097, 3 * 4096 + 33}) {
    const std::vector<float> x = RandomVector(n, 31 + n, 3.0f);
    std::vector<float> y(n);
    GeluForward(y.data(), x.data(), n);
    std::vector<uint16_t> fused(n, 0xffff);
    GeluForwardToBf16(fused.data(), x.data(), n);
    EXPECT_EQ(fused, Rounded(y)) << "n=" << n;
  }
}

// Against GELU's backward into fp32, its rounding and the bias gradient
// LinearBackwardBf16 takes from that fp32 gradient: rows that fill a block,
// a partial last block, 4099 columns (a row wider than half a block) and
// 9000 (wider than a block, cut into pieces), each written and added.
TEST(Bf16OutputsTest, GeluBackwardToBf16WithBiasGradientIsGeluThenRoundingAndBiasSums) {
  struct Shape {
    int rows, width;
  };
  for (const Shape s : {Shape{1, 17}, Shape{8, 2048}, Shape{37, 2048}, Shape{3, 4099},
                        Shape{2, 9000}, Shape{1500, 3}}) {
    const int64_t n = int64_t{s.rows} * s.width;
    const std::vector<float> x = RandomVector(n, 41 + n, 3.0f);
    const std::vector<float> dout = RandomVector(n, 42 + n);
    std::vector<float> expected(n, 0.0f);
    GeluBackward(expected.data(), x.data(), dout.data(), n);
    for (const GradWrite write : {GradWrite::kOverwrite, GradWrite::kAdd}) {
      const std::vector<float> prior = RandomVector(s.width, 44 + n);
      // LinearBackwardBf16's bias gradient of `expected` (no product: null
      // weight and input gradients).
      std::vector<float> expected_dbias = prior;
      LinearBackwardBf16(nullptr, nullptr, expected_dbias.data(), expected.data(), nullptr,
                         nullptr, nullptr, s.rows, 1, s.width, GradWrite::kAdd, write);
      std::vector<float> dbias = prior;
      std::vector<uint16_t> dinp16(n, 0xffff);
      GeluBackwardToBf16WithBiasGradient(dbias.data(), dinp16.data(), x.data(), dout.data(),
                                         s.rows, s.width, write);
      const std::string shape = std::to_string(s.rows) + " x " + std::to_string(s.width);
      EXPECT_EQ(dinp16, Rounded(expected)) << shape;
      EXPECT_EQ(std::memcmp(dbias.data(), expected_dbias.data(), sizeof(float) * s.width), 0)
          << shape << (write == GradWrite::kAdd ? " added" : " written");
    }
  }
}

TEST(Bf16OutputsTest, LayerNormForwardToBf16IsLayerNormThenRounding) {
  struct Shape {
    int rows, channels;
  };
  // 8 rows of 512 fill a block; 37 rows leave a partial one; 5000 channels
  // are wider than a block; 3 channels do not divide it.
  for (const Shape s : {Shape{1, 512}, Shape{37, 512}, Shape{3, 5000}, Shape{1500, 3}}) {
    const int64_t size = int64_t{s.rows} * s.channels;
    const std::vector<float> x = RandomVector(size, 51 + s.channels, 2.0f);
    const std::vector<float> w = RandomVector(s.channels, 52), b = RandomVector(s.channels, 53);
    std::vector<float> y(size), mean(s.rows), rstd(s.rows);
    LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), s.rows,
                     s.channels);
    std::vector<uint16_t> fused(size, 0xffff);
    std::vector<float> fused_mean(s.rows, -1.0f), fused_rstd(s.rows, -1.0f);
    LayerNormForwardToBf16(fused.data(), fused_mean.data(), fused_rstd.data(), x.data(),
                           w.data(), b.data(), s.rows, s.channels);
    EXPECT_EQ(fused, Rounded(y)) << s.rows << " x " << s.channels;
    EXPECT_EQ(fused_mean, mean) << s.rows << " x " << s.channels;
    EXPECT_EQ(fused_rstd, rstd) << s.rows << " x " << s.channels;
  }
}

struct Shape {
  int rows, channels;
};

// 8 rows of 512 fill a block; 37 rows leave a partial one; 5000 channels are
// wider than a block; 3 channels do not divide it.
constexpr Shape kShapes[] = {{1, 512}, {37, 512}, {3, 5000}, {1500, 3}};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

TEST(Bf16OutputsTest, LayerNormBackwardWithBf16AddsAndRoundsTheSum) {
  for (const Shape s : kShapes) {
    const int64_t size = int64_t{s.rows} * s.channels;
    const std::vector<float> x = RandomVector(size, 61 + s.channels, 2.0f);
    const std::vector<float> dout = RandomVector(size, 62 + s.channels);
    const std::vector<float> w = RandomVector(s.channels, 63);
    std::vector<float> y(size), mean(s.rows), rstd(s.rows);
    LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), s.rows,
                     s.channels);
    // What the gradients held before: the backward adds into all three.
    const std::vector<float> dinp0 = RandomVector(size, 64 + s.channels);
    const std::vector<float> dw0 = RandomVector(s.channels, 65), db0 = RandomVector(s.channels, 66);
    std::vector<float> dinp = dinp0, dw = dw0, db = db0;
    LayerNormBackward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                      mean.data(), rstd.data(), s.rows, s.channels);
    std::vector<float> fused = dinp0, fused_dw = dw0, fused_db = db0;
    std::vector<uint16_t> fused16(size, 0xffff);
    LayerNormBackwardWithBf16(fused.data(), fused16.data(), fused_dw.data(), fused_db.data(),
                              dout.data(), x.data(), w.data(), mean.data(), rstd.data(), s.rows,
                              s.channels);
    EXPECT_TRUE(SameBits(fused, dinp)) << s.rows << " x " << s.channels;
    EXPECT_TRUE(SameBits(fused_dw, dw)) << s.rows << " x " << s.channels;
    EXPECT_TRUE(SameBits(fused_db, db)) << s.rows << " x " << s.channels;
    EXPECT_EQ(fused16, Rounded(dinp)) << s.rows << " x " << s.channels;
  }
}

// In every ISA variant: the fused kernel rounds as it stores, in place.
TEST(Bf16OutputsTest, CrossEntropyBackwardToBf16RoundsInPlace) {
  for (const Shape s : {Shape{1, 50}, Shape{2, 50}, Shape{7, 4099}, Shape{33, 16}}) {
    const int64_t size = int64_t{s.rows} * s.channels;
    std::vector<float> probs = RandomVector(size, 71 + s.rows, 4.0f);
    std::vector<int32_t> targets(s.rows);
    for (int r = 0; r < s.rows; ++r) targets[r] = (r * 13 + 5) % s.channels;
    CrossEntropyForward(probs.data(), targets.data(), s.rows, s.channels);
    std::vector<float> dlogits = probs;
    CrossEntropyBackward(dlogits.data(), targets.data(), s.rows, s.channels, 3.0f);
    for (KernelIsa isa : SupportedKernelIsas()) {
      std::vector<float> buffer = probs;
      CrossEntropyBackwardToBf16(isa, buffer.data(), targets.data(), s.rows, s.channels, 3.0f);
      std::vector<uint16_t> fused(size);
      std::memcpy(fused.data(), buffer.data(), sizeof(uint16_t) * size);
      EXPECT_EQ(fused, Rounded(dlogits)) << s.rows << " x " << s.channels << " "
                                         << KernelIsaName(isa);
    }
  }
}

// The bias gradient's bits are defined by its order: each column adds rows
// 0, 1, ... to what it held (or to 0 when written fresh). The Linear
// backwards (fp32, bf16) and the fused BiasGradientWithBf16 all give those
// bits, however they block the rows.
TEST(Bf16OutputsTest, BiasGradientWithBf16IsTheColumnSumsAndTheRounding) {
  for (const Shape s : kShapes) {
    const int64_t size = int64_t{s.rows} * s.channels;
    const std::vector<float> dout = RandomVector(size, 81 + s.channels);
    const std::vector<float> db0 = RandomVector(s.channels, 82);
    for (const GradWrite write : {GradWrite::kAdd, GradWrite::kOverwrite}) {
      std::vector<float> expected(s.channels);
      for (int o = 0; o < s.channels; ++o) {
        float sum = write == GradWrite::kAdd ? db0[o] : 0.0f;
        for (int i = 0; i < s.rows; ++i) sum += dout[int64_t{i} * s.channels + o];
        expected[o] = sum;
      }
      // The Linear backwards' bias gradients alone (null dinp and dweight:
      // no product runs).
      std::vector<float> db = db0, db_bf16 = db0;
      LinearBackward(nullptr, nullptr, db.data(), dout.data(), nullptr, nullptr, s.rows, 1,
                     s.channels, GradWrite::kAdd, write);
      LinearBackwardBf16(nullptr, nullptr, db_bf16.data(), dout.data(), nullptr, nullptr,
                         nullptr, s.rows, 1, s.channels, GradWrite::kAdd, write);
      std::vector<float> fused_db = db0;
      std::vector<uint16_t> fused16(size, 0xffff);
      BiasGradientWithBf16(fused_db.data(), fused16.data(), dout.data(), s.rows, s.channels,
                           write);
      EXPECT_TRUE(SameBits(db, expected)) << s.rows << " x " << s.channels;
      EXPECT_TRUE(SameBits(db_bf16, expected)) << s.rows << " x " << s.channels;
      EXPECT_TRUE(SameBits(fused_db, expected)) << s.rows << " x " << s.channels;
      EXPECT_EQ(fused16, Rounded(dout)) << s.rows << " x " << s.channels;
    }
    std::vector<uint16_t> only16(size, 0xffff);  // no bias: the rounding alone
    BiasGradientWithBf16(nullptr, only16.data(), dout.data(), s.rows, s.channels,
                         GradWrite::kAdd);
    EXPECT_EQ(only16, Rounded(dout)) << s.rows << " x " << s.channels;
  }
}

}  // namespace
}  // namespace fsdp
