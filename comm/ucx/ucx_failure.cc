// File: comm/ucx/ucx_failure.cc
#include "comm/ucx/ucx_failure.h"

#include "absl/strings/str_cat.h"

namespace comm {

bool SaysPeerUnreachable(ucs_status_t status) {
  return status == UCS_ERR_IO_ERROR || status == UCS_ERR_CONNECTION_RESET ||
         status == UCS_ERR_UNREACHABLE || UCS_IS_LINK_ERROR(status) ||
         UCS_IS_ENDPOINT_ERROR(status);
}

absl::Status ClassifyUcxFailure(const std::string& operation, int peer, ucs_status_t status,
                                const std::string& detail, const KnownFailures& known) {
  const std::string ucx =
      absl::StrCat("UCX: ", ucs_status_string(status), detail.empty() ? "" : "; ", detail);
  if (!known.health.ok()) {
    return absl::UnavailableError(
        absl::StrCat(operation, " failed: ", known.health.message(), " (", ucx, ")"));
  }
  if (peer >= 0 && known.peer_left) {
    return absl::UnavailableError(absl::StrCat(operation, " failed: rank ", peer,
                                               " shut down (said goodbye) during it (", ucx,
                                               ")"));
  }
  if (peer >= 0 && SaysPeerUnreachable(status)) {
    return absl::UnavailableError(absl::StrCat(
        operation, " failed: rank ", peer, " died or exited during the transfer (", ucx,
        "; the failure detector had not confirmed it after ", absl::FormatDuration(known.waited),
        ")"));
  }
  return absl::InternalError(absl::StrCat(
      operation, " failed in UCX: ", ucs_status_string(status), detail.empty() ? "" : "; ",
      detail, "; no rank is known to have died, left or hung (waited ",
      absl::FormatDuration(known.waited), " for the failure detector)"));
}

}  // namespace comm
