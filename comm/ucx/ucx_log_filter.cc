// File: comm/ucx/ucx_log_filter.cc
#include "comm/ucx/ucx_log_filter.h"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

namespace comm {
namespace {

std::atomic<bool> g_quiet{false};
std::atomic<int64_t> g_demoted{0};
// FSDP_UCX_LOG_AFTER_FAILURE=show, read once when the handler is installed.
bool g_show_demoted = false;

// UCX calls its handlers newest first; returning CONTINUE hands the message
// on to the next one (in the end UCX's default handler, which prints it).
ucs_log_func_rc_t DemoteAfterFailure(const char* /*file*/, unsigned /*line*/,
                                     const char* /*function*/, ucs_log_level_t level,
                                     const ucs_log_component_config_t* /*comp_conf*/,
                                     const char* /*message*/, va_list /*ap*/) {
  if (!g_quiet.load(std::memory_order_relaxed)) return UCS_LOG_FUNC_RC_CONTINUE;
  // Fatal messages precede an abort: always shown. Info and below are only
  // dispatched when someone asked for them with UCX_LOG_LEVEL.
  if (level == UCS_LOG_LEVEL_FATAL || level > UCS_LOG_LEVEL_DIAG) {
    return UCS_LOG_FUNC_RC_CONTINUE;
  }
  g_demoted.fetch_add(1, std::memory_order_relaxed);
  return g_show_demoted ? UCS_LOG_FUNC_RC_CONTINUE : UCS_LOG_FUNC_RC_STOP;
}

}  // namespace

absl::Status InstallUcxLogFilter() {
  const char* value = std::getenv("FSDP_UCX_LOG_AFTER_FAILURE");
  const std::string mode = value == nullptr ? "" : value;
  if (!mode.empty() && mode != "show" && mode != "hide") {
    return absl::InvalidArgumentError(absl::StrCat(
        "FSDP_UCX_LOG_AFTER_FAILURE=", mode,
        " is not understood: set it to \"show\" to print what UCX logs after the transport "
        "stopped, or \"hide\" (the default) to count it only"));
  }
  static std::once_flag once;
  std::call_once(once, [&] {
    g_show_demoted = mode == "show";
    ucs_log_push_handler(&DemoteAfterFailure);
  });
  return absl::OkStatus();
}

void QuietUcxLogAfterFailure() { g_quiet.store(true, std::memory_order_relaxed); }

int64_t DemotedUcxMessageCount() { return g_demoted.load(std::memory_order_relaxed); }

}  // namespace comm
