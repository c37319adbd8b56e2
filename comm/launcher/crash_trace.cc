// File: comm/launcher/crash_trace.cc
#include "comm/launcher/crash_trace.h"

#include <execinfo.h>
#include <ucontext.h>

#include <csignal>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/stacktrace.h"
#include "absl/debugging/symbolize.h"

namespace comm {
namespace {

// Abseil's own x86 unwinder follows frame pointers, which optimized code and
// the libraries a rank runs in (oneDNN, OpenBLAS, UCX, libc) do not keep: a
// trace would end at the first such frame. glibc's backtrace() unwinds by
// the DWARF call-frame information every x86-64 object carries, through the
// signal frame. It starts in this handler, so the frames up to the faulting
// instruction (the signal context's RIP) are dropped.
constexpr int kMaxFrames = 128;

int UnwindByCallFrameInfo(void** pcs, int* sizes, int max_depth, int skip_count,
                          const void* uc, int* min_dropped_frames) {
  void* frames[kMaxFrames];
  const int n = backtrace(frames, kMaxFrames);
  int first = skip_count + 1;  // without a context: skip this function too
  if (uc != nullptr) {
    const auto* context = static_cast<const ucontext_t*>(uc);
    void* pc = reinterpret_cast<void*>(context->uc_mcontext.gregs[REG_RIP]);
    for (int i = 0; i < n; ++i) {
      if (frames[i] == pc) {
        first = i + 1;  // the faulting PC itself is printed on its own line
        break;
      }
    }
  }
  int depth = 0;
  for (int i = first; i < n && depth < max_depth; ++i, ++depth) {
    pcs[depth] = frames[i];
    if (sizes != nullptr) sizes[depth] = 0;
  }
  if (min_dropped_frames != nullptr) *min_dropped_frames = n == kMaxFrames ? 1 : 0;
  return depth;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kUnderSanitizer = true;
#else
constexpr bool kUnderSanitizer = false;
#endif

}  // namespace

void InstallCrashTrace(const char* argv0) {
  if (kUnderSanitizer) return;
  absl::InitializeSymbolizer(argv0);
  // The first backtrace() loads libgcc's unwinder (dlopen, malloc): do it
  // now, not in a signal handler.
  void* warm[1];
  backtrace(warm, 1);
  absl::SetStackUnwinder(&UnwindByCallFrameInfo);
  // Abseil installs its handler for SIGTERM too; keep the action SIGTERM had
  // (the default, or the program's own stop handler installed later).
  struct sigaction term_before = {};
  sigaction(SIGTERM, nullptr, &term_before);
  absl::FailureSignalHandlerOptions options;
  // A handler that itself hangs (a lock held by the crashed thread) is
  // killed by an alarm, so the rank still dies well inside the hang bound.
  options.alarm_on_failure_secs = 3;
  absl::InstallFailureSignalHandler(options);
  sigaction(SIGTERM, &term_before, nullptr);
}

}  // namespace comm
