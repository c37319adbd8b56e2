// File: tests/comm/signal_stack_test.cc
#include "comm/signal_stack.h"

#include <signal.h>
#include <unistd.h>

#include <thread>

#include "gtest/gtest.h"

namespace comm {
namespace {

bool ThreadHasSignalStack() {
  stack_t current = {};
  EXPECT_EQ(sigaltstack(nullptr, &current), 0);
  return !(current.ss_flags & SS_DISABLE);
}

// Runs `body` on a new thread that starts without an alternate stack. Plain
// threads have none; the sanitizer runtimes give every thread one of their
// own, which is set aside for the body and put back after it (their thread
// exit unmaps it).
template <typename Body>
void OnThreadWithoutSignalStack(Body body) {
  std::thread([&body] {
    stack_t runtime_stack = {};
    ASSERT_EQ(sigaltstack(nullptr, &runtime_stack), 0);
    const bool had_one = !(runtime_stack.ss_flags & SS_DISABLE);
    if (had_one) {
      stack_t disable = {};
      disable.ss_flags = SS_DISABLE;
      ASSERT_EQ(sigaltstack(&disable, nullptr), 0);
    }
    body();
    if (had_one) {
      runtime_stack.ss_flags = 0;
      ASSERT_EQ(sigaltstack(&runtime_stack, nullptr), 0);
    }
  }).join();
}

TEST(ScopedSignalStackTest, InstallsOneForTheThreadAndTakesItAwayAgain) {
  OnThreadWithoutSignalStack([] {
    ASSERT_FALSE(ThreadHasSignalStack());
    {
      ScopedSignalStack signal_stack;
      EXPECT_TRUE(signal_stack.installed());
      EXPECT_TRUE(ThreadHasSignalStack());
    }
    EXPECT_FALSE(ThreadHasSignalStack());
  });
}

TEST(ScopedSignalStackTest, LeavesAStackTheThreadAlreadyHas) {
  OnThreadWithoutSignalStack([] {
    ScopedSignalStack outer;
    ASSERT_TRUE(outer.installed());
    {
      ScopedSignalStack inner;
      EXPECT_FALSE(inner.installed());
    }
    EXPECT_TRUE(ThreadHasSignalStack()) << "the inner object must not disable the outer stack";
  });
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// The reason the class exists: a thread whose own stack overflowed can run
// an SA_ONSTACK handler only on an alternate stack. Without one the kernel
// kills the process by SIGSEGV and the handler's exit code never happens.
constexpr int kHandlerRan = 42;

void ExitFromHandler(int) {
  static const char kMessage[] = "handler ran on the alternate stack\n";
  (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  _exit(kHandlerRan);
}

// Not a tail call (the frame's array is read after the call returns). The
// bound is far past any thread stack (4 KiB frames x 1 << 30); it is there
// so the compiler does not call the recursion infinite.
volatile int recursion_limit = 1 << 30;
int Recurse(int depth) {
  volatile char frame[4096];
  frame[0] = static_cast<char>(depth);
  if (depth >= recursion_limit) return frame[0];
  return Recurse(depth + 1) + frame[0];
}

void OverflowAThreadsStack(bool with_signal_stack) {
  struct sigaction action = {};
  action.sa_handler = &ExitFromHandler;
  action.sa_flags = SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, nullptr);
  std::thread([with_signal_stack] {
    if (with_signal_stack) {
      ScopedSignalStack signal_stack;
      Recurse(0);
    } else {
      Recurse(0);
    }
  }).join();
}

TEST(ScopedSignalStackDeathTest, AnOverflowingThreadsHandlerRuns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(OverflowAThreadsStack(/*with_signal_stack=*/true), ::testing::ExitedWithCode(kHandlerRan),
              "handler ran on the alternate stack");
}

TEST(ScopedSignalStackDeathTest, WithoutItTheOverflowKillsSilently) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(OverflowAThreadsStack(/*with_signal_stack=*/false), ::testing::KilledBySignal(SIGSEGV),
              "");
}
#endif

}  // namespace
}  // namespace comm
