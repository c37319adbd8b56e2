// File: fsdp/nn/swiglu.h
//
// The SwiGLU activation of a Llama MLP: the fused gate and up projection
// writes, per row, [gate (F) | up (F)] in fp32 (the two weights lie next to
// each other in the unit, so one product computes both), and
//   out = silu(gate) * up,   silu(g) = g sigmoid(g)
// goes to `out` in its dtype (fp32, or bf16 rounded as written: only the
// down projection's product reads it), in 16 float lanes ([Note: SiLU as a
// sigmoid] in the .cc).
#ifndef FSDP_NN_SWIGLU_H_
#define FSDP_NN_SWIGLU_H_

#include "fsdp/nn/dtype_buffer.h"
#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

void SwigluForward(DtypeSpan out, const float* gate_up, int rows, int hidden);
// With the kernels of instruction set `isa` (the others take BestKernelIsa());
// every ISA gives the same bits.
void SwigluForward(KernelIsa isa, DtypeSpan out, const float* gate_up, int rows, int hidden);

// dgate_up (rows x 2F, fp32, written whole) from dout (rows x F):
//   dgate = dout up silu'(gate),  silu'(g) = s (1 + g (1 - s)),  s = sigmoid(g)
//   dup   = dout silu(gate)
void SwigluBackward(float* dgate_up, const float* dout, const float* gate_up, int rows,
                    int hidden);
void SwigluBackward(KernelIsa isa, float* dgate_up, const float* dout, const float* gate_up,
                    int rows, int hidden);

}  // namespace fsdp

#endif  // FSDP_NN_SWIGLU_H_
