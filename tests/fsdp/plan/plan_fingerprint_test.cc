// File: tests/fsdp/plan/plan_fingerprint_test.cc
//
// The fingerprint is FNV-1a (checked on the reference test vectors), stable
// (same plan in this process, after a text round trip, and in another
// process), and sensitive: changing any single field of a plan changes it.
#include "fsdp/plan/plan_fingerprint.h"

#include <cstdio>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/plan/shard_planner.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/fsdp/plan/test_units.h"

namespace fsdp {
namespace plan {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

TEST(Fnv1a64Test, MatchesTheReferenceVectors) {
  // From the FNV reference test suite (Noll, "FNV test vectors").
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
}

proto::ShardPlan HybridPlan() {
  PlannerOptions options;
  options.sharding.strategy = Strategy::kHybridShard;
  options.world_size = 4;
  options.sharding.group_size = 2;
  options.sharding.min_unit_numel = 100;
  options.sharding.precision = *fsdp::ParsePrecisionPolicy("bf16", "bf16");
  absl::StatusOr<proto::ShardPlan> plan =
      BuildShardPlan(testing::GptLikeUnits(testing::GptLikeShape{2, 4, 9, 3}), options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

TEST(PlanFingerprintTest, IsStableWithinAProcessAndAcrossATextRoundTrip) {
  const proto::ShardPlan plan = HybridPlan();
  EXPECT_NE(plan.fingerprint(), 0u);
  EXPECT_EQ(ComputePlanFingerprint(plan), plan.fingerprint());
  EXPECT_EQ(HybridPlan().fingerprint(), plan.fingerprint());
  proto::ShardPlan parsed;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(ShardPlanToText(plan), &parsed));
  EXPECT_EQ(ComputePlanFingerprint(parsed), plan.fingerprint());
  // The fingerprint field itself is not hashed.
  parsed.set_fingerprint(12345);
  EXPECT_EQ(ComputePlanFingerprint(parsed), plan.fingerprint());
}

TEST(PlanFingerprintTest, IsTheSameInAnotherProcess) {
  // plan_tool plans the same GPT in its own process and prints the fingerprint.
  GptConfig config;
  config.layers = 3;
  config.d_model = 16;
  config.heads = 2;
  config.vocab = 29;
  config.seq_len = 8;
  PlannerOptions options;
  options.sharding.strategy = Strategy::kHybridShard;
  options.world_size = 6;
  options.sharding.group_size = 3;
  options.sharding.min_unit_numel = 1000;
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(GptUnitSpecs(config), options);
  ASSERT_TRUE(plan.ok()) << plan.status();

  const std::string command =
      "fsdp/plan/plan_tool --print=fingerprint --layers=3 --d_model=16 --heads=2 --vocab=29 "
      "--seq_len=8 --strategy=hybrid_shard --world_size=6 --group_size=3 "
      "--min_unit_numel=1000 --prefetch_depth=1 --max_gathers_in_flight=2";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command;
  char line[64] = {0};
  const bool read = std::fgets(line, sizeof(line), pipe) != nullptr;
  const int exit_code = pclose(pipe);
  ASSERT_TRUE(read) << command;
  ASSERT_EQ(exit_code, 0) << command;
  EXPECT_EQ(std::string(line), absl::StrFormat("0x%016x\n", plan->fingerprint()));
}

// Calls `visit(message, field, index)` for every scalar field of `message`
// and of the sub-messages it holds (index -1 for a singular field).
void ForEachScalarField(Message* message,
                        const std::function<void(Message*, const FieldDescriptor*, int)>& visit) {
  const Reflection* reflection = message->GetReflection();
  const google::protobuf::Descriptor* descriptor = message->GetDescriptor();
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const FieldDescriptor* field = descriptor->field(f);
    const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
        if (is_message) {
          ForEachScalarField(reflection->MutableRepeatedMessage(message, field, i), visit);
        } else {
          visit(message, field, i);
        }
      }
    } else if (is_message) {
      if (reflection->HasField(*message, field)) {
        ForEachScalarField(reflection->MutableMessage(message, field), visit);
      }
    } else {
      visit(message, field, -1);
    }
  }
}

