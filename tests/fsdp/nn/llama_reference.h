// File: tests/fsdp/nn/llama_reference.h
//
// The Llama's loss written straight from the equations of docs/model.md
// ("Llama"), in double with naive loops: an independent reference for
// LlamaModel (nothing shared with it but the parameter layout of
// LlamaUnitSpecs). Per sequence, for t = 0..T-1:
//   x_t = E[token_t]
//   per block: h = RMSNorm(x) w1; q, k, v = h Wq^T, h Wk^T, h Wv^T;
//     q, k rotated per head (rotate-half pairing, angle t theta^(-2i/hs));
//     att_t = sum_{s<=t} softmax_s(q_t . k_s / sqrt(hs)) v_s   (kv head h / group)
//     x += att Wo^T; h = RMSNorm(x) w2; x += (silu(h Wg^T) * (h Wu^T)) Wd^T
//   logits = RMSNorm(x) wf Wlm^T; loss = mean over tokens of
//     logsumexp(logits) - logits[target]
#ifndef TESTS_FSDP_NN_LLAMA_REFERENCE_H_
#define TESTS_FSDP_NN_LLAMA_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <vector>

#include "fsdp/nn/llama_spec.h"
#include "fsdp/nn/model.h"

namespace fsdp {
namespace testing_util {

inline double NaiveLlamaLoss(const LlamaConfig& c, const std::vector<std::vector<float>>& params,
                             const Batch& batch) {
  const int C = c.d_model, H = c.heads, KV = c.kv_heads, F = c.ffn_hidden, V = c.vocab;
  const int hs = C / H, half = hs / 2, group = H / KV, T = batch.seq_len;
  using Rows = std::vector<std::vector<double>>;
  auto rms = [&](const std::vector<double>& x, const float* w) {
    double squares = 0;
    for (double v : x) squares += v * v;
    const double r = 1.0 / std::sqrt(squares / x.size() + c.norm_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
    return y;
  };
  // y = x W^T, W (out x in) row-major at w.
  auto linear = [](const std::vector<double>& x, const float* w, int out) {
    std::vector<double> y(out, 0.0);
    for (int o = 0; o < out; ++o)
      for (size_t i = 0; i < x.size(); ++i) y[o] += x[i] * w[o * x.size() + i];
    return y;
  };
  auto rope = [&](std::vector<double>& v, int heads, int t) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < half; ++i) {
        const double angle = t * std::pow(double{c.rope_theta}, -2.0 * i / hs);
        const double a = v[h * hs + i], b = v[h * hs + i + half];
        v[h * hs + i] = a * std::cos(angle) - b * std::sin(angle);
        v[h * hs + i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  };
  double total = 0;
  for (int b = 0; b < batch.batch_size; ++b) {
    Rows x(T);
    for (int t = 0; t < T; ++t) {
      const int token = batch.inputs[b * T + t];
      x[t].assign(params[0].begin() + int64_t{token} * C,
                  params[0].begin() + int64_t{token + 1} * C);
    }
    for (int l = 0; l < c.layers; ++l) {
      const float* p = params[l + 1].data();
      const float* w1 = p;
      const float* wq = w1 + C;
      const float* wk = wq + C * C;
      const float* wv = wk + KV * hs * C;
      const float* wo = wv + KV * hs * C;
      const float* w2 = wo + C * C;
      const float* wg = w2 + C;
      const float* wu = wg + F * C;
      const float* wd = wu + F * C;
      Rows q(T), k(T), v(T);
      for (int t = 0; t < T; ++t) {
        const std::vector<double> h = rms(x[t], w1);
        q[t] = linear(h, wq, C);
        k[t] = linear(h, wk, KV * hs);
        v[t] = linear(h, wv, KV * hs);
        rope(q[t], H, t);
        rope(k[t], KV, t);
      }
      for (int t = 0; t < T; ++t) {
        std::vector<double> att(C, 0.0);
        for (int h = 0; h < H; ++h) {
          const int kv = h / group;
          std::vector<double> s(t + 1);
          double m = -1e300;
          for (int u = 0; u <= t; ++u) {
            double dot = 0;
            for (int i = 0; i < hs; ++i) dot += q[t][h * hs + i] * k[u][kv * hs + i];
            s[u] = dot / std::sqrt(double(hs));
            m = std::max(m, s[u]);
          }
          double z = 0;
          for (double& e : s) z += (e = std::exp(e - m));
          for (int u = 0; u <= t; ++u)
            for (int i = 0; i < hs; ++i) att[h * hs + i] += s[u] / z * v[u][kv * hs + i];
        }
        const std::vector<double> o = linear(att, wo, C);
        for (int i = 0; i < C; ++i) x[t][i] += o[i];
      }
      for (int t = 0; t < T; ++t) {
        const std::vector<double> h = rms(x[t], w2);
        const std::vector<double> g = linear(h, wg, F), u = linear(h, wu, F);
        std::vector<double> m(F);
        for (int i = 0; i < F; ++i) m[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        const std::vector<double> d = linear(m, wd, C);
        for (int i = 0; i < C; ++i) x[t][i] += d[i];
      }
    }
    const float* head = params[c.layers + 1].data();
    for (int t = 0; t < T; ++t) {
      // A tied head reads the embedding's rows.
      const float* lm_head = c.tie_embeddings ? params[0].data() : head + C;
      const std::vector<double> logits = linear(rms(x[t], head), lm_head, V);
      const double m = *std::max_element(logits.begin(), logits.end());
      double z = 0;
      for (double l : logits) z += std::exp(l - m);
      total += m + std::log(z) - logits[batch.targets[b * T + t]];
    }
  }
  return total / (double{1} * batch.batch_size * T);
}

}  // namespace testing_util
}  // namespace fsdp

#endif  // TESTS_FSDP_NN_LLAMA_REFERENCE_H_
