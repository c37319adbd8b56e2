// File: base/kernel_isa.cc
#include "base/kernel_isa.h"

namespace base {
namespace {

KernelIsa DetectKernelIsa() {
  __builtin_cpu_init();
  // GCC's detection also checks (xgetbv) that the OS saves the AVX / AVX-512
  // register state, not only that cpuid reports the feature.
  if (__builtin_cpu_supports("avx512f")) return KernelIsa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return KernelIsa::kAvx2;
  return KernelIsa::kGeneric;
}

}  // namespace

KernelIsa BestKernelIsa() {
  static const KernelIsa best = DetectKernelIsa();
  return best;
}

bool KernelIsaSupported(KernelIsa isa) {
  return static_cast<int>(isa) <= static_cast<int>(BestKernelIsa());
}

std::vector<KernelIsa> SupportedKernelIsas() {
  std::vector<KernelIsa> isas;
  for (KernelIsa isa : {KernelIsa::kGeneric, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (KernelIsaSupported(isa)) isas.push_back(isa);
  }
  return isas;
}

const char* KernelIsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512:
      return "avx512f";
    case KernelIsa::kAvx2:
      return "avx2";
    case KernelIsa::kGeneric:
      break;
  }
  return "generic (SSE2)";
}

}  // namespace base
