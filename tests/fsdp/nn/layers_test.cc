// File: tests/fsdp/nn/layers_test.cc
//
// Every layer: forward against a naive double-precision reference written
// here, backward against central finite differences, and the "backward adds"
// contract (a second backward doubles the gradients).
#include <cmath>
#include <vector>

#include "fsdp/nn/attention.h"
#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/embedding.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/layer_norm.h"
#include "fsdp/nn/linear.h"
#include "fsdp/nn/residual.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/grad_check.h"

namespace fsdp {
namespace {

using testing_util::ExpectGradMatches;
using testing_util::RandomVector;
using testing_util::WeightedSum;

TEST(LinearTest, ForwardMatchesNaiveAndBackwardMatchesFiniteDifferences) {
  const int n = 5, in = 7, out = 3;
  std::vector<float> x = RandomVector(n * in, 1), w = RandomVector(out * in, 2),
                     b = RandomVector(out, 3), dout = RandomVector(n * out, 4);
  std::vector<float> y(n * out);
  LinearForward(y.data(), x.data(), w.data(), b.data(), n, in, out);
  for (int i = 0; i < n; ++i) {
    for (int o = 0; o < out; ++o) {
      double ref = b[o];
      for (int c = 0; c < in; ++c) ref += double{x[i * in + c]} * w[o * in + c];
      EXPECT_NEAR(y[i * out + o], ref, 1e-5);
    }
  }
  auto loss = [&] {
    LinearForward(y.data(), x.data(), w.data(), b.data(), n, in, out);
    return WeightedSum(y, dout);
  };
  std::vector<float> dx(x.size()), dw(w.size()), db(b.size());
  LinearBackward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), n, in, out);
  ExpectGradMatches("dx", loss, x, dx, 1e-2f, 1e-3, 1e-3);
  ExpectGradMatches("dw", loss, w, dw, 1e-2f, 1e-3, 1e-3);
  ExpectGradMatches("db", loss, b, db, 1e-2f, 1e-3, 1e-3);

  // Backward adds: running it again doubles every gradient.
  std::vector<float> dx2 = dx, dw2 = dw, db2 = db;
  LinearBackward(dx2.data(), dw2.data(), db2.data(), dout.data(), x.data(), w.data(), n, in, out);
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_FLOAT_EQ(dx2[i], 2 * dx[i]);
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_FLOAT_EQ(dw2[i], 2 * dw[i]);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_FLOAT_EQ(db2[i], 2 * db[i]);

  // kOverwrite writes dinp whatever it held (NaN here), and the parameter
  // gradients still add; the values are the zeroed kAdd's.
  std::vector<float> dx3(x.size(), std::nanf("")), dw3 = dw, db3 = db;
  LinearBackward(dx3.data(), dw3.data(), db3.data(), dout.data(), x.data(), w.data(), n, in, out,
                 GradWrite::kOverwrite);
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_EQ(dx3[i], dx[i]) << i;
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_FLOAT_EQ(dw3[i], 2 * dw[i]);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_FLOAT_EQ(db3[i], 2 * db[i]);
}

