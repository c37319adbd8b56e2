// File: fsdp/report/llama3_models.h
//
// Llama 3's published shapes by name, for the memory report's
// --predict_only --model=llama3-8b (Dubey et al. 2024, "The Llama 3 Herd of
// Models", Table 3): layers, width, heads, key/value heads, SwiGLU width,
// vocabulary; rotary base 500000, an untied head. The sequence length is
// the caller's (8192 by default, Llama 3's pre-training context).
//
//   name          layers  d_model  heads  kv_heads  ffn_hidden  vocab
//   llama3-8b     32      4096     32     8         14336       128256
//   llama3-70b    80      8192     64     8         28672       128256
//   llama3-405b   126     16384    128    8         53248       128256
//
//   FSDP_ASSIGN_OR_RETURN(LlamaConfig c, Llama3Config("llama3-8b", /*seq_len=*/8192));
#ifndef FSDP_REPORT_LLAMA3_MODELS_H_
#define FSDP_REPORT_LLAMA3_MODELS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fsdp/nn/llama_spec.h"

namespace fsdp {
namespace report {

inline constexpr int kLlama3SeqLen = 8192;

// "llama3-8b, llama3-70b, llama3-405b": the names Llama3Config knows.
std::string Llama3ModelNames();

// Whether `name` is one of them.
bool IsLlama3ModelName(absl::string_view name);

// The named model with `seq_len` tokens per sequence. InvalidArgument naming
// the known names otherwise.
absl::StatusOr<LlamaConfig> Llama3Config(absl::string_view name, int seq_len = kLlama3SeqLen);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_LLAMA3_MODELS_H_
