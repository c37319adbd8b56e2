// File: tests/comm/ucx/ucx_log_filter_test.cc
//
// comm/ucx/ucx_log_filter.h through UCX's own log dispatch: a warning while
// healthy is printed by UCX's default handler; after QuietUcxLogAfterFailure
// it is counted and not printed, while a fatal message still is. (Over real
// ranks: //tests/integration/comm:train_gpt_hang_test.)
#include "comm/ucx/ucx_log_filter.h"

#include <stdlib.h>
#include <ucs/debug/log_def.h>

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace comm {
namespace {

// What UCX prints for one message at `level` (its default handler writes to
// stdout unless UCX_LOG_FILE says otherwise).
std::string DispatchAndCapture(ucs_log_level_t level, const char* text) {
  testing::internal::CaptureStdout();
  ucs_log_dispatch(__FILE__, __LINE__, __func__, level, &ucs_global_opts.log_component, "%s",
                   text);
  ucs_log_flush();
  fflush(stdout);
  return testing::internal::GetCapturedStdout();
}

TEST(UcxLogFilter, HealthyWarningsShowAndLaterOnesAreCountedOnly) {
  unsetenv("FSDP_UCX_LOG_AFTER_FAILURE");
  ASSERT_TRUE(InstallUcxLogFilter().ok());
  ASSERT_TRUE(InstallUcxLogFilter().ok());  // once per process; a second call is harmless

  const std::string healthy = DispatchAndCapture(UCS_LOG_LEVEL_WARN, "healthy warning 1");
  EXPECT_TRUE(absl::StrContains(healthy, "UCX  WARN")) << healthy;
  EXPECT_TRUE(absl::StrContains(healthy, "healthy warning 1")) << healthy;
  EXPECT_EQ(DemotedUcxMessageCount(), 0);

  QuietUcxLogAfterFailure();
  EXPECT_EQ(DispatchAndCapture(UCS_LOG_LEVEL_WARN, "after the failure"), "");
  EXPECT_EQ(DispatchAndCapture(UCS_LOG_LEVEL_ERROR, "an error after the failure"), "");
  EXPECT_EQ(DemotedUcxMessageCount(), 2);
  QuietUcxLogAfterFailure();  // idempotent
  EXPECT_EQ(DispatchAndCapture(UCS_LOG_LEVEL_WARN, "once more"), "");
  EXPECT_EQ(DemotedUcxMessageCount(), 3);
}

TEST(UcxLogFilter, BadSettingIsRefusedNamingTheVariable) {
  setenv("FSDP_UCX_LOG_AFTER_FAILURE", "loud", 1);
  const absl::Status status = InstallUcxLogFilter();
  unsetenv("FSDP_UCX_LOG_AFTER_FAILURE");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "FSDP_UCX_LOG_AFTER_FAILURE=loud")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "\"show\"")) << status;
}

}  // namespace
}  // namespace comm
