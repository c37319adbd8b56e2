#include "base/subprocess.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace base {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(RunProcessTest, ReturnsTheExitCodeAndWritesTheOutputFile) {
  ProcessOptions options;
  options.output_path = TmpPath("out.txt");
  absl::StatusOr<int> code = RunProcess({"sh", "-c", "echo hello; echo oops >&2; exit 3"}, options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 3);
  std::ifstream in(options.output_path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "hello\noops\n");
}

TEST(RunProcessTest, ASignalIs128PlusItsNumber) {
  absl::StatusOr<int> code = RunProcess({"sh", "-c", "kill -9 $$"}, {});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + 9);
}

TEST(RunProcessTest, AMissingProgramIsNotFound) {
  absl::StatusOr<int> code = RunProcess({"no-such-program-here"}, {});
  EXPECT_EQ(code.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(code.status().message().find("no-such-program-here"), absl::string_view::npos);
  EXPECT_EQ(RunProcess({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RunProcessTest, KilledAtTheDeadline) {
  ProcessOptions options;
  options.timeout = absl::Milliseconds(200);
  const absl::Time start = absl::Now();
  absl::StatusOr<int> code = RunProcess({"sleep", "30"}, options);
  EXPECT_EQ(code.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST(RunProcessTest, CancelledKillsTheChild) {
  std::atomic<bool> cancel{false};
  ProcessOptions options;
  options.cancel = &cancel;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(200));
    cancel = true;
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<int> code = RunProcess({"sleep", "30"}, options);
  canceller.join();
  EXPECT_EQ(code.status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

}  // namespace
}  // namespace base
