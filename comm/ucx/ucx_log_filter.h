// File: comm/ucx/ucx_log_filter.h
//
// Quiet failures (issue 37): once this process's UCX transport has stopped
// after a failure (a peer died or hung, this rank was declared hung, the
// caller aborted, or it is torn down with operations in flight), what UCX
// logs is about the wreck, not news: "tag_match.c:62 UCX WARN unexpected
// tag-receive descriptor ... was not matched" and "mpool.c:53 UCX WARN object
// ... was not returned to mpool ucp_requests" from ucp_worker_destroy, a
// dozen per rank around the one line that names the root cause.
//
// So a UCX log handler (ucs_log_push_handler, UCX 1.13 ucs/debug/log_def.h)
// demotes UCX's errors, warnings and diagnostics to a debug stream once the
// transport has stopped: they are counted (DemotedUcxMessageCount) and not
// printed. What UCX says while the transport is healthy, and at a clean
// shutdown (where a leaked request is a real bug), stays visible, as does
// anything fatal. To see the demoted messages, set
//   FSDP_UCX_LOG_AFTER_FAILURE=show
// in the ranks' environment: they are then printed as UCX prints them
// ("hide", the default, counts them only).
//
// Why a handler rather than UCX_LOG_LEVEL: the level is read once at
// ucp_init, for the whole process, and would hide healthy warnings too.
//
// Process-wide by necessity: UCX's log is one per process and its handler
// takes no user data. A process runs one job's transport; the first stopped
// transport quiets UCX for the rest of the process.
#ifndef COMM_UCX_UCX_LOG_FILTER_H_
#define COMM_UCX_UCX_LOG_FILTER_H_

#include <cstdint>

#include "absl/status/status.h"

namespace comm {

// Pushes the handler onto UCX's log handlers, once per process (later calls
// only repeat the check of the variable). Call before the transport's first
// UCX call. kInvalidArgument when FSDP_UCX_LOG_AFTER_FAILURE is set to
// anything but "show" or "hide" (the default).
absl::Status InstallUcxLogFilter();

// From now on, UCX's errors, warnings and diagnostics are demoted (see the
// banner). Idempotent.
void QuietUcxLogAfterFailure();

// How many UCX messages were demoted so far in this process (shown or not).
int64_t DemotedUcxMessageCount();

}  // namespace comm

#endif  // COMM_UCX_UCX_LOG_FILTER_H_