TEST(EmbeddingTest, ForwardGathersRowsAndBackwardScattersWithRepeats) {
  const int B = 2, T = 3, C = 4, V = 5;
  const std::vector<int32_t> tokens = {1, 4, 1, 0, 1, 3};  // token 1 repeats
  std::vector<float> wte = RandomVector(V * C, 5), wpe = RandomVector(T * C, 6),
                     dout = RandomVector(B * T * C, 7);
  std::vector<float> y(B * T * C);
  EmbeddingForward(y.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c)
        EXPECT_FLOAT_EQ(y[(b * T + t) * C + c], wte[tokens[b * T + t] * C + c] + wpe[t * C + c]);
  auto loss = [&] {
    EmbeddingForward(y.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return WeightedSum(y, dout);
  };
  std::vector<float> dwte(wte.size()), dwpe(wpe.size());
  EmbeddingBackward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
  ExpectGradMatches("dwte", loss, wte, dwte, 1e-2f, 1e-3, 1e-3);
  ExpectGradMatches("dwpe", loss, wpe, dwpe, 1e-2f, 1e-3, 1e-3);
}

TEST(LayerNormTest, ForwardMatchesNaiveAndBackwardMatchesFiniteDifferences) {
  const int n = 4, C = 8;
  std::vector<float> x = RandomVector(n * C, 8), w = RandomVector(C, 9),
                     b = RandomVector(C, 10), dout = RandomVector(n * C, 11);
  for (int c = 0; c < C; ++c) x[c] += 3.0f;  // a row with an offset
  std::vector<float> y(n * C), mean(n), rstd(n);
  LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, C);
  for (int i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += x[i * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (x[i * C + c] - m) * (x[i * C + c] - m);
    v /= C;
    for (int c = 0; c < C; ++c) {
      const double ref = (x[i * C + c] - m) / std::sqrt(v + 1e-5) * w[c] + b[c];
      EXPECT_NEAR(y[i * C + c], ref, 1e-5);
    }
  }
  auto loss = [&] {
    LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, C);
    return WeightedSum(y, dout);
  };
  loss();
  std::vector<float> dx(x.size()), dw(w.size()), db(b.size());
  LayerNormBackward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                    mean.data(), rstd.data(), n, C);
  ExpectGradMatches("dx", loss, x, dx, 1e-2f, 1e-2, 2e-3);
  ExpectGradMatches("dw", loss, w, dw, 1e-2f, 1e-2, 2e-3);
  ExpectGradMatches("db", loss, b, db, 1e-2f, 1e-2, 2e-3);
}

TEST(GeluTest, ForwardMatchesFormulaAndBackwardMatchesFiniteDifferences) {
  const int n = 40;
  std::vector<float> x = RandomVector(n, 12, 2.0f), dout = RandomVector(n, 13), y(n);
  GeluForward(y.data(), x.data(), n);
  for (int i = 0; i < n; ++i) {
    const double v = x[i];
    const double ref =
        0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(y[i], ref, 1e-5);
  }
  auto loss = [&] {
    GeluForward(y.data(), x.data(), n);
    return WeightedSum(y, dout);
  };
  std::vector<float> dx(n);
  GeluBackward(dx.data(), x.data(), dout.data(), n);
  ExpectGradMatches("dx", loss, x, dx, 1e-2f, 1e-2, 1e-3);
}

TEST(ResidualTest, ForwardAddsAndBackwardCopiesToBoth) {
  const int n = 6;
  std::vector<float> a = RandomVector(n, 14), b = RandomVector(n, 15),
                     dout = RandomVector(n, 16), y(n);
  ResidualForward(y.data(), a.data(), b.data(), n);
  for (int i = 0; i < n; ++i) EXPECT_FLOAT_EQ(y[i], a[i] + b[i]);
  auto loss = [&] {
    ResidualForward(y.data(), a.data(), b.data(), n);
    return WeightedSum(y, dout);
  };
  std::vector<float> da(n), db(n);
  ResidualBackward(da.data(), db.data(), dout.data(), n);
  ExpectGradMatches("da", loss, a, da, 1e-2f, 1e-3, 1e-4);
  ExpectGradMatches("db", loss, b, db, 1e-2f, 1e-3, 1e-4);
}

