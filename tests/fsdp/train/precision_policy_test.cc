// File: tests/fsdp/train/precision_policy_test.cc
//
// The flags' spellings parsed into one PrecisionPolicy: the three accepted
// combinations give the table in precision_policy.h, everything else is
// refused with a message naming the flag, its value and the choices; and the
// layout a unit derives from the policy (UnitRuntime).
#include "fsdp/plan/precision_policy.h"

#include <string>

#include "fsdp/models/gpt_config.h"
#include "fsdp/run/train_options.h"
#include "fsdp/train/unit_state.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

using comm::Dtype;

TEST(PrecisionPolicyTest, TheAcceptedCombinations) {
  struct Case {
    const char* precision;
    const char* reduce_dtype;
    Dtype params, grads;
  };
  const Case cases[] = {
      {"fp32", "", Dtype::kFloat32, Dtype::kFloat32},
      {"fp32", "fp32", Dtype::kFloat32, Dtype::kFloat32},
      {"bf16", "", Dtype::kBFloat16, Dtype::kBFloat16},
      {"bf16", "bf16", Dtype::kBFloat16, Dtype::kBFloat16},
      {"bf16", "fp32", Dtype::kBFloat16, Dtype::kFloat32},
  };
  for (const Case& c : cases) {
    const std::string what = std::string(c.precision) + "/" + c.reduce_dtype;
    auto policy = ParsePrecisionPolicy(c.precision, c.reduce_dtype);
    ASSERT_TRUE(policy.ok()) << what << ": " << policy.status();
    EXPECT_EQ(policy->param_dtype, c.params) << what;
    EXPECT_EQ(policy->reduce_dtype, c.grads) << what;
    EXPECT_EQ(policy->reduction, ReductionKind::kSumInReduceDtype) << what;
    EXPECT_EQ(policy->master_dtype, Dtype::kFloat32) << what;
    EXPECT_EQ(policy->optimizer_state_dtype, Dtype::kFloat32) << what;
    EXPECT_EQ(policy->separate_master(), c.params == Dtype::kBFloat16) << what;
    EXPECT_TRUE(ValidatePrecisionPolicy(*policy).ok()) << what;
  }
  // The default value is the fp32 policy.
  EXPECT_EQ(*ParsePrecisionPolicy("fp32", ""), PrecisionPolicy{});
  EXPECT_NE(*ParsePrecisionPolicy("bf16", ""), PrecisionPolicy{});
}

TEST(PrecisionPolicyTest, BadSpellingsAreRefusedByName) {
  struct Case {
    const char* precision;
    const char* reduce_dtype;
    const char* message;
  };
  const Case cases[] = {
      {"fp16", "", "--precision=fp16 is not one of fp32, bf16"},
      {"BF16", "", "--precision=BF16 is not one of fp32, bf16"},
      {"", "", "--precision= is not one of fp32, bf16"},
      {"bf16", "fp16", "--reduce_dtype=fp16 is not one of bf16"},
      {"fp32", "float", "--reduce_dtype=float is not one of bf16"},
      {"fp32", "bf16", "--reduce_dtype=bf16 needs --precision=bf16"},
  };
  for (const Case& c : cases) {
    auto policy = ParsePrecisionPolicy(c.precision, c.reduce_dtype);
    ASSERT_FALSE(policy.ok()) << c.precision << "/" << c.reduce_dtype;
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(policy.status().message().find(c.message), std::string::npos) << policy.status();
  }
}

TEST(PrecisionPolicyTest, ValidateRefusesWhatTheTrainerDoesNotImplement) {
  PrecisionPolicy narrow_grads;  // bf16 gradients of fp32 parameters
  narrow_grads.reduce_dtype = Dtype::kBFloat16;
  absl::Status s = ValidatePrecisionPolicy(narrow_grads);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bf16 gradients need bf16 parameters"), std::string::npos) << s;

  PrecisionPolicy bf16_master = *ParsePrecisionPolicy("bf16", "");
  bf16_master.master_dtype = Dtype::kBFloat16;
  s = ValidatePrecisionPolicy(bf16_master);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("must be fp32"), std::string::npos) << s;
  EXPECT_NE(s.message().find("master=bf16"), std::string::npos) << s;
}

TEST(PrecisionPolicyTest, ToStringNamesEveryDtype) {
  EXPECT_EQ(PrecisionPolicyToString(*ParsePrecisionPolicy("bf16", "fp32")),
            "params=bf16 reduce=fp32 (sum) master=fp32 optimizer_state=fp32");
}

TEST(PrecisionPolicyTest, TrainOptionsHoldThePolicy) {
  TrainOptions options;
  EXPECT_EQ(options.sharding.precision, PrecisionPolicy{});
  EXPECT_FALSE(options.bf16_grads());
  options.sharding.precision = *ParsePrecisionPolicy("bf16", "");
  EXPECT_EQ(options.sharding.precision, *ParsePrecisionPolicy("bf16", "bf16"));
  EXPECT_TRUE(options.bf16_grads());
  EXPECT_EQ(GptConfigOf(options).compute_dtype, Dtype::kBFloat16);
  options.sharding.precision = *ParsePrecisionPolicy("bf16", "fp32");
  EXPECT_EQ(options.sharding.precision.reduce_dtype, Dtype::kFloat32);
  EXPECT_FALSE(options.bf16_grads());
  const absl::Status s = ParsePrecisionPolicy("bf16", "fp8").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--reduce_dtype=fp8 is not one of"), std::string::npos) << s;
}

// What a unit keeps follows from the strategy and the policy alone.
TEST(PrecisionPolicyTest, UnitLayoutFollowsThePolicy) {
  const PrecisionPolicy fp32;
  const PrecisionPolicy bf16 = *ParsePrecisionPolicy("bf16", "");
  const PrecisionPolicy bf16_fp32grad = *ParsePrecisionPolicy("bf16", "fp32");
  for (Strategy strategy : {Strategy::kNoShard, Strategy::kShardOptimizer,
                            Strategy::kShardGradOp, Strategy::kFullShard}) {
    const bool shard_params = strategy == Strategy::kFullShard;
    EXPECT_EQ(UnitRuntime::For(strategy, 2, 0, 2, fp32).own_master(), shard_params);
    EXPECT_TRUE(UnitRuntime::For(strategy, 2, 0, 2, bf16).own_master());
    EXPECT_TRUE(UnitRuntime::For(strategy, 2, 0, 2, bf16_fp32grad).own_master());
    EXPECT_FALSE(UnitRuntime::For(strategy, 2, 0, 2, fp32).grads_through_workspace());
    EXPECT_TRUE(UnitRuntime::For(strategy, 2, 0, 2, bf16).grads_through_workspace());
    EXPECT_FALSE(UnitRuntime::For(strategy, 2, 0, 2, bf16_fp32grad).grads_through_workspace());
  }
}

}  // namespace
}  // namespace fsdp
