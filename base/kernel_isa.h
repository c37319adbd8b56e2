// File: base/kernel_isa.h
//
// Which instruction set a vector kernel runs with: fsdp's element-wise
// kernels (GELU, LayerNorm, softmax, cross-entropy, residual, embedding,
// AdamW, sum of squares) and comm's reductions. Each such kernel is compiled
// once per instruction set (FSDP_ISA_VARIANTS below) and picks the best
// variant the running CPU supports, so one binary runs well on the Xeon
// (AVX-512) and the EPYC (AVX-512) as well as on an AVX2-only or SSE2-only
// machine. [Note: ISA-independent results] in fsdp/nn/simd.h says why the
// variants give bit-identical results.
//
//   printf("kernels: %s\n", KernelIsaName(BestKernelIsa()));
//
//   inline __attribute__((always_inline)) void ScaleBody(float* x, int64_t n,
//                                                        float s) { ... }
//   FSDP_ISA_VARIANTS(void, Scale, (float* x, int64_t n, float s), (x, n, s))
//   void Scale(KernelIsa isa, float* x, int64_t n, float s) {
//     FSDP_ISA_DISPATCH(isa, Scale, (x, n, s));
//   }
#ifndef BASE_KERNEL_ISA_H_
#define BASE_KERNEL_ISA_H_

#include <vector>

#include "base/status_macros.h"

namespace base {

// Ordered: a larger value needs more of the CPU.
enum class KernelIsa { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };

// The best variant this CPU (and OS, for the AVX register state) supports;
// detected once.
KernelIsa BestKernelIsa();

bool KernelIsaSupported(KernelIsa isa);

// Every variant this CPU can run, kGeneric first.
std::vector<KernelIsa> SupportedKernelIsas();

// "generic (SSE2)", "avx2", "avx512f".
const char* KernelIsaName(KernelIsa isa);

}  // namespace base

// Defines name##Avx512, name##Avx2 and name##Generic, each calling the
// always-inlined name##Body compiled for that instruction set.
#define FSDP_ISA_VARIANTS(ret, name, params, args)                                          \
  __attribute__((target("avx512f"))) ret name##Avx512 params { return name##Body args; } \
  __attribute__((target("avx2"))) ret name##Avx2 params { return name##Body args; }      \
  ret name##Generic params { return name##Body args; }

// Calls the variant for `isa`. Asking for one the CPU lacks is a programmer
// bug (it would die of SIGILL somewhere less obvious).
#define FSDP_ISA_DISPATCH(isa, name, args)      \
  FSDP_CHECK(::base::KernelIsaSupported(isa));  \
  switch (isa) {                                \
    case ::base::KernelIsa::kAvx512:            \
      return name##Avx512 args;                 \
    case ::base::KernelIsa::kAvx2:              \
      return name##Avx2 args;                   \
    case ::base::KernelIsa::kGeneric:           \
      break;                                    \
  }                                             \
  return name##Generic args

#endif  // BASE_KERNEL_ISA_H_
