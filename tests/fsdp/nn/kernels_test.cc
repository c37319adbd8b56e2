// File: tests/fsdp/nn/kernels_test.cc
//
// The vectorized element-wise kernels, for every ISA variant this CPU runs
// (parameterized over SupportedKernelIsas()):
//  - against straightforward double-precision references written here,
//    within the tolerance stated at each check;
//  - bit for bit against the kGeneric variant ([Note: ISA-independent
//    results] in fsdp/nn/simd.h), and against a copy of the inputs placed at
//    another alignment;
//  - the exact kernels (residual, embedding, AdamW) bit for bit against the
//    old scalar code (tests/fsdp/nn/reference_kernels.h).
// Sizes include 1, non-multiples of the 16-lane width and more than one block.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "fsdp/nn/attention.h"
#include "base/bf16_convert.h"
#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/embedding.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/kernel_isa.h"
#include "fsdp/nn/layer_norm.h"
#include "fsdp/nn/residual.h"
#include "fsdp/optim/adamw.h"
#include "fsdp/optim/grad_clip.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/grad_check.h"
#include "tests/fsdp/nn/reference_kernels.h"

namespace fsdp {
namespace {

using testing_util::RandomVector;

const std::vector<int> kSizes = {1, 7, 15, 16, 17, 33, 512, 1027};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The same values starting `shift` floats into a larger buffer, so the
// kernel sees another alignment.
struct Shifted {
  Shifted(const std::vector<float>& v, int shift) : storage(v.size() + shift), shift(shift) {
    std::copy(v.begin(), v.end(), storage.begin() + shift);
  }
  float* data() { return storage.data() + shift; }
  std::vector<float> values() const { return {storage.begin() + shift, storage.end()}; }
  std::vector<float> storage;
  int shift;
};

class KernelsTest : public testing::TestWithParam<KernelIsa> {
 protected:
  KernelIsa isa() const { return GetParam(); }
};

double GeluRef(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

double GeluGradRef(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  const double th = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

TEST_P(KernelsTest, GeluMatchesDoubleReference) {
  for (int n : kSizes) {
    std::vector<float> x = RandomVector(n, 11 + n, 3.0f);
    if (n > 4) x[0] = 0.0f, x[1] = 12.0f, x[2] = -12.0f, x[3] = 1e-4f;
    const std::vector<float> dout = RandomVector(n, 12 + n);
    const std::vector<float> dinp0 = RandomVector(n, 13 + n);
    std::vector<float> y(n), dinp = dinp0;
    GeluForward(isa(), y.data(), x.data(), n);
    GeluBackward(isa(), dinp.data(), x.data(), dout.data(), n);
    for (int i = 0; i < n; ++i) {
      // tanh is within ~2e-7 absolute, scaled by 0.5 |x| in the forward.
      const double scale = std::max(1.0, std::fabs(double{x[i]}));
      EXPECT_NEAR(y[i], GeluRef(x[i]), 1e-6 * scale) << "n=" << n << " x=" << x[i];
      EXPECT_NEAR(dinp[i], dinp0[i] + GeluGradRef(x[i]) * dout[i], 4e-6 * scale * scale)
          << "n=" << n << " x=" << x[i];
    }
    std::vector<float> y_generic(n), dinp_generic = dinp0;
    GeluForward(KernelIsa::kGeneric, y_generic.data(), x.data(), n);
    GeluBackward(KernelIsa::kGeneric, dinp_generic.data(), x.data(), dout.data(), n);
    EXPECT_TRUE(SameBits(y, y_generic)) << "n=" << n;
    EXPECT_TRUE(SameBits(dinp, dinp_generic)) << "n=" << n;
    Shifted xs(x, 3), ys(y, 1);
    GeluForward(isa(), ys.data(), xs.data(), n);
    EXPECT_TRUE(SameBits(ys.values(), y)) << "n=" << n;
    // Overwriting equals adding into zeros.
    std::vector<float> added(n, 0.0f), written = RandomVector(n, 14 + n);
    GeluBackward(isa(), added.data(), x.data(), dout.data(), n);
    GeluBackwardOverwrite(isa(), written.data(), x.data(), dout.data(), n);
    EXPECT_TRUE(SameBits(written, added)) << "n=" << n;
  }
}

TEST_P(KernelsTest, LayerNormMatchesDoubleReference) {
  const int rows = 3;
  for (int C : kSizes) {
    std::vector<float> x = RandomVector(rows * C, 21 + C, 2.0f);
    for (int c = 0; c < C; ++c) x[C + c] += 100.0f;  // a row with a large offset
    const std::vector<float> w = RandomVector(C, 22 + C), b = RandomVector(C, 23 + C),
                             dout = RandomVector(rows * C, 24 + C);
    std::vector<float> y(rows * C), mean(rows), rstd(rows);
    LayerNormForward(isa(), y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                     rows, C);
    std::vector<float> dx = RandomVector(rows * C, 25 + C), dw = RandomVector(C, 26 + C),
                       db = RandomVector(C, 27 + C);
    const std::vector<float> dx0 = dx, dw0 = dw, db0 = db;
    LayerNormBackward(isa(), dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                      mean.data(), rstd.data(), rows, C);
    std::vector<double> dw_ref(dw0.begin(), dw0.end()), db_ref(db0.begin(), db0.end());
    for (int r = 0; r < rows; ++r) {
      const float* xr = x.data() + r * C;
      const float* dr = dout.data() + r * C;
      double m = 0.0, var = 0.0;
      for (int c = 0; c < C; ++c) m += xr[c];
      m /= C;
      for (int c = 0; c < C; ++c) var += (xr[c] - m) * (xr[c] - m);
      const double s = 1.0 / std::sqrt(var / C + kLayerNormEpsilon);
      EXPECT_NEAR(mean[r], m, 1e-6 * (1.0 + std::fabs(m))) << "C=" << C;
      EXPECT_NEAR(rstd[r], s, 1e-5 * s) << "C=" << C;
      double g_mean = 0.0, g_xhat_mean = 0.0;
      for (int c = 0; c < C; ++c) {
        const double xhat = (xr[c] - m) * s;
        g_mean += double{dr[c]} * w[c] / C;
        g_xhat_mean += double{dr[c]} * w[c] * xhat / C;
        // Outputs are O(|w| + |b|): float rounding of x - mean and rstd.
        EXPECT_NEAR(y[r * C + c], xhat * w[c] + b[c], 2e-5 * (1.0 + std::fabs(xhat * w[c])))
            << "C=" << C << " row " << r;
      }
      for (int c = 0; c < C; ++c) {
        const double xhat = (xr[c] - m) * s;
        const double g = double{dr[c]} * w[c];
        const double dx_ref = dx0[r * C + c] + s * (g - g_mean - xhat * g_xhat_mean);
        EXPECT_NEAR(dx[r * C + c], dx_ref, 1e-4 * (1.0 + std::fabs(s * g))) << "C=" << C;
        dw_ref[c] += xhat * dr[c];
        db_ref[c] += dr[c];
      }
    }
    for (int c = 0; c < C; ++c) {
      EXPECT_NEAR(dw[c], dw_ref[c], 1e-4 * (1.0 + std::fabs(dw_ref[c]))) << "C=" << C;
      EXPECT_NEAR(db[c], db_ref[c], 1e-5 * (1.0 + std::fabs(db_ref[c]))) << "C=" << C;
    }
    std::vector<float> y_g(rows * C), mean_g(rows), rstd_g(rows), dx_g = dx0, dw_g = dw0,
                                                                  db_g = db0;
    LayerNormForward(KernelIsa::kGeneric, y_g.data(), mean_g.data(), rstd_g.data(), x.data(),
                     w.data(), b.data(), rows, C);
    LayerNormBackward(KernelIsa::kGeneric, dx_g.data(), dw_g.data(), db_g.data(), dout.data(),
                      x.data(), w.data(), mean_g.data(), rstd_g.data(), rows, C);
    EXPECT_TRUE(SameBits(y, y_g) && SameBits(mean, mean_g) && SameBits(rstd, rstd_g)) << C;
    EXPECT_TRUE(SameBits(dx, dx_g) && SameBits(dw, dw_g) && SameBits(db, db_g)) << C;
    Shifted xs(x, 1), ys(y, 2);
    LayerNormForward(isa(), ys.data(), mean_g.data(), rstd_g.data(), xs.data(), w.data(),
                     b.data(), rows, C);
    EXPECT_TRUE(SameBits(ys.values(), y)) << "C=" << C;
  }
}

// Causal attention in double: probs, out, and the gradient of
// sum(out * dout) with respect to qkv.
void AttentionRef(const std::vector<float>& qkv, const std::vector<float>& dout, int B, int T,
                  int C, int H, std::vector<double>* probs, std::vector<double>* out,
                  std::vector<double>* dqkv) {
  const int hs = C / H;
  const double scale = 1.0 / std::sqrt(double(hs));
  probs->assign(static_cast<size_t>(B) * H * T * T, 0.0);
  out->assign(static_cast<size_t>(B) * T * C, 0.0);
  dqkv->assign(qkv.size(), 0.0);
  auto at = [&](int b, int t, int part, int h, int c) {
    return static_cast<size_t>((b * T + t) * 3 * C + part * C + h * hs + c);
  };
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      double* p = probs->data() + static_cast<size_t>(b * H + h) * T * T;
      for (int t = 0; t < T; ++t) {
        double max = -1e300, sum = 0.0;
        for (int t2 = 0; t2 <= t; ++t2) {
          double s = 0.0;
          for (int c = 0; c < hs; ++c) s += double{qkv[at(b, t, 0, h, c)]} * qkv[at(b, t2, 1, h, c)];
          p[t * T + t2] = s * scale;
          max = std::max(max, p[t * T + t2]);
        }
        for (int t2 = 0; t2 <= t; ++t2) sum += p[t * T + t2] = std::exp(p[t * T + t2] - max);
        for (int t2 = 0; t2 <= t; ++t2) p[t * T + t2] /= sum;
        for (int c = 0; c < hs; ++c) {
          double o = 0.0;
          for (int t2 = 0; t2 <= t; ++t2) o += p[t * T + t2] * qkv[at(b, t2, 2, h, c)];
          (*out)[(b * T + t) * C + h * hs + c] = o;
        }
      }
      for (int t = 0; t < T; ++t) {
        const float* d = dout.data() + (b * T + t) * C + h * hs;
        std::vector<double> dp(t + 1);
        double dot = 0.0;
        for (int t2 = 0; t2 <= t; ++t2) {
          for (int c = 0; c < hs; ++c) {
            dp[t2] += double{d[c]} * qkv[at(b, t2, 2, h, c)];
            (*dqkv)[at(b, t2, 2, h, c)] += p[t * T + t2] * d[c];
          }
          dot += p[t * T + t2] * dp[t2];
        }
        for (int t2 = 0; t2 <= t; ++t2) {
          const double ds = p[t * T + t2] * (dp[t2] - dot) * scale;
          for (int c = 0; c < hs; ++c) {
            (*dqkv)[at(b, t, 0, h, c)] += ds * qkv[at(b, t2, 1, h, c)];
            (*dqkv)[at(b, t2, 1, h, c)] += ds * qkv[at(b, t, 0, h, c)];
          }
        }
      }
    }
  }
}

TEST_P(KernelsTest, AttentionMatchesDoubleReference) {
  const int B = 2, C = 8, H = 2;
  // 129 and 300: more than one block of causal rows, with a short last one.
  for (int T : {1, 5, 16, 17, 40, 129, 300}) {
    const std::vector<float> qkv = RandomVector(B * T * 3 * C, 31 + T, 1.5f),
                             dout = RandomVector(B * T * C, 32 + T);
    // NaN everywhere: the forward and the backward must write every element.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> out(B * T * C, nan), probs(B * H * T * T, nan), dqkv(qkv.size(), nan),
        scratch(AttentionBackwardScratchFloats(T), nan);
    AttentionForward(isa(), out.data(), probs.data(), qkv.data(), B, T, C, H);
    AttentionBackward(isa(), dqkv.data(), scratch.data(), dout.data(), qkv.data(), probs.data(),
                      B, T, C, H);
    std::vector<double> probs_ref, out_ref, dqkv_ref;
    AttentionRef(qkv, dout, B, T, C, H, &probs_ref, &out_ref, &dqkv_ref);
    // Probabilities within 1e-6 absolute (exp within 2 ulp, float sums of <= 40
    // terms); out and dqkv are sums of T such terms times O(1) values.
    for (size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(probs[i], probs_ref[i], 1e-6) << T;
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], out_ref[i], 1e-5) << T;
    for (size_t i = 0; i < dqkv.size(); ++i) EXPECT_NEAR(dqkv[i], dqkv_ref[i], 2e-5) << T;
    std::vector<float> out_g(out.size()), probs_g(probs.size()), dqkv_g(qkv.size());
    AttentionForward(KernelIsa::kGeneric, out_g.data(), probs_g.data(), qkv.data(), B, T, C, H);
    AttentionBackward(KernelIsa::kGeneric, dqkv_g.data(), scratch.data(), dout.data(),
                      qkv.data(), probs_g.data(), B, T, C, H);
    EXPECT_TRUE(SameBits(probs, probs_g) && SameBits(out, out_g) && SameBits(dqkv, dqkv_g)) << T;
  }
}

// The bf16 compute mode's attention (the CPU's best variant) against the
// double reference on the same bf16 values of qkv and dout: probabilities
// within their bf16 rounding, out and dqkv within a few bf16 roundings of
// their norm (its products round p, and the backward's d scores, to bf16;
// the softmax backward reads the saved bf16 p). Every output is first NaN:
// each must be written. 129 and 300 rows: more than one causal row block.
TEST(Bf16AttentionTest, MatchesDoubleReferenceWithinBf16Rounding) {
  const int B = 2, C = 16, H = 2;
  for (int T : {1, 5, 17, 129, 300}) {
    std::vector<float> qkv = RandomVector(B * T * 3 * C, 41 + T, 1.5f),
                       dout = RandomVector(B * T * C, 42 + T);
    std::vector<uint16_t> qkv16(qkv.size()), dout16(dout.size());
    base::ToBf16(qkv16.data(), qkv.data(), static_cast<int64_t>(qkv.size()));
    base::ToBf16(dout16.data(), dout.data(), static_cast<int64_t>(dout.size()));
    base::FromBf16(qkv.data(), qkv16.data(), static_cast<int64_t>(qkv.size()));
    base::FromBf16(dout.data(), dout16.data(), static_cast<int64_t>(dout.size()));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> out(B * T * C), dqkv(qkv.size(), nan),
        scratch(AttentionBf16ScratchFloats(T, C / H), nan);
    std::vector<uint16_t> probs16(static_cast<size_t>(B) * H * T * T, 0x7fc0),  // NaN
        scratch16(AttentionBf16ScratchElements(T, C / H), 0x7fc0), out16(out.size(), 0x7fc0);
    AttentionForwardBf16(out16.data(), probs16.data(), scratch.data(), scratch16.data(),
                         qkv16.data(), B, T, C, H);
    base::FromBf16(out.data(), out16.data(), static_cast<int64_t>(out.size()));
    AttentionBackwardBf16(dqkv.data(), scratch.data(), scratch16.data(), dout16.data(),
                          qkv16.data(), probs16.data(), B, T, C, H);
    std::vector<double> probs_ref, out_ref, dqkv_ref;
    AttentionRef(qkv, dout, B, T, C, H, &probs_ref, &out_ref, &dqkv_ref);
    // The saved probabilities: block by block ([Note: causal row blocks]),
    // row t of a block starting at r0 at (r0 * T + (t - r0) * r1).
    for (int bh = 0; bh < B * H; ++bh) {
      for (int r0 = 0; r0 < T; r0 += 128) {
        const int r1 = std::min(T, r0 + 128);
        for (int t = r0; t < r1; ++t) {
          for (int t2 = 0; t2 <= t; ++t2) {
            float p;
            base::FromBf16(&p, &probs16[static_cast<size_t>(bh) * T * T + r0 * T + (t - r0) * r1 + t2],
                     1);
            const double ref = probs_ref[static_cast<size_t>(bh) * T * T + t * T + t2];
            ASSERT_NEAR(p, ref, 1e-6 + ref / 128) << "T=" << T << " row " << t << " key " << t2;
          }
        }
      }
    }
    auto relative_l2 = [](const std::vector<float>& x, const std::vector<double>& ref) {
      double diff = 0, norm = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        diff += (x[i] - ref[i]) * (x[i] - ref[i]);
        norm += ref[i] * ref[i];
      }
      return std::sqrt(diff / norm);  // NaN, and failing, if any x is NaN
    };
    EXPECT_LT(relative_l2(out, out_ref), 1e-2) << "T=" << T;
    EXPECT_LT(relative_l2(dqkv, dqkv_ref), 2e-2) << "T=" << T;
  }
}

