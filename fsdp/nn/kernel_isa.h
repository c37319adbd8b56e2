// File: fsdp/nn/kernel_isa.h
//
// Which instruction set the element-wise kernels (GELU, LayerNorm, softmax,
// cross-entropy, residual, embedding, AdamW, sum of squares) run with.
// Every kernel is compiled three times (fsdp/nn/simd.h) and picks the best
// variant the running CPU supports, so one binary runs well on the Xeon
// (AVX-512) and the EPYC (AVX-512) as well as on an AVX2-only or SSE2-only
// machine. [Note: ISA-independent results] says why the variants give
// bit-identical results.
//
//   printf("kernels: %s\n", KernelIsaName(BestKernelIsa()));
#ifndef FSDP_NN_KERNEL_ISA_H_
#define FSDP_NN_KERNEL_ISA_H_

#include <vector>

namespace fsdp {

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

}  // namespace fsdp

#endif  // FSDP_NN_KERNEL_ISA_H_
