// File: tests/fsdp/nn/llama_layers_test.cc
//
// The Llama's layers (RMSNorm, rotary positions, grouped-query attention on
// the shared attention kernels, SwiGLU): forward against naive double
// references written here from the equations of docs/model.md ("Llama"),
// backward against central finite differences, and in bf16 the bits of the
// fp32 result rounded (the convention of fsdp/nn/dtype_layers.h).
#include <cmath>
#include <cstring>
#include <vector>

#include "base/bf16_convert.h"
#include "fsdp/nn/attention.h"
#include "fsdp/nn/flash_attention.h"
#include "fsdp/nn/grouped_query.h"
#include "fsdp/nn/kernel_isa.h"
#include "fsdp/nn/rms_norm.h"
#include "fsdp/nn/rotary.h"
#include "fsdp/nn/swiglu.h"
#include "fsdp/nn/token_embedding.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/grad_check.h"

namespace fsdp {
namespace {

using testing_util::ExpectGradMatches;
using testing_util::RandomVector;
using testing_util::WeightedSum;

DtypeSpan Span32(std::vector<float>& v) { return DtypeSpan(absl::MakeSpan(v)); }
DtypeSpan Span16(std::vector<uint16_t>& v) { return DtypeSpan(absl::MakeSpan(v)); }

std::vector<uint16_t> Rounded(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  base::ToBf16(out.data(), v.data(), static_cast<int64_t>(v.size()));
  return out;
}

// ------------------------------------------------------------------ RMSNorm

TEST(RmsNormTest, ForwardMatchesNaiveAndBackwardMatchesFiniteDifferences) {
  const int n = 4, C = 12;
  const float eps = 1e-5f;
  std::vector<float> x = RandomVector(n * C, 1), w = RandomVector(C, 2, 0.5f),
                     dout = RandomVector(n * C, 3);
  for (float& v : w) v += 1.0f;
  std::vector<float> y(n * C), rstd(n);
  RmsNormForward(Span32(y), rstd.data(), x.data(), w.data(), n, C, eps);
  for (int i = 0; i < n; ++i) {
    double squares = 0;
    for (int c = 0; c < C; ++c) squares += double{x[i * C + c]} * x[i * C + c];
    const double r = 1.0 / std::sqrt(squares / C + eps);
    for (int c = 0; c < C; ++c) EXPECT_NEAR(y[i * C + c], x[i * C + c] * r * w[c], 1e-5);
  }
  auto loss = [&] {
    RmsNormForward(Span32(y), rstd.data(), x.data(), w.data(), n, C, eps);
    return WeightedSum(y, dout);
  };
  loss();
  std::vector<float> dx(x.size()), dw(w.size());
  RmsNormBackward(dx.data(), Span32(dx), dw.data(), dout.data(), x.data(), w.data(), rstd.data(),
                  n, C);
  ExpectGradMatches("dx", loss, x, dx, 1e-2f, 1e-3, 1e-3);
  ExpectGradMatches("dw", loss, w, dw, 1e-2f, 1e-3, 1e-3);

  // Backward adds; a bf16 copy of dinp is the sum rounded.
  std::vector<float> dx2 = dx, dw2 = dw;
  std::vector<uint16_t> copy(dx.size());
  RmsNormBackward(dx2.data(), Span16(copy), dw2.data(), dout.data(), x.data(), w.data(),
                  rstd.data(), n, C);
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_FLOAT_EQ(dx2[i], 2 * dx[i]);
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_FLOAT_EQ(dw2[i], 2 * dw[i]);
  EXPECT_EQ(copy, Rounded(dx2));

  // bf16 output: the fp32 output rounded, the same statistics (the finite
  // differences left y at a perturbed input: compute it again).
  loss();
  std::vector<uint16_t> y16(n * C);
  std::vector<float> rstd16(n);
  RmsNormForward(Span16(y16), rstd16.data(), x.data(), w.data(), n, C, eps);
  EXPECT_EQ(y16, Rounded(y));
  EXPECT_EQ(rstd16, rstd);
}

// ------------------------------------------------------------------ rotary

TEST(RotaryTest, PairsTheFirstAndSecondHalfOfEachHead) {
  const int T = 6, hs = 8;
  const float theta = 10000.0f;
  std::vector<float> table(RotaryTableFloats(T, hs));
  FillRotaryTable(table.data(), T, hs, theta);
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < hs / 2; ++i) {
      // Channel i alone (the rest 0) turns into cos at i and sin at i + hs/2.
      std::vector<float> x(2 * hs, 0.0f), y(2 * hs);
      x[hs + i] = 1.0f;  // second head
      RotateHeadsInto(y.data(), x.data(), 2, hs, t, table.data(), T);
      const double angle = t * std::pow(double{theta}, -2.0 * i / hs);
      for (int c = 0; c < 2 * hs; ++c) {
        const double expected = c == hs + i              ? std::cos(angle)
                                : c == hs + i + hs / 2 ? std::sin(angle)
                                                       : 0.0;
        EXPECT_NEAR(y[c], expected, 1e-5) << "t " << t << " i " << i << " c " << c;
      }
      RotateHeadsInverse(y.data(), 2, hs, t, table.data(), T);
      for (int c = 0; c < 2 * hs; ++c) EXPECT_NEAR(y[c], x[c], 1e-6);
    }
  }
  // bf16 output: the fp32 rotation rounded.
  const std::vector<float> x = RandomVector(2 * hs, 4);
  std::vector<float> y(2 * hs);
  std::vector<uint16_t> y16(2 * hs);
  RotateHeadsInto(y.data(), x.data(), 2, hs, 5, table.data(), T);
  RotateHeadsInto(y16.data(), x.data(), 2, hs, 5, table.data(), T);
  EXPECT_EQ(y16, Rounded(y));
}

