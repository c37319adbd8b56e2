// File: fsdp/run/compute_backend.h
//
// Picks the matrix-product backend (fsdp/nn/matmul.h) for a job, one for every
// rank: the backends round differently, and the strategies' bit-identity needs
// one rounding.
//
//   kDefault    the machine's rule (DefaultMatmulBackend: oneDNN from AVX2 up),
//               evaluated on rank 0 and taken by every rank: the same command
//               gives the same bits every time;
//   kOneDnn, kOpenBlas  as named;
//   kAuto       timed on rank 0 (MeasureMatmulBackends), taken by every rank;
//               the choice, and so the bits, can change between runs.
#ifndef FSDP_RUN_COMPUTE_BACKEND_H_
#define FSDP_RUN_COMPUTE_BACKEND_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "fsdp/nn/matmul.h"

namespace fsdp {

struct ComputeBackendChoice {
  MatmulBackend backend = MatmulBackend::kOneDnn;
  // How it was chosen, e.g. "default: oneDNN's instruction set here is
  // avx512_core_bf16 (AVX2 or newer)".
  std::string why;
  // The kernels it runs here (MatmulKernelDescription), e.g. "onednn 2.6.3:
  // f32 brg:avx512_core, bf16 brg:avx512_core_bf16".
  std::string kernels;

  // "onednn (default: ...); kernels: onednn 2.6.3: ...", for the start-up line.
  std::string Description() const;
};

// Every rank must call it (it exchanges rank 0's choice). Sets the process's
// backend.
absl::StatusOr<ComputeBackendChoice> SelectMatmulBackend(MatmulBackendChoice how,
                                                         comm::Communicator& world,
                                                         absl::Duration timeout);

}  // namespace fsdp

#endif  // FSDP_RUN_COMPUTE_BACKEND_H_
