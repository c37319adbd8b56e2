// File: fsdp/train/compute_backend.h
//
// Picks the matrix-product backend (fsdp/nn/matmul.h) for a job. "onednn" and
// "openblas" are taken as given; "auto" measures both on rank 0 and every
// rank uses rank 0's answer, so a job never mixes backends (they round
// differently, and the strategies' bit-identity needs one rounding).
#ifndef FSDP_TRAIN_COMPUTE_BACKEND_H_
#define FSDP_TRAIN_COMPUTE_BACKEND_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "fsdp/nn/matmul.h"

namespace fsdp {

struct ComputeBackendChoice {
  MatmulBackend backend = MatmulBackend::kOneDnn;
  // What was decided and why, e.g. "onednn (auto: onednn 186 GFLOP/s,
  // openblas 21 GFLOP/s on rank 0); kernels: onednn 2.6.3: f32 brg:avx512_core, ...".
  std::string description;
};

// InvalidArgument for a name other than auto/onednn/openblas. Every rank
// must call it (it exchanges rank 0's choice). Sets the process's backend.
absl::StatusOr<ComputeBackendChoice> SelectMatmulBackend(absl::string_view name,
                                                         comm::Communicator& world,
                                                         absl::Duration timeout);

}  // namespace fsdp

#endif  // FSDP_TRAIN_COMPUTE_BACKEND_H_
