// File: comm/signal_stack.cc
#include "comm/signal_stack.h"

#include <signal.h>
#include <sys/mman.h>

#include <algorithm>

namespace comm {

ScopedSignalStack::ScopedSignalStack() {
  stack_t current = {};
  if (sigaltstack(nullptr, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return;
  // Room for a symbolizing handler (Abseil's uses a few KB; SIGSTKSZ may be
  // a run-time value in glibc 2.34+).
  const size_t size = std::max<size_t>(64 * 1024, static_cast<size_t>(SIGSTKSZ));
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return;
  stack_t stack = {};
  stack.ss_sp = memory;
  stack.ss_size = size;
  if (sigaltstack(&stack, nullptr) != 0) {
    munmap(memory, size);
    return;
  }
  memory_ = memory;
  size_ = size;
}

ScopedSignalStack::~ScopedSignalStack() {
  if (memory_ == nullptr) return;
  stack_t disable = {};
  disable.ss_flags = SS_DISABLE;
  sigaltstack(&disable, nullptr);
  munmap(memory_, size_);
}

}  // namespace comm
