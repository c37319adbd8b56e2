// File: tests/fsdp/nn/reference_kernels.cc
//
// Copied from the sources at the commit before vectorization; only AdamW and
// the sum of squares take pointers instead of spans.
#include "tests/fsdp/nn/reference_kernels.h"

#include <cblas.h>

#include <cmath>

#include "fsdp/nn/layer_norm.h"

namespace fsdp {
namespace reference {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// tanh(u) = 1 - 2 / (exp(2u) + 1). glibc's tanhf goes through expm1f and was
// ~25% of a GPT step in a profile; expf is several times cheaper. Absolute
// error stays ~1e-7 (relative error grows only for |u| < 1e-3, where GELU's
// 0.5 x (1 + tanh) is dominated by the 1). Saturates correctly: exp
// overflowing to inf gives 1, underflowing to 0 gives -1.
inline float Tanh(float u) { return 1.0f - 2.0f / (std::exp(2.0f * u) + 1.0f); }
}  // namespace

void GeluForward(float* out, const float* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + Tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
  }
}

void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float th = Tanh(u);
    const float sech2 = 1.0f - th * th;
    const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * du_dx;
    dinp[i] += grad * dout[i];
  }
}



void LayerNormForward(float* out, float* mean, float* rstd, const float* inp,
                      const float* weight, const float* bias, int n, int channels) {
  for (int i = 0; i < n; ++i) {
    const float* x = inp + static_cast<long>(i) * channels;
    float* o = out + static_cast<long>(i) * channels;
    // Two passes in double: the mean first, then the variance around it, so
    // rows with a large offset do not lose precision.
    double sum = 0.0;
    for (int c = 0; c < channels; ++c) sum += x[c];
    const float m = static_cast<float>(sum / channels);
    double var = 0.0;
    for (int c = 0; c < channels; ++c) {
      const double d = x[c] - m;
      var += d * d;
    }
    const float s = 1.0f / std::sqrt(static_cast<float>(var / channels) + kLayerNormEpsilon);
    for (int c = 0; c < channels; ++c) o[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[i] = m;
    rstd[i] = s;
  }
}

// With xhat = (x - mean) * rstd and g = dout * weight:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, const float* mean,
                       const float* rstd, int n, int channels) {
  for (int i = 0; i < n; ++i) {
    const float* x = inp + static_cast<long>(i) * channels;
    const float* d = dout + static_cast<long>(i) * channels;
    float* dx = dinp + static_cast<long>(i) * channels;
    const float m = mean[i];
    const float s = rstd[i];
    float g_mean = 0.0f;
    float g_xhat_mean = 0.0f;
    for (int c = 0; c < channels; ++c) {
      const float xhat = (x[c] - m) * s;
      const float g = d[c] * weight[c];
      g_mean += g;
      g_xhat_mean += g * xhat;
    }
    g_mean /= channels;
    g_xhat_mean /= channels;
    for (int c = 0; c < channels; ++c) {
      const float xhat = (x[c] - m) * s;
      const float g = d[c] * weight[c];
      dbias[c] += d[c];
      dweight[c] += xhat * d[c];
      dx[c] += s * (g - g_mean - xhat * g_xhat_mean);
    }
  }
}


void AttentionForward(float* out, float* probs, const float* qkv, int batch, int seq_len,
                      int channels, int heads) {
  const int T = seq_len;
  const int C = channels;
  const int hs = C / heads;
  const int ld_qkv = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      const float* q = qkv + static_cast<long>(b) * T * ld_qkv + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* p = probs + (static_cast<long>(b) * heads + h) * T * T;
      // scores[T, T] = scale * q[T, hs] @ k[T, hs]^T (the masked upper
      // triangle is computed too: one sgemm beats T small ones at these sizes).
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, ld_qkv, k, ld_qkv,
                  0.0f, p, T);
      for (int t = 0; t < T; ++t) {
        float* row = p + static_cast<long>(t) * T;
        float max_score = row[0];
        for (int t2 = 1; t2 <= t; ++t2) max_score = row[t2] > max_score ? row[t2] : max_score;
        float sum = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) {
          row[t2] = std::exp(row[t2] - max_score);
          sum += row[t2];
        }
        const float inv_sum = 1.0f / sum;
        for (int t2 = 0; t2 <= t; ++t2) row[t2] *= inv_sum;
        for (int t2 = t + 1; t2 < T; ++t2) row[t2] = 0.0f;
      }
      // out[T, hs] (leading dimension C) = probs[T, T] @ v[T, hs]
      float* o = out + static_cast<long>(b) * T * C + h * hs;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, v, ld_qkv,
                  0.0f, o, C);
    }
  }
}

void AttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                       const float* probs, int batch, int seq_len, int channels, int heads) {
  const int T = seq_len;
  const int C = channels;
  const int hs = C / heads;
  const int ld_qkv = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  float* dp = scratch;  // (T, T): d probs, then d scores in place
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      const long qkv_offset = static_cast<long>(b) * T * ld_qkv + h * hs;
      const float* q = qkv + qkv_offset;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + qkv_offset;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* p = probs + (static_cast<long>(b) * heads + h) * T * T;
      const float* d_o = dout + static_cast<long>(b) * T * C + h * hs;
      // dv[T, hs] += probs^T[T, T] @ dout[T, hs]
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, d_o, C, 1.0f,
                  dv, ld_qkv);
      // dprobs[T, T] = dout[T, hs] @ v[T, hs]^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, d_o, C, v, ld_qkv,
                  0.0f, dp, T);
      // Softmax backward per row: dscore = p * (dp - sum_j p_j dp_j). Masked
      // entries have p = 0, so their dscore is 0 without a branch.
      for (int t = 0; t < T; ++t) {
        const float* p_row = p + static_cast<long>(t) * T;
        float* d_row = dp + static_cast<long>(t) * T;
        float dot = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) dot += p_row[t2] * d_row[t2];
        for (int t2 = 0; t2 <= t; ++t2) d_row[t2] = p_row[t2] * (d_row[t2] - dot);
        for (int t2 = t + 1; t2 < T; ++t2) d_row[t2] = 0.0f;
      }
      // scores = scale * q k^T:  dq += scale * dscore @ k,  dk += scale * dscore^T @ q
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dp, T, k, ld_qkv,
                  1.0f, dq, ld_qkv);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dp, T, q, ld_qkv,
                  1.0f, dk, ld_qkv);
    }
  }
}

float CrossEntropyForward(float* logits_to_probs, const int32_t* targets, int n, int vocab) {
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    float* row = logits_to_probs + static_cast<long>(i) * vocab;
    float max_logit = row[0];
    for (int v = 1; v < vocab; ++v) max_logit = row[v] > max_logit ? row[v] : max_logit;
    // loss_i = log(sum_v exp(l_v - max)) - (l_target - max), read before the
    // row is overwritten so a tiny probability never becomes log(0).
    const double target_shifted = static_cast<double>(row[targets[i]]) - max_logit;
    double sum = 0.0;
    for (int v = 0; v < vocab; ++v) {
      row[v] = std::exp(row[v] - max_logit);
      sum += row[v];
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int v = 0; v < vocab; ++v) row[v] *= inv_sum;
    total += std::log(sum) - target_shifted;
  }
  return static_cast<float>(total / n);
}

void CrossEntropyBackward(float* probs_to_dlogits, const int32_t* targets, int n, int vocab,
                          float loss_scale) {
  const float factor = loss_scale / static_cast<float>(n);
  for (int i = 0; i < n; ++i) {
    float* row = probs_to_dlogits + static_cast<long>(i) * vocab;
    row[targets[i]] -= 1.0f;
    for (int v = 0; v < vocab; ++v) row[v] *= factor;
  }
}



void ResidualForward(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void ResidualBackward(float* da, float* db, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}



void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                      int batch, int seq_len, int channels) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq_len; ++t) {
      const long bt = static_cast<long>(b) * seq_len + t;
      float* o = out + bt * channels;
      const float* token_row = wte + static_cast<long>(tokens[bt]) * channels;
      const float* position_row = wpe + static_cast<long>(t) * channels;
      for (int c = 0; c < channels; ++c) o[c] = token_row[c] + position_row[c];
    }
  }
}

void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                       int batch, int seq_len, int channels) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq_len; ++t) {
      const long bt = static_cast<long>(b) * seq_len + t;
      const float* d = dout + bt * channels;
      float* token_row = dwte + static_cast<long>(tokens[bt]) * channels;
      float* position_row = dwpe + static_cast<long>(t) * channels;
      for (int c = 0; c < channels; ++c) {
        token_row[c] += d[c];
        position_row[c] += d[c];
      }
    }
  }
}


void AdamWUpdate(const AdamWOptions& o, float lr, int64_t step, float* params,
                 const float* grads, float* m, float* v, int64_t n) {
  const float correction1 = 1.0f - static_cast<float>(std::pow(double{o.beta1}, double(step)));
  const float correction2 = 1.0f - static_cast<float>(std::pow(double{o.beta2}, double(step)));
  for (int64_t i = 0; i < n; ++i) {
    const float g = grads[i];
    const float mi = o.beta1 * m[i] + (1.0f - o.beta1) * g;
    const float vi = o.beta2 * v[i] + (1.0f - o.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float m_hat = mi / correction1;
    const float v_hat = vi / correction2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + o.eps) + o.weight_decay * params[i]);
  }
}

double SumOfSquares(const float* grads, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(grads[i]) * grads[i];
  return sum;
}

}  // namespace reference
}  // namespace fsdp
