// File: fsdp/nn/kernel_isa.h
//
// The instruction sets of the element-wise kernels, by their fsdp names. The
// detection and the per-ISA variant macros are base/kernel_isa.h's, which
// comm's reductions use too (comm and fsdp share base, never each other).
#ifndef FSDP_NN_KERNEL_ISA_H_
#define FSDP_NN_KERNEL_ISA_H_

#include "base/kernel_isa.h"

namespace fsdp {

using ::base::BestKernelIsa;
using ::base::KernelIsa;
using ::base::KernelIsaName;
using ::base::KernelIsaSupported;
using ::base::SupportedKernelIsas;

}  // namespace fsdp

#endif  // FSDP_NN_KERNEL_ISA_H_