// ------------------------------------------------------------------ attention

struct GqaShape {
  int B, T, H, KV, hs;
};

// Grouped-query causal attention with rotary q and k, in double, from the
// definition: for query head h, kv head h / (H / KV).
std::vector<double> NaiveGqa(const std::vector<float>& proj, const GqaShape& s, double theta) {
  const int C = s.H * s.hs, W = (s.H + 2 * s.KV) * s.hs, half = s.hs / 2;
  auto rope = [&](const float* x, int t, std::vector<double>& y) {
    y.assign(s.hs, 0.0);
    for (int i = 0; i < half; ++i) {
      const double a = t * std::pow(theta, -2.0 * i / s.hs);
      y[i] = x[i] * std::cos(a) - x[i + half] * std::sin(a);
      y[i + half] = x[i + half] * std::cos(a) + x[i] * std::sin(a);
    }
  };
  std::vector<double> out(int64_t{s.B} * s.T * C, 0.0);
  std::vector<double> q, k;
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < s.H; ++h) {
      const int kv = h / (s.H / s.KV);
      for (int t = 0; t < s.T; ++t) {
        rope(&proj[(b * s.T + t) * W + h * s.hs], t, q);
        std::vector<double> w(t + 1);
        double m = -1e300;
        for (int t2 = 0; t2 <= t; ++t2) {
          rope(&proj[(b * s.T + t2) * W + C + kv * s.hs], t2, k);
          double dot = 0;
          for (int i = 0; i < s.hs; ++i) dot += q[i] * k[i];
          w[t2] = dot / std::sqrt(double(s.hs));
          m = std::max(m, w[t2]);
        }
        double z = 0;
        for (double& v : w) z += (v = std::exp(v - m));
        for (int t2 = 0; t2 <= t; ++t2) {
          for (int i = 0; i < s.hs; ++i) {
            out[(b * s.T + t) * C + h * s.hs + i] +=
                w[t2] / z * proj[(b * s.T + t2) * W + C + s.KV * s.hs + kv * s.hs + i];
          }
        }
      }
    }
  }
  return out;
}

class GroupedQueryAttentionTest : public testing::TestWithParam<std::tuple<int, bool>> {};

// The layer as the Llama block runs it: RotaryQkvForward, then the shared
// standard or flash attention; backward through both.
TEST_P(GroupedQueryAttentionTest, MatchesNaiveAndFiniteDifferences) {
  const auto [kv_heads, flash] = GetParam();
  const GqaShape s{2, 7, 4, kv_heads, 6};
  const float theta = 50.0f;  // large angles within 7 positions
  const GroupedQueryShape shape{s.B, s.T, s.H, s.KV, s.hs};
  const int C = s.H * s.hs;
  const int64_t rows = shape.rows();
  std::vector<float> proj = RandomVector(rows * shape.proj_width(), 11);
  const std::vector<float> dout = RandomVector(rows * C, 12);
  std::vector<float> table(RotaryTableFloats(s.T, s.hs));
  FillRotaryTable(table.data(), s.T, s.hs, theta);
  std::vector<float> qkv(rows * shape.qkv_width()), out(rows * C),
      probs(int64_t{s.B} * s.H * s.T * s.T), lse(int64_t{s.B} * s.H * s.T),
      scratch(std::max(FlashAttentionScratchFloats(s.T, s.hs), AttentionBackwardScratchFloats(s.T)));
  auto forward = [&] {
    RotaryQkvForward(Span32(qkv), proj.data(), table.data(), s.T, shape);
    if (flash) {
      FlashAttentionForward(out.data(), lse.data(), scratch.data(), qkv.data(), s.B, s.T, C, s.H);
    } else {
      AttentionForward(out.data(), probs.data(), qkv.data(), s.B, s.T, C, s.H);
    }
    return WeightedSum(out, dout);
  };
  forward();
  const std::vector<double> ref = NaiveGqa(proj, s, theta);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 2e-5) << i;

  std::vector<float> dqkv(qkv.size(), 0.0f), dproj(proj.size(), std::nanf(""));
  if (flash) {
    FlashAttentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(),
                           lse.data(), s.B, s.T, C, s.H);
  } else {
    AttentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), probs.data(), s.B,
                      s.T, C, s.H);
  }
  RotaryQkvBackward(dproj.data(), dqkv.data(), table.data(), s.T, shape);
  ExpectGradMatches("dproj", forward, proj, dproj, 1e-2f, 1e-2, 1e-3);

  // bf16: the rows the attention reads are the fp32 ones rounded.
  std::vector<uint16_t> qkv16(qkv.size());
  RotaryQkvForward(Span16(qkv16), proj.data(), table.data(), s.T, shape);
  RotaryQkvForward(Span32(qkv), proj.data(), table.data(), s.T, shape);
  EXPECT_EQ(qkv16, Rounded(qkv));
}

