// File: fsdp/train/compute_backend.cc
#include "fsdp/train/compute_backend.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "fsdp/train/blob_exchange.h"

namespace fsdp {

absl::StatusOr<ComputeBackendChoice> SelectMatmulBackend(absl::string_view name,
                                                         comm::Communicator& world,
                                                         absl::Duration timeout) {
  ComputeBackendChoice choice;
  std::string why;
  if (name == "auto") {
    BackendMeasurement measured;
    if (world.rank() == 0) measured = ChooseMatmulBackend();
    FSDP_ASSIGN_OR_RETURN(
        std::vector<uint64_t> all,
        AllGatherU64(world, static_cast<uint64_t>(measured.chosen), timeout,
                     "agreeing on the matmul backend"));
    choice.backend = static_cast<MatmulBackend>(all[0]);
    why = absl::StrFormat(" (auto: onednn %.0f GFLOP/s, openblas %.0f GFLOP/s fp32 on rank 0)",
                          measured.onednn_gflops, measured.openblas_gflops);
    if (world.rank() != 0) why = " (auto: rank 0's measurement)";
  } else {
    FSDP_ASSIGN_OR_RETURN(choice.backend, ParseMatmulBackend(name));
  }
  SetMatmulBackend(choice.backend);
  choice.description = absl::StrCat(MatmulBackendName(choice.backend), why, "; kernels: ",
                                    MatmulKernelDescription(choice.backend));
  return choice;
}

}  // namespace fsdp
