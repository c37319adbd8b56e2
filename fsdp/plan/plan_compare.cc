// File: fsdp/plan/plan_compare.cc
//
// A small reflection walk rather than MessageDifferencer: we want the FIRST
// difference in a fixed order, phrased with the unit's and param's names,
// and MessageDifferencer reports all of them in its own wording.
#include "fsdp/plan/plan_compare.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

namespace fsdp {
namespace plan {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

struct FieldDifference {
  std::string path;  // e.g. "params[2] ('block2.mlp.fc.weight').offset"
  std::string mine;
  std::string theirs;
};

// The value as text format prints it (enums by name, strings quoted).
// index = -1 for a singular field.
std::string FieldValueText(const Message& message, const FieldDescriptor* field, int index) {
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintFieldValueToString(message, field, index, &text);
  return text;
}

// " ('block2.attn.qkv.weight')" for an element with a non-empty `name` field.
std::string ElementLabel(const Message& element) {
  const FieldDescriptor* name_field = element.GetDescriptor()->FindFieldByName("name");
  if (name_field == nullptr || name_field->type() != FieldDescriptor::TYPE_STRING ||
      name_field->is_repeated()) {
    return "";
  }
  const std::string name = element.GetReflection()->GetString(element, name_field);
  return name.empty() ? "" : absl::StrCat(" ('", name, "')");
}

std::string JoinPath(const std::string& prefix, const std::string& rest) {
  return prefix.empty() ? rest : absl::StrCat(prefix, ".", rest);
}

std::optional<FieldDifference> FirstDifference(const Message& mine, const Message& theirs,
                                               const FieldDescriptor* skipped_field);

std::optional<FieldDifference> FirstDifferenceInField(const Message& mine,
                                                      const Message& theirs,
                                                      const FieldDescriptor* field) {
  const Reflection* mine_reflection = mine.GetReflection();
  const Reflection* theirs_reflection = theirs.GetReflection();
  const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;

  if (!field->is_repeated()) {
    if (is_message) {
      std::optional<FieldDifference> inner =
          FirstDifference(mine_reflection->GetMessage(mine, field),
                          theirs_reflection->GetMessage(theirs, field), nullptr);
      if (inner) inner->path = JoinPath(field->name(), inner->path);
      return inner;
    }
    std::string mine_text = FieldValueText(mine, field, -1);
    std::string theirs_text = FieldValueText(theirs, field, -1);
    if (mine_text == theirs_text) return std::nullopt;
    return FieldDifference{field->name(), mine_text, theirs_text};
  }

  const int mine_size = mine_reflection->FieldSize(mine, field);
  const int theirs_size = theirs_reflection->FieldSize(theirs, field);
  for (int i = 0; i < std::min(mine_size, theirs_size); ++i) {
    if (is_message) {
      const Message& mine_element = mine_reflection->GetRepeatedMessage(mine, field, i);
      std::optional<FieldDifference> inner = FirstDifference(
          mine_element, theirs_reflection->GetRepeatedMessage(theirs, field, i), nullptr);
      if (inner) {
        inner->path = JoinPath(
            absl::StrCat(field->name(), "[", i, "]", ElementLabel(mine_element)), inner->path);
        return inner;
      }
      continue;
    }
    std::string mine_text = FieldValueText(mine, field, i);
    std::string theirs_text = FieldValueText(theirs, field, i);
    if (mine_text != theirs_text) {
      return FieldDifference{absl::StrCat(field->name(), "[", i, "]"), mine_text,
                             theirs_text};
    }
  }
  if (mine_size != theirs_size) {
    return FieldDifference{absl::StrCat(field->name(), " (entry count)"),
                           absl::StrCat(mine_size), absl::StrCat(theirs_size)};
  }
  return std::nullopt;
}

std::optional<FieldDifference> FirstDifference(const Message& mine, const Message& theirs,
                                               const FieldDescriptor* skipped_field) {
  const google::protobuf::Descriptor* descriptor = mine.GetDescriptor();
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const FieldDescriptor* field = descriptor->field(f);
    if (field == skipped_field) continue;
    std::optional<FieldDifference> difference = FirstDifferenceInField(mine, theirs, field);
    if (difference) return difference;
  }
  return std::nullopt;
}

// "unit 3 'block2' field padded_numel" or "field world_size".
std::string DescribeWhere(const proto::ShardPlan& mine, const proto::ShardPlan& theirs) {
  for (int u = 0; u < std::min(mine.units_size(), theirs.units_size()); ++u) {
    std::optional<FieldDifference> difference =
        FirstDifference(mine.units(u), theirs.units(u), nullptr);
    if (!difference) continue;
    return absl::StrCat("unit ", u, " '", mine.units(u).name(), "' field ", difference->path,
                        ": ", difference->mine, " vs ", difference->theirs);
  }
  return "";
}

absl::Status ComparePlansNamed(const proto::ShardPlan& mine, const std::string& my_name,
                               const proto::ShardPlan& theirs, int their_rank) {
  const std::string who =
      absl::StrCat(my_name, " and rank ", their_rank, " hold different shard plans: ");
  const FieldDescriptor* fingerprint_field =
      proto::ShardPlan::descriptor()->FindFieldByName("fingerprint");
  std::optional<FieldDifference> difference =
      FirstDifference(mine, theirs, fingerprint_field);
  if (difference) {
    // Name the unit when the first difference lies inside one.
    std::string where;
    if (absl::StartsWith(difference->path, "units[")) where = DescribeWhere(mine, theirs);
    if (where.empty()) {
      where = absl::StrCat("field ", difference->path, ": ", difference->mine, " vs ",
                           difference->theirs);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        who, where,
        " (check that every rank got the same model config and sharding flags)"));
  }
  if (mine.fingerprint() != theirs.fingerprint()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%severy field is equal but the fingerprints differ (0x%016x vs 0x%016x); "
        "the ranks run different builds of the planner",
        who, mine.fingerprint(), theirs.fingerprint()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ComparePlans(const proto::ShardPlan& mine, int my_rank,
                          const proto::ShardPlan& theirs, int their_rank) {
  return ComparePlansNamed(mine, absl::StrCat("rank ", my_rank), theirs, their_rank);
}

absl::Status ComparePlans(const proto::ShardPlan& mine, const proto::ShardPlan& theirs,
                          int their_rank) {
  return ComparePlansNamed(mine, "this rank", theirs, their_rank);
}

}  // namespace plan
}  // namespace fsdp
