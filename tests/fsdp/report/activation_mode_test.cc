// File: tests/fsdp/report/activation_mode_test.cc
//
// The activation modes as the report sweeps them and the budget suggests
// them: parsing the flag lists, names and train_gpt flags, which configs can
// take which mode, and the order of the budget's ladder.
#include "fsdp/report/activation_mode.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fsdp {
namespace report {
namespace {

TEST(ActivationModeTest, ListsAreEveryCombinationCheckpointingOuter) {
  absl::StatusOr<std::vector<ActivationMode>> modes =
      ParseActivationModes("none, every:2,all", "standard,flash");
  ASSERT_TRUE(modes.ok()) << modes.status();
  std::vector<std::string> names;
  for (const ActivationMode& mode : *modes) names.push_back(ActivationModeName(mode));
  EXPECT_EQ(names, (std::vector<std::string>{"none", "flash", "every:2", "every:2+flash", "all",
                                             "all+flash"}));
  // every:1 is all: one mode, not two.
  modes = ParseActivationModes("all,every:1", "standard");
  ASSERT_TRUE(modes.ok());
  EXPECT_EQ(modes->size(), 1u);
}

TEST(ActivationModeTest, BadListsNameTheItemAndTheForms) {
  for (const char* bad : {"some", "every:0", "every:x", "every:", "every:-1"}) {
    absl::StatusOr<std::vector<ActivationMode>> modes = ParseActivationModes(bad, "standard");
    ASSERT_FALSE(modes.ok()) << bad;
    EXPECT_EQ(modes.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(modes.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << modes.status();
    EXPECT_NE(modes.status().message().find("every:K"), std::string::npos) << modes.status();
  }
  absl::StatusOr<std::vector<ActivationMode>> attention = ParseActivationModes("none", "fast");
  ASSERT_FALSE(attention.ok());
  EXPECT_NE(attention.status().message().find("'fast'"), std::string::npos);
  EXPECT_FALSE(ParseActivationModes("", "standard").ok());
  EXPECT_FALSE(ParseActivationModes("none", "").ok());
}

TEST(ActivationModeTest, FlagsAreTrainGptsAndOnlyTheNonDefaultOnes) {
  EXPECT_EQ(ActivationModeFlags({0, false}), "");
  EXPECT_EQ(ActivationModeFlags({0, true}), "--attention=flash");
  EXPECT_EQ(ActivationModeFlags({3, false}), "--activation_checkpointing=every:3");
  EXPECT_EQ(ActivationModeFlags({1, true}), "--activation_checkpointing=all --attention=flash");
}

TEST(ActivationModeTest, ApplyChecksTheModelCanTakeTheMode) {
  GptConfig config{4, 64, 4, 256, 32};
  ASSERT_TRUE(ApplyActivationMode({4, true}, config).ok());
  EXPECT_EQ(config.activation_checkpoint_every, 4);
  EXPECT_TRUE(config.flash_attention);
  EXPECT_EQ(ActivationModeName(ActivationModeOf(config)), "every:4+flash");
  GptConfig before = config;
  const absl::Status too_sparse = ApplyActivationMode({5, false}, config);
  EXPECT_EQ(too_sparse.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_sparse.message().find("every:5"), std::string::npos) << too_sparse;
  EXPECT_EQ(config.activation_checkpoint_every, before.activation_checkpoint_every)
      << "a refused mode leaves the config as it was";
  GptConfig bf16{4, 64, 4, 256, 32};
  bf16.compute_dtype = comm::Dtype::kBFloat16;
  EXPECT_TRUE(ApplyActivationMode({1, true}, bf16).ok()) << "flash runs in bf16 too";
}

TEST(ActivationModeTest, TheLadderSkipsWhatTheConfigCannotTake) {
  auto names = [](const GptConfig& config) {
    std::vector<std::string> out;
    for (const ActivationMode& mode : ActivationModesByCost(config)) {
      out.push_back(ActivationModeName(mode));
    }
    return out;
  };
  GptConfig config{4, 64, 4, 256, 32};
  EXPECT_EQ(names(config), (std::vector<std::string>{"flash", "every:2", "every:2+flash", "all",
                                                     "all+flash"}));
  GptConfig one_block{1, 64, 4, 256, 32};
  EXPECT_EQ(names(one_block), (std::vector<std::string>{"flash", "all", "all+flash"}));
}

}  // namespace
}  // namespace report
}  // namespace fsdp