TEST_P(KernelsTest, CrossEntropyMatchesDoubleReference) {
  const int n = 3;
  for (int V : {1, 7, 17, 100, 1027, 8192}) {
    std::vector<float> logits = RandomVector(n * V, 41 + V, 3.0f);
    const std::vector<int32_t> targets = {0, V - 1, V / 2};
    std::vector<float> buffer = logits;
    const float loss = CrossEntropyForward(isa(), buffer.data(), targets.data(), n, V);
    const std::vector<float> probs = buffer;
    const float loss_scale = 0.5f;
    CrossEntropyBackward(isa(), buffer.data(), targets.data(), n, V, loss_scale);
    double loss_ref = 0.0;
    for (int i = 0; i < n; ++i) {
      const float* row = logits.data() + i * V;
      double max = row[0], sum = 0.0;
      for (int v = 0; v < V; ++v) max = std::max(max, double{row[v]});
      for (int v = 0; v < V; ++v) sum += std::exp(row[v] - max);
      loss_ref += (std::log(sum) - (row[targets[i]] - max)) / n;
      for (int v = 0; v < V; ++v) {
        const double p = std::exp(row[v] - max) / sum;
        // Probabilities within 1e-6 relative plus 1e-9 absolute: exp within
        // 2 ulp, the row sum in 16 float lanes.
        EXPECT_NEAR(probs[i * V + v], p, 1e-6 * p + 1e-9) << "V=" << V;
        const double d = loss_scale * (p - (v == targets[i] ? 1.0 : 0.0)) / n;
        EXPECT_NEAR(buffer[i * V + v], d, 1e-6 * std::fabs(d) + 1e-9) << "V=" << V;
      }
    }
    EXPECT_NEAR(loss, loss_ref, 1e-5 * (1.0 + loss_ref)) << "V=" << V;
    std::vector<float> generic = logits;
    const float loss_g = CrossEntropyForward(KernelIsa::kGeneric, generic.data(), targets.data(), n, V);
    EXPECT_EQ(std::memcmp(&loss, &loss_g, sizeof(loss)), 0) << "V=" << V;
    EXPECT_TRUE(SameBits(probs, generic)) << "V=" << V;
    Shifted shifted(logits, 1);
    CrossEntropyForward(isa(), shifted.data(), targets.data(), n, V);
    EXPECT_TRUE(SameBits(shifted.values(), probs)) << "V=" << V;
  }
}

