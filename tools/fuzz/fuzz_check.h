// File: tools/fuzz/fuzz_check.h
//
// A fuzz target's own assertion: on failure it names the file, line and
// condition, then aborts, so libFuzzer saves the reproducer and the log says
// which property it broke (the reproducer alone does not).
//
//   FUZZ_CHECK(roster.size() == world_size);
#ifndef TOOLS_FUZZ_FUZZ_CHECK_H_
#define TOOLS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

namespace fuzz {

inline void CheckAt(bool condition, const char* what, const char* file, int line) {
  if (condition) return;
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
  std::abort();
}

}  // namespace fuzz

#define FUZZ_CHECK(condition) ::fuzz::CheckAt((condition), #condition, __FILE__, __LINE__)

#endif  // TOOLS_FUZZ_FUZZ_CHECK_H_
