// File: examples/generate.cc
//
// Text from a trained model, in one process: the weights of a safetensors
// file (train_gpt --export, a GPT or a Llama) or of a sharded checkpoint (train_gpt
// --checkpoint_dir, consolidated first into a temporary safetensors file in
// a private directory), the model configuration from the file's
// __metadata__, the tokenizer from the tokenize example.
//
//   bazel run -c opt //examples:generate -- --safetensors=/tmp/gpt.safetensors
//   --tokenizer=/tmp/fortunes.tokenizer --prompt="The meaning of life" --tokens=200
//
// The same seed and options give the text train_gpt's own sample printed
// for those weights (fsdp/run/sampler.h).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/model_export.h"
#include "fsdp/checkpoint/model_safetensors.h"
#include "fsdp/checkpoint/safetensors.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/gpt_inference.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/llama_inference.h"
#include "fsdp/nn/llama_spec.h"
#include "fsdp/run/model_forward.h"
#include "fsdp/run/sampler.h"
#include "fsdp/text/byte_bpe.h"
#include "fsdp/text/tokenizer_file.h"

ABSL_FLAG(std::string, safetensors, "", "weights: a file written by train_gpt --export");
ABSL_FLAG(std::string, checkpoint, "", "weights: a checkpoint directory (DIR/step-N)");
ABSL_FLAG(std::string, tokenizer, "",
          "the tokenize example's PREFIX.tokenizer; empty = byte-level");
ABSL_FLAG(std::string, prompt, "", "text to continue; empty = a newline");
ABSL_FLAG(int, tokens, 200, "tokens to generate");
ABSL_FLAG(double, temperature, 0.8, "0 = greedy");
ABSL_FLAG(int, top_k, 40, "sample among the k most likely tokens; 0 = all");
ABSL_FLAG(uint64_t, seed, 1, "seed of the sampling draws");

namespace {

// The file's model: its units (the tensors to read, in order) and its
// forward pass for one sequence.
struct FileModel {
  std::vector<fsdp::UnitSpec> units;
  std::unique_ptr<fsdp::InferenceModel> forward;
};

// The family and configuration the file's __metadata__ names, checked
// against its tensors before anything is sized by them.
absl::StatusOr<FileModel> OpenFileModel(const fsdp::checkpoint::SafetensorsReader& reader,
                                        fsdp::MemoryTracker* tracker) {
  const std::string family = fsdp::checkpoint::SafetensorsFamily(reader);
  FileModel model;
  if (family == "gpt") {
    FSDP_ASSIGN_OR_RETURN(const fsdp::GptConfig config,
                          fsdp::checkpoint::GptConfigFromSafetensors(reader));
    model.units = fsdp::GptUnitSpecs(config);
    FSDP_ASSIGN_OR_RETURN(model.forward, fsdp::GptInference::Create(config, 1, tracker));
  } else if (family == "llama") {
    FSDP_ASSIGN_OR_RETURN(const fsdp::LlamaConfig config,
                          fsdp::checkpoint::LlamaConfigFromSafetensors(reader));
    model.units = fsdp::LlamaUnitSpecs(config);
    FSDP_ASSIGN_OR_RETURN(model.forward, fsdp::LlamaInference::Create(config, 1, tracker));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.path(), ": its __metadata__ family is \"", family,
                     "\"; generate samples from the families train_gpt trains (gpt, llama)"));
  }
  return model;
}

absl::Status Run() {
  const std::string safetensors = absl::GetFlag(FLAGS_safetensors);
  const std::string checkpoint = absl::GetFlag(FLAGS_checkpoint);
  if (safetensors.empty() == checkpoint.empty()) {
    return absl::InvalidArgumentError("give exactly one of --safetensors=FILE or --checkpoint=DIR");
  }
  std::string weights = safetensors;
  std::string temporary_dir;
  if (!checkpoint.empty()) {
    // A directory only this user can enter (mkdtemp: mode 0700, a new name),
    // not a guessable name in the shared /tmp that another user could take
    // first.
    const char* tmpdir = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp", "/generate.XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot create a directory like ", pattern,
                                                     " for the consolidated checkpoint"));
    }
    temporary_dir = pattern;
    weights = temporary_dir + "/model.safetensors";
    absl::StatusOr<fsdp::checkpoint::ConvertStats> converted =
        fsdp::checkpoint::ConvertCheckpoint(checkpoint, weights);
    if (!converted.ok()) {
      std::remove(weights.c_str());
      rmdir(temporary_dir.c_str());
      return converted.status();
    }
  }
  absl::StatusOr<std::unique_ptr<fsdp::checkpoint::SafetensorsReader>> opened =
      fsdp::checkpoint::SafetensorsReader::Open(weights);
  if (!temporary_dir.empty()) {  // the open descriptor keeps the file
    std::remove(weights.c_str());
    rmdir(temporary_dir.c_str());
  }
  if (!opened.ok()) return opened.status();
  const auto& reader = **opened;
  fsdp::MemoryTracker tracker;
  FSDP_ASSIGN_OR_RETURN(FileModel model, OpenFileModel(reader, &tracker));
  std::vector<std::vector<float>> params;
  for (const fsdp::UnitSpec& unit : model.units) {
    std::vector<float> flat(unit.numel());
    int64_t offset = 0;
    for (const fsdp::ParamSpec& p : unit.params) {
      FSDP_RETURN_IF_ERROR(
          reader.ReadF32(p.name, absl::MakeSpan(flat).subspan(offset, p.numel())));
      offset += p.numel();
    }
    params.push_back(std::move(flat));
  }
  fsdp::text::ByteBpe tokenizer;
  if (const std::string path = absl::GetFlag(FLAGS_tokenizer); !path.empty()) {
    FSDP_ASSIGN_OR_RETURN(tokenizer, fsdp::text::LoadByteBpe(path));
  }
  if (tokenizer.vocab_size() > model.forward->vocab()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the tokenizer has ", tokenizer.vocab_size(), " tokens but the model only ",
                     model.forward->vocab(), "; give the tokenizer the model was trained with"));
  }
  const std::string prompt_text = absl::GetFlag(FLAGS_prompt);
  const std::vector<uint16_t> encoded = tokenizer.Encode(prompt_text.empty() ? "\n" : prompt_text);
  const std::vector<int32_t> prompt(encoded.begin(), encoded.end());
  fsdp::SampleOptions options;
  options.num_tokens = absl::GetFlag(FLAGS_tokens);
  options.temperature = absl::GetFlag(FLAGS_temperature);
  options.top_k = absl::GetFlag(FLAGS_top_k);
  options.seed = absl::GetFlag(FLAGS_seed);
  FSDP_ASSIGN_OR_RETURN(
      std::vector<int32_t> tokens,
      fsdp::SampleTokens(*model.forward, fsdp::VectorModelUnits(params), prompt, options));
  const std::vector<uint16_t> out(tokens.begin(), tokens.end());
  const std::string text = tokenizer.Decode(out);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Samples text from a train_gpt model.\n"
      "Example: generate --safetensors=/tmp/gpt.safetensors --tokenizer=/tmp/fortunes.tokenizer");
  absl::ParseCommandLine(argc, argv);
  absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "generate: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  return 0;
}
