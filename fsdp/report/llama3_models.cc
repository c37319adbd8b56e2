// File: fsdp/report/llama3_models.cc
#include "fsdp/report/llama3_models.h"

#include "absl/strings/str_cat.h"

namespace fsdp {
namespace report {
namespace {

struct NamedShape {
  const char* name;
  int layers, d_model, heads, kv_heads, ffn_hidden, vocab;
};

// Dubey et al. 2024, Table 3.
constexpr NamedShape kLlama3[] = {
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256},
    {"llama3-70b", 80, 8192, 64, 8, 28672, 128256},
    {"llama3-405b", 126, 16384, 128, 8, 53248, 128256},
};

}  // namespace

std::string Llama3ModelNames() {
  std::string names;
  for (const NamedShape& shape : kLlama3) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", shape.name);
  }
  return names;
}

bool IsLlama3ModelName(absl::string_view name) {
  for (const NamedShape& shape : kLlama3) {
    if (name == shape.name) return true;
  }
  return false;
}

absl::StatusOr<LlamaConfig> Llama3Config(absl::string_view name, int seq_len) {
  for (const NamedShape& shape : kLlama3) {
    if (name != shape.name) continue;
    LlamaConfig c;
    c.layers = shape.layers;
    c.d_model = shape.d_model;
    c.heads = shape.heads;
    c.kv_heads = shape.kv_heads;
    c.ffn_hidden = shape.ffn_hidden;
    c.vocab = shape.vocab;
    c.seq_len = seq_len;
    c.rope_theta = 500000.0f;
    return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", name, "' is not a Llama 3 model; known: ", Llama3ModelNames()));
}

}  // namespace report
}  // namespace fsdp
