// File: comm/signal_stack.h
//
// An alternate signal stack for the calling thread while the object lives.
// A fatal-signal handler (comm/launcher/crash_trace.h) needs stack to run
// on; when the thread's own stack is what overflowed, it has none, and the
// kernel kills the process without a word (a rank "killed by signal 11" with
// nothing printed). The main thread gets one from the handler's installer,
// but threads do not inherit it, so each long-lived thread comm starts makes
// its own first:
//
//   thread_ = std::thread([this] {
//     comm::ScopedSignalStack signal_stack;
//     Run();
//   });
//
// A thread that already has one keeps it (this then does nothing).
#ifndef COMM_SIGNAL_STACK_H_
#define COMM_SIGNAL_STACK_H_

#include <cstddef>

namespace comm {

class ScopedSignalStack {
 public:
  ScopedSignalStack();
  ~ScopedSignalStack();
  ScopedSignalStack(const ScopedSignalStack&) = delete;
  ScopedSignalStack& operator=(const ScopedSignalStack&) = delete;

  // Whether this object installed a stack (false: one was there already,
  // or the memory could not be had; the thread runs as before).
  bool installed() const { return memory_ != nullptr; }

 private:
  void* memory_ = nullptr;
  size_t size_ = 0;
};

}  // namespace comm

#endif  // COMM_SIGNAL_STACK_H_
