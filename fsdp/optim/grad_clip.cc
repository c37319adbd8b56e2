// File: fsdp/optim/grad_clip.cc
#include "fsdp/optim/grad_clip.h"

#include <cmath>

namespace fsdp {

double SumOfSquares(absl::Span<const float> grads) {
  double sum = 0.0;
  for (float g : grads) sum += static_cast<double>(g) * g;
  return sum;
}

float ClipScale(double global_sq_norm, float max_norm) {
  if (max_norm <= 0.0f) return 1.0f;
  const double norm = std::sqrt(global_sq_norm);
  const double scale = max_norm / (norm + 1e-6);
  return scale < 1.0 ? static_cast<float>(scale) : 1.0f;
}

void ScaleInPlace(absl::Span<float> values, float scale) {
  if (scale == 1.0f) return;
  for (float& v : values) v *= scale;
}

}  // namespace fsdp