TEST(CrossEntropyTest, LossMatchesLogSumExpAndGradientMatchesFiniteDifferences) {
  const int n = 6, V = 9;
  std::vector<float> logits = RandomVector(n * V, 17, 2.0f);
  logits[3] = 60.0f;  // a large logit must not overflow
  const std::vector<int32_t> targets = {0, 8, 3, 3, 5, 1};
  double ref = 0;
  for (int i = 0; i < n; ++i) {
    double m = -1e30, s = 0;
    for (int v = 0; v < V; ++v) m = std::max(m, double{logits[i * V + v]});
    for (int v = 0; v < V; ++v) s += std::exp(logits[i * V + v] - m);
    ref += std::log(s) + m - logits[i * V + targets[i]];
  }
  ref /= n;
  std::vector<float> buffer = logits;
  EXPECT_NEAR(CrossEntropyForward(buffer.data(), targets.data(), n, V), ref, 1e-4);
  for (int i = 0; i < n; ++i) {
    double row_sum = 0;
    for (int v = 0; v < V; ++v) row_sum += buffer[i * V + v];
    EXPECT_NEAR(row_sum, 1.0, 1e-5);
  }
  const float scale = 3.0f;
  CrossEntropyBackward(buffer.data(), targets.data(), n, V, scale);  // now dlogits
  for (int i = 0; i < n; ++i) {  // probabilities sum to 1, the one-hot too
    double row_sum = 0;
    for (int v = 0; v < V; ++v) row_sum += buffer[i * V + v];
    EXPECT_NEAR(row_sum, 0.0, 1e-5);
  }
  logits[3] = 1.0f;  // finite differences need moderate logits
  std::vector<float> probs = logits;
  CrossEntropyForward(probs.data(), targets.data(), n, V);
  CrossEntropyBackward(probs.data(), targets.data(), n, V, scale);
  auto loss = [&] {
    std::vector<float> tmp = logits;
    return scale * double{CrossEntropyForward(tmp.data(), targets.data(), n, V)};
  };
  ExpectGradMatches("dlogits", loss, logits, probs, 1e-2f, 1e-2, 1e-4);
}

// Naive causal attention in double, straight from the definition.
std::vector<double> NaiveAttention(const std::vector<float>& qkv, int B, int T, int C, int H) {
  const int hs = C / H;
  std::vector<double> out(B * T * C, 0.0);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < T; ++t) {
        std::vector<double> w(t + 1);
        double m = -1e30;
        for (int t2 = 0; t2 <= t; ++t2) {
          double s = 0;
          for (int i = 0; i < hs; ++i) {
            s += double{qkv[(b * T + t) * 3 * C + h * hs + i]} *
                 qkv[(b * T + t2) * 3 * C + C + h * hs + i];
          }
          w[t2] = s / std::sqrt(double(hs));
          m = std::max(m, w[t2]);
        }
        double z = 0;
        for (double& v : w) z += (v = std::exp(v - m));
        for (int t2 = 0; t2 <= t; ++t2) {
          for (int i = 0; i < hs; ++i) {
            out[(b * T + t) * C + h * hs + i] +=
                w[t2] / z * qkv[(b * T + t2) * 3 * C + 2 * C + h * hs + i];
          }
        }
      }
    }
  }
  return out;
}

TEST(AttentionTest, ForwardMatchesNaiveCausalAttentionAndBackwardMatchesFiniteDifferences) {
  const int B = 2, T = 5, C = 8, H = 2;
  std::vector<float> qkv = RandomVector(B * T * 3 * C, 18), dout = RandomVector(B * T * C, 19);
  std::vector<float> out(B * T * C), probs(B * H * T * T);
  AttentionForward(out.data(), probs.data(), qkv.data(), B, T, C, H);
  const std::vector<double> ref = NaiveAttention(qkv, B, T, C, H);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 1e-5) << i;
  // The causal mask: a query never attends to a later key.
  for (int bh = 0; bh < B * H; ++bh)
    for (int t = 0; t < T; ++t)
      for (int t2 = t + 1; t2 < T; ++t2) EXPECT_EQ(probs[(bh * T + t) * T + t2], 0.0f);

  auto loss = [&] {
    AttentionForward(out.data(), probs.data(), qkv.data(), B, T, C, H);
    return WeightedSum(out, dout);
  };
  loss();
  std::vector<float> dqkv(qkv.size()), scratch(AttentionBackwardScratchFloats(T));
  AttentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), probs.data(), B, T, C,
                    H);
  ExpectGradMatches("dqkv", loss, qkv, dqkv, 1e-2f, 1e-2, 1e-3);
}

}  // namespace
}  // namespace fsdp
