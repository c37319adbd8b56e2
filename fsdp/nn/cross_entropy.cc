// File: fsdp/nn/cross_entropy.cc
#include "fsdp/nn/cross_entropy.h"

#include <cmath>

namespace fsdp {

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

}  // namespace fsdp