// Changes one value in place; returns a function that restores it.
std::function<void()> Perturb(Message* message, const FieldDescriptor* field, int index) {
  const Reflection* r = message->GetReflection();
  const bool repeated = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t old = repeated ? r->GetRepeatedInt32(*message, field, index)
                             : r->GetInt32(*message, field);
      auto set = [=](int32_t v) {
        repeated ? r->SetRepeatedInt32(message, field, index, v) : r->SetInt32(message, field, v);
      };
      set(old + 1);
      return [=] { set(old); };
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t old = repeated ? r->GetRepeatedInt64(*message, field, index)
                             : r->GetInt64(*message, field);
      auto set = [=](int64_t v) {
        repeated ? r->SetRepeatedInt64(message, field, index, v) : r->SetInt64(message, field, v);
      };
      set(old + 1);
      return [=] { set(old); };
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t old = repeated ? r->GetRepeatedUInt64(*message, field, index)
                              : r->GetUInt64(*message, field);
      auto set = [=](uint64_t v) {
        repeated ? r->SetRepeatedUInt64(message, field, index, v)
                 : r->SetUInt64(message, field, v);
      };
      set(old + 1);
      return [=] { set(old); };
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool old = repeated ? r->GetRepeatedBool(*message, field, index)
                          : r->GetBool(*message, field);
      auto set = [=](bool v) {
        repeated ? r->SetRepeatedBool(message, field, index, v) : r->SetBool(message, field, v);
      };
      set(!old);
      return [=] { set(old); };
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string old = repeated ? r->GetRepeatedString(*message, field, index)
                                 : r->GetString(*message, field);
      auto set = [=](const std::string& v) {
        repeated ? r->SetRepeatedString(message, field, index, v)
                 : r->SetString(message, field, v);
      };
      set(old + "x");
      return [=] { set(old); };
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      int old = repeated ? r->GetRepeatedEnumValue(*message, field, index)
                         : r->GetEnumValue(*message, field);
      const int count = field->enum_type()->value_count();
      const int old_index = field->enum_type()->FindValueByNumber(old)->index();
      const int other = field->enum_type()->value((old_index + 1) % count)->number();
      auto set = [=](int v) {
        repeated ? r->SetRepeatedEnumValue(message, field, index, v)
                 : r->SetEnumValue(message, field, v);
      };
      set(other);
      return [=] { set(old); };
    }
    default:
      ADD_FAILURE() << "the plan has a field of a type this test cannot change: "
                    << field->full_name();
      return [] {};
  }
}

TEST(PlanFingerprintTest, ChangingAnySingleFieldChangesIt) {
  proto::ShardPlan plan = HybridPlan();
  const uint64_t original = plan.fingerprint();
  int fields_changed = 0, data_ends_changed = 0, param_offsets_changed = 0;
  ForEachScalarField(&plan, [&](Message* message, const FieldDescriptor* field, int index) {
    if (field->name() == "fingerprint") return;
    std::function<void()> restore = Perturb(message, field, index);
    EXPECT_NE(ComputePlanFingerprint(plan), original)
        << "changing " << field->full_name() << "[" << index << "] kept the fingerprint";
    restore();
    ++fields_changed;
    if (field->full_name() == "fsdp.proto.ShardRange.data_end") ++data_ends_changed;
    if (field->full_name() == "fsdp.proto.ParamLayout.offset") ++param_offsets_changed;
  });
  EXPECT_EQ(ComputePlanFingerprint(plan), original);  // all restored
  // The walk reached every range and every param of every unit.
  int ranges = 0, params = 0;
  for (const proto::UnitPlan& unit : plan.units()) {
    ranges += unit.shards_size();
    params += unit.params_size();
  }
  EXPECT_EQ(data_ends_changed, ranges);
  EXPECT_EQ(param_offsets_changed, params);
  EXPECT_GT(fields_changed, ranges * 5 + params * 4);

  // Adding or removing an entry changes it too.
  proto::ShardPlan fewer_ranges = plan;
  fewer_ranges.mutable_units(0)->mutable_shards()->RemoveLast();
  EXPECT_NE(ComputePlanFingerprint(fewer_ranges), original);
  proto::ShardPlan more_units = plan;
  more_units.add_units();
  EXPECT_NE(ComputePlanFingerprint(more_units), original);
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
