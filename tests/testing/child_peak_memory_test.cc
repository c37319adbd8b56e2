// File: tests/testing/child_peak_memory_test.cc
//
// The measurement the bad-input tests rely on sees what a child touches,
// and the child's address-space limit stops a runaway allocation.
#include "tests/testing/child_peak_memory.h"

#include <cstring>
#include <memory>

#include "gtest/gtest.h"

namespace fsdp_test {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(ChildPeakMemoryTest, ReportsTheStatusAndTheMemoryTouched) {
  const ChildRun idle = RunInChild([] { return absl::InvalidArgumentError("bad: line 3"); });
  ASSERT_TRUE(idle.finished) << idle.failure;
  EXPECT_EQ(idle.status, absl::InvalidArgumentError("bad: line 3"));
  EXPECT_LT(idle.peak_rss_growth_bytes, 16 * kMiB);

  const int64_t touched = 200 * kMiB;
  const ChildRun busy = RunInChild([&] {
    std::unique_ptr<char[]> block(new char[touched]);
    std::memset(block.get(), 1, touched);
    return block[touched - 1] == 1 ? absl::OkStatus() : absl::InternalError("lost a byte");
  });
  ASSERT_TRUE(busy.finished) << busy.failure;
  EXPECT_TRUE(busy.status.ok()) << busy.status;
  EXPECT_GE(busy.peak_rss_growth_bytes, touched);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST(ChildPeakMemoryTest, AnAllocationBeyondTheHeadroomEndsTheChild) {
  const ChildRun run = RunInChild(
      [] {
        // Kept in a volatile so that the compiler cannot elide the allocation.
        [[maybe_unused]] static char* volatile block;
        block = new char[int64_t{4} << 30];
        return absl::OkStatus();
      },
      /*address_space_headroom=*/256 * kMiB);
  EXPECT_FALSE(run.finished);
  EXPECT_NE(run.failure.find("threw std::bad_alloc"), std::string::npos) << run.failure;
}
#endif

}  // namespace
}  // namespace fsdp_test
