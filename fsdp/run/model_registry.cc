// File: fsdp/run/model_registry.cc
#include "fsdp/run/model_registry.h"

#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
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
  FSDP_CHECK(factory.unit_specs != nullptr && factory.create != nullptr);
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

std::string HfConfigPathBeside(absl::string_view safetensors_path) {
  const size_t slash = safetensors_path.rfind('/');
  if (slash == absl::string_view::npos) return "config.json";
  return absl::StrCat(safetensors_path.substr(0, slash + 1), "config.json");
}

absl::Status WriteHfConfigBeside(const TrainOptions& options, absl::string_view export_path) {
  FSDP_ASSIGN_OR_RETURN(const ModelFactory* factory, FindModel(options.model));
  if (factory->hf_config_json == nullptr) return absl::OkStatus();
  return base::WriteFileAtomically(HfConfigPathBeside(export_path),
                                   factory->hf_config_json(options));
}

absl::Status CheckHfConfigBeside(const TrainOptions& options, absl::string_view init_path) {
  FSDP_ASSIGN_OR_RETURN(const ModelFactory* factory, FindModel(options.model));
  if (factory->check_hf_config == nullptr) return absl::OkStatus();
  const std::string path = HfConfigPathBeside(init_path);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::OkStatus();  // none beside the file: nothing to check
  constexpr std::streamoff kMaxBytes = 1 << 20;
  const std::streamoff size = in.tellg();
  if (size < 0 || size > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is not a config.json of at most 1 MiB (", static_cast<int64_t>(size),
        " bytes); remove it or put the model's own beside ", init_path));
  }
  std::string json(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(json.data(), size)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  }
  absl::Status fits = factory->check_hf_config(options, json);
  if (!fits.ok()) return absl::Status(fits.code(), absl::StrCat(path, ": ", fits.message()));
  return absl::OkStatus();
}

absl::Status ValidateModelOptions(const TrainOptions& options) {
  FSDP_ASSIGN_OR_RETURN(const ModelFactory* factory, FindModel(options.model));
  if (factory->validate == nullptr) return absl::OkStatus();
  return factory->validate(options);
}

}  // namespace fsdp
