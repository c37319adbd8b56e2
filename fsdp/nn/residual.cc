// File: fsdp/nn/residual.cc
#include "fsdp/nn/residual.h"

#include "base/parallel_for.h"
#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::kLanes;

// Exact adds: every variant equals the scalar loop bit for bit.
FSDP_SIMD_INLINE void ResidualForwardBody(float* out, const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::Store(out + i, simd::Load(a + i) + simd::Load(b + i));
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

FSDP_SIMD_INLINE void ResidualBackwardBody(float* da, float* db, const float* dout, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const simd::F16 d = simd::Load(dout + i);
    simd::Store(da + i, simd::Load(da + i) + d);
    simd::Store(db + i, simd::Load(db + i) + d);
  }
  for (; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

FSDP_ISA_VARIANTS(void, ResidualForward, (float* out, const float* a, const float* b, int64_t n),
                  (out, a, b, n))
FSDP_ISA_VARIANTS(void, ResidualBackward, (float* da, float* db, const float* dout, int64_t n),
                  (da, db, dout, n))

// Element-wise: any cut into pieces gives the same bits (base/parallel_for.h).
constexpr int64_t kPiece = 16384;

}  // namespace

void ResidualForward(KernelIsa isa, float* out, const float* a, const float* b, int64_t n) {
  base::ParallelFor(n, kPiece, [&](int64_t begin, int64_t end) {
    FSDP_ISA_DISPATCH(isa, ResidualForward, (out + begin, a + begin, b + begin, end - begin));
  });
}

void ResidualBackward(KernelIsa isa, float* da, float* db, const float* dout, int64_t n) {
  base::ParallelFor(n, kPiece, [&](int64_t begin, int64_t end) {
    FSDP_ISA_DISPATCH(isa, ResidualBackward, (da + begin, db + begin, dout + begin, end - begin));
  });
}

void ResidualForward(float* out, const float* a, const float* b, int64_t n) {
  ResidualForward(BestKernelIsa(), out, a, b, n);
}

void ResidualBackward(float* da, float* db, const float* dout, int64_t n) {
  ResidualBackward(BestKernelIsa(), da, db, dout, n);
}

}  // namespace fsdp
