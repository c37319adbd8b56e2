// File: tests/fsdp/nn/grad_check.h
//
// Central finite differences for the layer and model gradient tests. The
// scalar checked is L = sum_i w_i * out_i with fixed random weights w, summed
// in double, so backward is fed dout = w.
#ifndef TESTS_FSDP_NN_GRAD_CHECK_H_
#define TESTS_FSDP_NN_GRAD_CHECK_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fsdp {
namespace testing_util {

inline std::vector<float> RandomVector(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

inline double WeightedSum(const std::vector<float>& out, const std::vector<float>& w) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * w[i];
  return s;
}

// d loss / d x[i] by central differences with step eps; restores x[i].
inline double NumericGrad(const std::function<double()>& loss, float* x, int64_t i, float eps) {
  const float saved = x[i];
  x[i] = saved + eps;
  const double plus = loss();
  x[i] = saved - eps;
  const double minus = loss();
  x[i] = saved;
  return (plus - minus) / (2.0 * eps);
}

// Compares analytic gradient `grad` of `x` with finite differences on every
// element (or every `stride`-th one for big tensors).
inline void ExpectGradMatches(const std::string& what, const std::function<double()>& loss,
                              std::vector<float>& x, const std::vector<float>& grad, float eps,
                              double rtol, double atol, int64_t stride = 1) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  int failures = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); i += stride) {
    const double numeric = NumericGrad(loss, x.data(), i, eps);
    const double analytic = grad[i];
    const double tol = atol + rtol * std::max(std::fabs(numeric), std::fabs(analytic));
    if (std::fabs(numeric - analytic) > tol && ++failures <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic << " vs numeric "
                    << numeric;
    }
  }
  EXPECT_EQ(failures, 0) << what;
}

}  // namespace testing_util
}  // namespace fsdp

#endif  // TESTS_FSDP_NN_GRAD_CHECK_H_
