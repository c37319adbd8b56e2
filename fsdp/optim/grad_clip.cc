// File: fsdp/optim/grad_clip.cc
#include "fsdp/optim/grad_clip.h"

#include <cmath>

#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::D16;
using simd::F16;
using simd::kLanes;

// 16 double lanes, element i into lane i % 16 counted from the start of the
// span, one fixed tree at the end: the result depends on the span's values
// and length only, identical in every ISA variant and for any alignment, so
// each strategy's per-shard sums stay bit-identical ([Note: sharded norm] in
// fsdp/train/train_step.cc).
FSDP_SIMD_INLINE double SumOfSquaresBody(const float* grads, int64_t n) {
  D16 sum{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const D16 g = simd::ToDouble(simd::Load(grads + i));
    sum.lo += g.lo * g.lo;
    sum.hi += g.hi * g.hi;
  }
  if (i < n) {
    const D16 g = simd::ToDouble(simd::LoadPartial(grads + i, n - i, 0.0f));
    sum.lo += g.lo * g.lo;
    sum.hi += g.hi * g.hi;
  }
  return simd::ReduceAdd(sum);
}

FSDP_SIMD_INLINE void ScaleInPlaceBody(float* values, int64_t n, float scale) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::Store(values + i, simd::Load(values + i) * scale);
  for (; i < n; ++i) values[i] *= scale;
}

FSDP_ISA_VARIANTS(double, SumOfSquares, (const float* grads, int64_t n), (grads, n))
FSDP_ISA_VARIANTS(void, ScaleInPlace, (float* values, int64_t n, float scale), (values, n, scale))

}  // namespace

double SumOfSquares(KernelIsa isa, absl::Span<const float> grads) {
  FSDP_ISA_DISPATCH(isa, SumOfSquares, (grads.data(), static_cast<int64_t>(grads.size())));
}

void ScaleInPlace(KernelIsa isa, absl::Span<float> values, float scale) {
  if (scale == 1.0f) return;
  FSDP_ISA_DISPATCH(isa, ScaleInPlace, (values.data(), static_cast<int64_t>(values.size()), scale));
}

double SumOfSquares(absl::Span<const float> grads) { return SumOfSquares(BestKernelIsa(), grads); }

float ClipScale(double global_sq_norm, float max_norm) {
  if (max_norm <= 0.0f) return 1.0f;
  const double norm = std::sqrt(global_sq_norm);
  const double scale = max_norm / (norm + 1e-6);
  return scale < 1.0 ? static_cast<float>(scale) : 1.0f;
}

void ScaleInPlace(absl::Span<float> values, float scale) {
  ScaleInPlace(BestKernelIsa(), values, scale);
}

}  // namespace fsdp
