// File: fsdp/run/model_registry.cc
#include "fsdp/run/model_registry.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace fsdp {
namespace {

// Built on first use: registrations run during static initialization, in
// no defined order across files.
std::map<std::string, ModelFactory, std::less<>>& Registry() {
  static auto* registry = new std::map<std::string, ModelFactory, std::less<>>();
  return *registry;
}

}  // namespace

bool RegisterModel(const std::string& name, ModelFactory factory) {
  FSDP_CHECK(factory.unit_specs != nullptr && factory.create != nullptr &&
             factory.create_inference != nullptr);
  FSDP_CHECK(Registry().emplace(name, factory).second);
  return true;
}

absl::StatusOr<const ModelFactory*> FindModel(absl::string_view name) {
  const auto& registry = Registry();
  auto it = registry.find(name);
  if (it != registry.end()) return &it->second;
  std::vector<std::string> names;
  for (const auto& [registered, factory] : registry) names.push_back(registered);
  return absl::NotFoundError(absl::StrCat(
      "no model named '", name, "' is linked into this binary (registered: ",
      names.empty() ? "none" : absl::StrJoin(names, ", "),
      "); link the model's registration library, e.g. //fsdp/models:gpt"));
}

}  // namespace fsdp