INSTANTIATE_TEST_SUITE_P(KvHeadsAndKernel, GroupedQueryAttentionTest,
                         testing::Combine(testing::Values(4, 2, 1), testing::Bool()),
                         [](const auto& info) {
                           return "kv" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_flash" : "_standard");
                         });

// With kv_heads == heads the layer only rotates: the repeated rows are the
// projection's own k and v.
TEST(GroupedQueryAttentionTest, MultiHeadKeepsTheProjectionsValues) {
  const GroupedQueryShape shape{1, 3, 2, 2, 4};
  const std::vector<float> proj = RandomVector(shape.rows() * shape.proj_width(), 5);
  std::vector<float> table(RotaryTableFloats(3, 4));
  FillRotaryTable(table.data(), 3, 4, 10000.0f);
  std::vector<float> qkv(shape.rows() * shape.qkv_width());
  RotaryQkvForward(Span32(qkv), proj.data(), table.data(), 3, shape);
  for (int64_t r = 0; r < shape.rows(); ++r) {
    for (int c = 16; c < 24; ++c) EXPECT_EQ(qkv[r * 24 + c], proj[r * 24 + c]);  // v
  }
  // Position 0 is the identity rotation.
  for (int c = 0; c < 16; ++c) EXPECT_EQ(qkv[c], proj[c]);
}

// ------------------------------------------------------------------ SwiGLU

TEST(SwigluTest, ForwardMatchesFormulaAndBackwardMatchesFiniteDifferences) {
  const int rows = 3, F = 5;
  std::vector<float> gate_up = RandomVector(rows * 2 * F, 7, 2.0f);
  const std::vector<float> dout = RandomVector(rows * F, 8);
  std::vector<float> y(rows * F);
  SwigluForward(Span32(y), gate_up.data(), rows, F);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < F; ++i) {
      const double g = gate_up[r * 2 * F + i], u = gate_up[r * 2 * F + F + i];
      EXPECT_NEAR(y[r * F + i], g / (1.0 + std::exp(-g)) * u, 1e-5);
    }
  }
  auto loss = [&] {
    SwigluForward(Span32(y), gate_up.data(), rows, F);
    return WeightedSum(y, dout);
  };
  std::vector<float> dgate_up(gate_up.size(), std::nanf(""));
  SwigluBackward(dgate_up.data(), dout.data(), gate_up.data(), rows, F);
  ExpectGradMatches("dgate_up", loss, gate_up, dgate_up, 1e-2f, 1e-3, 1e-3);
  std::vector<uint16_t> y16(rows * F);
  loss();
  SwigluForward(Span16(y16), gate_up.data(), rows, F);
  EXPECT_EQ(y16, Rounded(y));
}

