// File: fsdp/nn/cross_entropy.h
//
// Softmax cross-entropy, mean over n tokens:
//   loss = -(1/n) sum_i log softmax(logits_i)[target_i]
// Forward turns logits (n, V) into probabilities IN PLACE (saving a second
// (n, V) buffer) and returns the loss. Targets are validated by the caller.
// Backward turns the probabilities into
//   dlogits = loss_scale * (probs - onehot(target)) / n
// IN PLACE: the buffer then holds the gradient, which the head's linear
// backward consumes (nothing downstream needs the probabilities again).
// Vectorized (fsdp/nn/simd.h). The overloads taking a KernelIsa run one
// variant (the CPU must support it); all variants give bit-identical results,
// the plain ones use BestKernelIsa().
#ifndef FSDP_NN_CROSS_ENTROPY_H_
#define FSDP_NN_CROSS_ENTROPY_H_

#include <cstdint>

#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

float CrossEntropyForward(float* logits_to_probs, const int32_t* targets, int n, int vocab);

void CrossEntropyBackward(float* probs_to_dlogits, const int32_t* targets, int n, int vocab,
                          float loss_scale);

float CrossEntropyForward(KernelIsa isa, float* logits_to_probs, const int32_t* targets, int n,
                          int vocab);

void CrossEntropyBackward(KernelIsa isa, float* probs_to_dlogits, const int32_t* targets, int n,
                          int vocab, float loss_scale);

// CrossEntropyBackward with its gradient rounded to bf16 IN PLACE as it is
// stored, row by row in one pass: afterwards the buffer's first
// n * vocab * 2 bytes hold the bf16 dlogits (the head's bf16 product reads
// nothing else), the bits of CrossEntropyBackward followed by ToBf16.
void CrossEntropyBackwardToBf16(float* probs_to_dlogits, const int32_t* targets, int n,
                                int vocab, float loss_scale);
void CrossEntropyBackwardToBf16(KernelIsa isa, float* probs_to_dlogits, const int32_t* targets,
                                int n, int vocab, float loss_scale);

}  // namespace fsdp

#endif  // FSDP_NN_CROSS_ENTROPY_H_
