#include "base/status_macros.h"

#include "gtest/gtest.h"

namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status Quarter(int x, int* out) {
  FSDP_ASSIGN_OR_RETURN(int half, Half(x));
  FSDP_ASSIGN_OR_RETURN(int quarter, Half(half));
  *out = quarter;
  return absl::OkStatus();
}

TEST(StatusMacros, AssignOrReturnPropagatesTheFirstError) {
  int out = -1;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  out = -1;
  absl::Status status = Quarter(6, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out, -1);  // outputs are set only on success
}

}  // namespace
