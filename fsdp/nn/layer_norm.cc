// File: fsdp/nn/layer_norm.cc
#include "fsdp/nn/layer_norm.h"

#include <cmath>

namespace fsdp {

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

}  // namespace fsdp