// Every instruction set gives the bits of the generic variant, on widths
// that end in a partial vector, with saturating gate values (|g| > 88).
TEST(LlamaKernelsTest, EveryInstructionSetGivesTheSameBits) {
  const int rows = 3, F = 37, C = 35;
  std::vector<float> gate_up = RandomVector(rows * 2 * F, 3, 4.0f);
  gate_up[1] = 100.0f;
  gate_up[2] = -100.0f;
  gate_up[3] = -85.0f;
  const std::vector<float> dout = RandomVector(rows * F, 4);
  const std::vector<float> x = RandomVector(rows * C, 5, 3.0f);
  const std::vector<float> w = RandomVector(C, 6);
  const std::vector<float> g = RandomVector(rows * C, 7);
  struct Result {
    std::vector<float> swiglu, dgate_up, rms, rstd, dx, dw;
    std::vector<uint16_t> swiglu16, rms16, dx16;
  };
  auto run = [&](KernelIsa isa) {
    Result r;
    r.swiglu.resize(rows * F);
    r.swiglu16.resize(rows * F);
    r.dgate_up.assign(gate_up.size(), 0.0f);
    SwigluForward(isa, Span32(r.swiglu), gate_up.data(), rows, F);
    SwigluForward(isa, Span16(r.swiglu16), gate_up.data(), rows, F);
    SwigluBackward(isa, r.dgate_up.data(), dout.data(), gate_up.data(), rows, F);
    r.rms.resize(rows * C);
    r.rms16.resize(rows * C);
    r.rstd.resize(rows);
    RmsNormForward(isa, Span32(r.rms), r.rstd.data(), x.data(), w.data(), rows, C, 1e-5f);
    RmsNormForward(isa, Span16(r.rms16), r.rstd.data(), x.data(), w.data(), rows, C, 1e-5f);
    r.dx.assign(rows * C, 0.25f);
    r.dw.assign(C, 0.5f);
    r.dx16.resize(rows * C);
    RmsNormBackward(isa, r.dx.data(), Span16(r.dx16), r.dw.data(), g.data(), x.data(), w.data(),
                    r.rstd.data(), rows, C);
    return r;
  };
  const Result generic = run(KernelIsa::kGeneric);
  EXPECT_EQ(generic.swiglu16, Rounded(generic.swiglu));
  EXPECT_EQ(generic.rms16, Rounded(generic.rms));
  EXPECT_EQ(generic.dx16, Rounded(generic.dx));
  // Saturated gates: silu(100) = 100 u; silu(-100) is 0 to within
  // 100 exp(-80) |u| (the clamp); finite slopes.
  EXPECT_EQ(generic.swiglu[1], 100.0f * gate_up[F + 1]);
  EXPECT_LE(std::fabs(generic.swiglu[2]), 100.0f * std::exp(-80.0f) * std::fabs(gate_up[F + 2]));
  for (float v : generic.dgate_up) EXPECT_TRUE(std::isfinite(v));
  for (KernelIsa isa : SupportedKernelIsas()) {
    const Result r = run(isa);
    const char* name = KernelIsaName(isa);
    EXPECT_EQ(0, std::memcmp(r.swiglu.data(), generic.swiglu.data(), 4 * r.swiglu.size())) << name;
    EXPECT_EQ(r.swiglu16, generic.swiglu16) << name;
    EXPECT_EQ(0, std::memcmp(r.dgate_up.data(), generic.dgate_up.data(), 4 * r.dgate_up.size()))
        << name;
    EXPECT_EQ(0, std::memcmp(r.rms.data(), generic.rms.data(), 4 * r.rms.size())) << name;
    EXPECT_EQ(0, std::memcmp(r.rstd.data(), generic.rstd.data(), 4 * r.rstd.size())) << name;
    EXPECT_EQ(0, std::memcmp(r.dx.data(), generic.dx.data(), 4 * r.dx.size())) << name;
    EXPECT_EQ(0, std::memcmp(r.dw.data(), generic.dw.data(), 4 * r.dw.size())) << name;
  }
}

// ------------------------------------------------------------------ embedding

TEST(TokenEmbeddingTest, GathersRowsAndScattersWithRepeats) {
  const int V = 5, C = 3;
  const std::vector<int32_t> tokens = {4, 1, 4, 0};
  std::vector<float> wte = RandomVector(V * C, 9), out(tokens.size() * C);
  TokenEmbeddingForward(out.data(), tokens.data(), DtypeSpan(absl::MakeSpan(wte)), 4, C);
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < C; ++c) EXPECT_EQ(out[i * C + c], wte[tokens[i] * C + c]);
  std::vector<uint16_t> wte16 = Rounded(wte);
  TokenEmbeddingForward(out.data(), tokens.data(), DtypeSpan(absl::MakeSpan(wte16)), 4, C);
  for (int i = 0; i < 4; ++i) {
    for (int c = 0; c < C; ++c) {
      float widened;
      base::FromBf16(&widened, &wte16[tokens[i] * C + c], 1);
      EXPECT_EQ(out[i * C + c], widened);
    }
  }
  const std::vector<float> dout = RandomVector(tokens.size() * C, 10);
  std::vector<float> dwte(V * C, 0.0f);
  TokenEmbeddingBackward(dwte.data(), dout.data(), tokens.data(), 4, C);
  for (int c = 0; c < C; ++c) {
    EXPECT_FLOAT_EQ(dwte[4 * C + c], dout[0 * C + c] + dout[2 * C + c]);
    EXPECT_FLOAT_EQ(dwte[1 * C + c], dout[1 * C + c]);
    EXPECT_FLOAT_EQ(dwte[0 * C + c], dout[3 * C + c]);
    EXPECT_EQ(dwte[2 * C + c], 0.0f);
  }
}

}  // namespace
}  // namespace fsdp
