// File: tests/comm/communicator_from_environment_test.cc
// CreateFromEnvironment with a world of one: no network, no MASTER_ADDR.
// (Multi-process runs over UCX are in tests/integration/.)
#include <cstdlib>
#include <vector>

#include "comm/communicator.h"
#include "gtest/gtest.h"

namespace comm {
namespace {

TEST(CommunicatorFromEnvironmentTest, WorldOfOneNeedsNoNetwork) {
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  auto comm = Communicator::CreateFromEnvironment();
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->rank(), 0);
  EXPECT_EQ((*comm)->size(), 1);
  std::vector<float> values = {1.0f, 2.0f};
  AllReduceOptions options;
  options.buffer = AsBytes(absl::MakeSpan(values));
  auto work = (*comm)->AllReduce(options);
  ASSERT_TRUE(work.ok());
  EXPECT_TRUE((*work)->Wait(absl::Seconds(1)).ok());
  EXPECT_EQ(values, (std::vector<float>{1.0f, 2.0f}));
  auto barrier = (*comm)->Barrier();
  ASSERT_TRUE(barrier.ok());
  EXPECT_TRUE((*barrier)->Wait(absl::Seconds(1)).ok());
}

TEST(CommunicatorFromEnvironmentTest, BadEnvironmentIsAClearError) {
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "zero", 1);
  auto comm = Communicator::CreateFromEnvironment();
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("CreateFromEnvironment"), std::string::npos)
      << comm.status();
  EXPECT_NE(comm.status().message().find("WORLD_SIZE"), std::string::npos) << comm.status();
}

}  // namespace
}  // namespace comm
