// File: fsdp/run/compute_backend.cc
#include "fsdp/run/compute_backend.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fsdp/exchange/blob_exchange.h"

namespace fsdp {

std::string ComputeBackendChoice::Description() const {
  return absl::StrCat(MatmulBackendName(backend), " (", why, "); kernels: ", kernels);
}

absl::StatusOr<ComputeBackendChoice> SelectMatmulBackend(MatmulBackendChoice how,
                                                         comm::Communicator& world,
                                                         absl::Duration timeout) {
  ComputeBackendChoice choice;
  const bool by_default = how == MatmulBackendChoice::kDefault;
  if (by_default || how == MatmulBackendChoice::kAuto) {
    // Rank 0 decides and every rank follows, so a job whose hosts differ
    // still computes with one backend.
    MatmulBackend own = MatmulBackend::kOneDnn;
    if (by_default) {
      const DefaultBackendChoice rule = DefaultMatmulBackend();
      own = rule.backend;
      choice.why = absl::StrCat("default: ", rule.reason);
    } else if (world.rank() == 0) {
      const BackendMeasurement measured = MeasureMatmulBackends();
      own = measured.chosen;
      choice.why = absl::StrFormat(
          "auto: onednn %.0f GFLOP/s, openblas %.0f GFLOP/s fp32 on rank 0; timed, so the bits "
          "can change between runs (leave --matmul_backend out for the same bits every run)",
          measured.onednn_gflops, measured.openblas_gflops);
    }
    FSDP_ASSIGN_OR_RETURN(std::vector<uint64_t> all,
                          AllGatherU64(world, static_cast<uint64_t>(own), timeout,
                                       "agreeing on the matmul backend"));
    choice.backend = static_cast<MatmulBackend>(all[0]);
    if (world.rank() != 0) {
      choice.why = absl::StrCat(MatmulBackendChoiceName(how), ": rank 0's choice");
    } else if (by_default) {
      std::vector<int> differing;
      for (size_t r = 0; r < all.size(); ++r) {
        if (all[r] != all[0]) differing.push_back(static_cast<int>(r));
      }
      if (!differing.empty()) {
        absl::StrAppend(&choice.why, "; the rule gives another backend on ranks ",
                        absl::StrJoin(differing, ","), ", which follow rank 0");
      }
    }
  } else {
    choice.backend =
        how == MatmulBackendChoice::kOneDnn ? MatmulBackend::kOneDnn : MatmulBackend::kOpenBlas;
    choice.why = "--matmul_backend";
  }
  SetMatmulBackend(choice.backend);
  choice.kernels = MatmulKernelDescription(choice.backend);
  return choice;
}

}  // namespace fsdp
