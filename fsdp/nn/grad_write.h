// File: fsdp/nn/grad_write.h
//
// How a backward writes a gradient buffer.
//   kAdd        buffer += gradient: parameter gradients accumulating over
//               micro-batches, or an input gradient joining a residual stream.
//   kOverwrite  buffer = gradient: the buffer holds nothing yet. No zeroing
//               pass before, and the matrix products run without oneDNN's
//               accumulating `sum` post-op, which made the same shapes
//               1.1-2x slower in the training step (docs/compute.md).
// The values are the same either way (0 + x = x).
#ifndef FSDP_NN_GRAD_WRITE_H_
#define FSDP_NN_GRAD_WRITE_H_

namespace fsdp {

enum class GradWrite { kAdd, kOverwrite };

}  // namespace fsdp

#endif  // FSDP_NN_GRAD_WRITE_H_
