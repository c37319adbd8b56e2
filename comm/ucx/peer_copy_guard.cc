// File: comm/ucx/peer_copy_guard.cc
#include "comm/ucx/peer_copy_guard.h"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace comm {
namespace {

std::atomic<uint64_t> failure_count{0};
std::mutex last_failure_mutex;
std::string* last_failure = new std::string();  // never destroyed: used at exit

// uct_cma_ep_tx_error's message starts with the name of the CMA call.
bool IsPeerCopyFailure(const char* format) {
  return std::strncmp(format, "%s(pid=%d", 9) == 0;
}

ucs_log_func_rc_t OnUcxLog(const char* /*file*/, unsigned /*line*/,
                           const char* /*function*/, ucs_log_level_t level,
                           const ucs_log_component_config_t* /*comp_conf*/,
                           const char* format, va_list ap) {
  if (level != UCS_LOG_LEVEL_FATAL || !IsPeerCopyFailure(format)) {
    return UCS_LOG_FUNC_RC_CONTINUE;
  }
  char message[512];
  va_list copy;
  va_copy(copy, ap);
  std::vsnprintf(message, sizeof(message), format, copy);
  va_end(copy);
  if (std::strncmp(message, "process_vm_", 11) != 0) return UCS_LOG_FUNC_RC_CONTINUE;
  {
    std::lock_guard<std::mutex> lock(last_failure_mutex);
    *last_failure = message;
  }
  failure_count.fetch_add(1, std::memory_order_relaxed);
  return UCS_LOG_FUNC_RC_STOP;
}

}  // namespace

void InstallPeerCopyGuard() {
  static std::once_flag once;
  std::call_once(once, [] { ucs_log_push_handler(&OnUcxLog); });
}

uint64_t PeerCopyFailureCount() { return failure_count.load(std::memory_order_relaxed); }

std::string LastPeerCopyFailure() {
  std::lock_guard<std::mutex> lock(last_failure_mutex);
  return *last_failure;
}

}  // namespace comm