TEST_P(KernelsTest, ResidualAndEmbeddingEqualTheScalarCodeBitForBit) {
  for (int n : kSizes) {
    const std::vector<float> a = RandomVector(n, 51 + n), b = RandomVector(n, 52 + n),
                             d = RandomVector(n, 53 + n);
    std::vector<float> out(n), out_ref(n), da = a, db = b, da_ref = a, db_ref = b;
    ResidualForward(isa(), out.data(), a.data(), b.data(), n);
    reference::ResidualForward(out_ref.data(), a.data(), b.data(), n);
    ResidualBackward(isa(), da.data(), db.data(), d.data(), n);
    reference::ResidualBackward(da_ref.data(), db_ref.data(), d.data(), n);
    EXPECT_TRUE(SameBits(out, out_ref) && SameBits(da, da_ref) && SameBits(db, db_ref)) << n;
    for (int i = 0; i < n; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
  }
  const int B = 2, T = 3, V = 4;
  for (int C : {1, 17, 40}) {
    const std::vector<int32_t> tokens = {1, 3, 1, 0, 1, 2};  // token 1 repeats
    const std::vector<float> wte = RandomVector(V * C, 54), wpe = RandomVector(T * C, 55),
                             dout = RandomVector(B * T * C, 56);
    std::vector<float> out(B * T * C), out_ref(B * T * C);
    EmbeddingForward(isa(), out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    reference::EmbeddingForward(out_ref.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    EXPECT_TRUE(SameBits(out, out_ref)) << C;
    std::vector<float> dwte = wte, dwpe = wpe, dwte_ref = wte, dwpe_ref = wpe;
    EmbeddingBackward(isa(), dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
    reference::EmbeddingBackward(dwte_ref.data(), dwpe_ref.data(), dout.data(), tokens.data(), B,
                                 T, C);
    EXPECT_TRUE(SameBits(dwte, dwte_ref) && SameBits(dwpe, dwpe_ref)) << C;
    EXPECT_EQ(out[C], wte[3 * C] + wpe[C]);  // (b 0, t 1) reads token 3
  }
}

TEST_P(KernelsTest, AdamWEqualsTheScalarCodeBitForBitAtAnyOffset) {
  AdamWOptions o;
  o.weight_decay = 0.1f;
  for (int n : kSizes) {
    std::vector<float> p = RandomVector(n, 61 + n), m(n), v(n);
    std::vector<float> p_ref = p, m_ref = m, v_ref = v;
    for (int step = 1; step <= 3; ++step) {
      const std::vector<float> g = RandomVector(n, 62 + n + step);
      AdamWUpdate(isa(), o, 1e-3f, step, absl::MakeSpan(p), g, absl::MakeSpan(m),
                  absl::MakeSpan(v));
      reference::AdamWUpdate(o, 1e-3f, step, p_ref.data(), g.data(), m_ref.data(), v_ref.data(),
                             n);
    }
    EXPECT_TRUE(SameBits(p, p_ref) && SameBits(m, m_ref) && SameBits(v, v_ref)) << n;
    // One element of the formula in double, for the meaning of the result.
    std::vector<float> q = {0.5f}, qm = {0.0f}, qv = {0.0f};
    const std::vector<float> qg = {0.25f};
    AdamWUpdate(isa(), o, 1e-3f, 1, absl::MakeSpan(q), qg, absl::MakeSpan(qm), absl::MakeSpan(qv));
    EXPECT_NEAR(q[0], 0.5 - 1e-3 * (0.25 / (0.25 + 1e-8) + 0.1 * 0.5), 1e-7);
  }
}

TEST_P(KernelsTest, SumOfSquaresMatchesDoubleAndDependsOnValuesOnly) {
  for (int n : kSizes) {
    const std::vector<float> g = RandomVector(n, 71 + n);
    const double sum = SumOfSquares(isa(), g);
    long double ref = 0.0L;
    for (float x : g) ref += static_cast<long double>(x) * x;
    EXPECT_NEAR(sum, static_cast<double>(ref), 1e-14 * static_cast<double>(ref)) << n;
    const double generic = SumOfSquares(KernelIsa::kGeneric, g);
    EXPECT_EQ(std::memcmp(&sum, &generic, sizeof(sum)), 0) << n;
    // Its two kernels ([Note: exact sum of squares]) alike in every variant.
    const float max_abs = MaxAbs(isa(), g);
    float max_ref = 0.0f;
    for (float x : g) max_ref = std::max(max_ref, std::fabs(x));
    EXPECT_EQ(max_abs, max_ref) << n;
    EXPECT_EQ(MaxAbs(KernelIsa::kGeneric, g), max_abs) << n;
    if (max_abs > 0.0f) {
      const int exponent = SquareUnitExponent(max_abs);
      EXPECT_TRUE(SumOfSquareUnits(isa(), g, exponent) ==
                  SumOfSquareUnits(KernelIsa::kGeneric, g, exponent))
          << n;
    }
    Shifted shifted(g, 1);
    const double moved = SumOfSquares(isa(), absl::MakeConstSpan(shifted.data(), n));
    EXPECT_EQ(std::memcmp(&sum, &moved, sizeof(sum)), 0) << n;
    std::vector<float> scaled = g, scaled_ref = g;
    ScaleInPlace(isa(), absl::MakeSpan(scaled), 0.3f);
    for (float& x : scaled_ref) x *= 0.3f;
    EXPECT_TRUE(SameBits(scaled, scaled_ref)) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(EverySupportedIsa, KernelsTest, testing::ValuesIn(SupportedKernelIsas()),
                         [](const testing::TestParamInfo<KernelIsa>& info) {
                           switch (info.param) {
                             case KernelIsa::kAvx512:
                               return std::string("avx512f");
                             case KernelIsa::kAvx2:
                               return std::string("avx2");
                             case KernelIsa::kGeneric:
                               break;
                           }
                           return std::string("generic");
                         });

}  // namespace
}  // namespace fsdp
