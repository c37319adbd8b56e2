// File: tests/fsdp/nn/product_rows_probe.cc
//
// Prints, for each backend, thread count, GPT shape and operand type,
// whether the forward and input-gradient products of a stack of n = 2..4
// sequences in one call (M = n seq_len) give each sequence the bits of a
// one-sequence call, and if not the largest relative difference. The
// exact mode's finding (docs/exact.md, "Products"): run it with
//   bazel run -c opt //tests/fsdp/nn:product_rows_probe
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fsdp/nn/matmul.h"
#include "tests/fsdp/nn/product_rows.h"

namespace fsdp {
namespace {

// The largest |a - b| / max(|b|, tiny) over two bit vectors of floats; 0 when
// the bits are equal.
double MaxRelativeDifference(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    float x, y;
    std::memcpy(&x, &a[i], 4);
    std::memcpy(&y, &b[i], 4);
    const double rel = std::fabs(double{x} - y) / std::fmax(std::fabs(double{y}), 1e-30);
    worst = std::fmax(worst, rel);
  }
  return worst;
}

void Probe() {
  std::printf("%s\n%s\n", MatmulKernelDescription(MatmulBackend::kOneDnn).c_str(),
              MatmulKernelDescription(MatmulBackend::kOpenBlas).c_str());
  std::printf("backend threads d T weight type | stacked n = 2..4 whose rows differ from "
              "one-sequence calls (max rel diff): forward | input grad | one-sequence calls at "
              "the other thread count\n");
  for (MatmulBackend backend : {MatmulBackend::kOneDnn, MatmulBackend::kOpenBlas}) {
    SetMatmulBackend(backend);
    for (int threads : {1, 2}) {
      SetMatmulThreads(threads);
      for (int d : {64, 512}) {
        for (int t : {64, 256}) {
          for (const WeightShape& w : GptWeightShapes(d)) {
            for (NumType type : ProductTypes(backend)) {
              const ProductOperands ops(w, t, type);
              const std::vector<SequenceProducts> alone = ops.PerSequenceAlone();
              std::printf("%s %d %d %d %s %s |", MatmulBackendName(backend), threads, d, t,
                          w.name, type == NumType::kF32 ? "fp32" : "bf16");
              double fwd = 0, bwd = 0;
              int fwd_n = 0, bwd_n = 0;
              for (int n = 2; n <= kMaxSequences; ++n) {
                const std::vector<SequenceProducts> stacked = ops.Stacked(n);
                double f = 0, b = 0;
                for (int j = 0; j < n; ++j) {
                  f = std::fmax(f, MaxRelativeDifference(stacked[j].forward, alone[j].forward));
                  b = std::fmax(b, MaxRelativeDifference(stacked[j].input_grad,
                                                         alone[j].input_grad));
                }
                fwd_n += f > 0;
                bwd_n += b > 0;
                fwd = std::fmax(fwd, f);
                bwd = std::fmax(bwd, b);
              }
              // One-sequence calls against the same at the other thread count.
              SetMatmulThreads(3 - threads);
              const std::vector<SequenceProducts> other = ops.PerSequenceAlone();
              SetMatmulThreads(threads);
              double th = 0;
              for (int j = 0; j < kMaxSequences; ++j) {
                th = std::fmax(th, MaxRelativeDifference(other[j].forward, alone[j].forward));
                th = std::fmax(th, MaxRelativeDifference(other[j].input_grad,
                                                         alone[j].input_grad));
                th = std::fmax(th, MaxRelativeDifference(other[j].weight_grad,
                                                         alone[j].weight_grad));
              }
              std::printf(" forward %d/3 (%.1e) | input grad %d/3 (%.1e) | other thread count "
                          "%s (%.1e)\n", fwd_n, fwd, bwd_n, bwd, th > 0 ? "differs" : "same",
                          th);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fsdp

int main() {
  fsdp::Probe();
  return 0;
}
