// File: fsdp/nn/bf16_convert.h
//
// fp32 -> bf16 over arrays, rounding to nearest even (NaN stays NaN), the same
// rounding as comm::FloatToBFloat16 element for element; written so the
// compiler vectorizes it. The bf16 compute mode (docs/compute.md, "Precision")
// converts weights, matmul inputs and output gradients with it. bf16 -> fp32
// (FromBf16) is exact: the bf16 bits become the top half of the float.
#ifndef FSDP_NN_BF16_CONVERT_H_
#define FSDP_NN_BF16_CONVERT_H_

#include <cstdint>

namespace fsdp {

void ToBf16(uint16_t* out, const float* in, int64_t n);

// Converts `n` floats at `data` to bf16 in the same memory: the bf16 values
// end up packed in the first 2n bytes. Safe because element i is written at
// byte 2i after element i (at byte 4i) has been read, in increasing order.
void ToBf16InPlace(float* data, int64_t n);

// Widens `n` bf16 values to fp32 (exact).
void FromBf16(float* out, const uint16_t* in, int64_t n);

}  // namespace fsdp

#endif  // FSDP_NN_BF16_CONVERT_H_
