// File: tests/fsdp/checkpoint/model_safetensors_test.cc
//
// generate's model config comes from a safetensors file's __metadata__
// (issue #39): an exported file gives its config back, a GPT's or a
// Llama's, and metadata the tensors do not back (layers or sizes of any
// magnitude) are refused with a clear error before anything is sized by
// them, measured under 100 MB of peak memory.
#include "fsdp/checkpoint/model_safetensors.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/child_peak_memory.h"

namespace fsdp::checkpoint {
namespace {

constexpr int64_t kPeakLimitBytes = int64_t{100} << 20;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

GptConfig SmallConfig() {
  GptConfig config;
  config.layers = 2;
  config.d_model = 8;
  config.heads = 2;
  config.vocab = 16;
  config.seq_len = 4;
  return config;
}

std::map<std::string, std::string> MetadataOf(const GptConfig& c) {
  return {{"format", "pt"},
          {"family", "gpt"},
          {"layers", absl::StrCat(c.layers)},
          {"d_model", absl::StrCat(c.d_model)},
          {"heads", absl::StrCat(c.heads)},
          {"vocab", absl::StrCat(c.vocab)},
          {"seq_len", absl::StrCat(c.seq_len)}};
}

// The tensors of `units` (zeros) with `metadata`.
std::string WriteUnits(const std::string& name, const std::vector<UnitSpec>& units,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsTensorSpec> specs;
  for (const UnitSpec& unit : units) {
    for (const ParamSpec& p : unit.params) {
      specs.push_back({p.name, std::vector<uint64_t>(p.shape.begin(), p.shape.end())});
    }
  }
  const std::string path = TempPath(name);
  absl::StatusOr<std::unique_ptr<SafetensorsWriter>> writer =
      SafetensorsWriter::Create(path, specs, metadata);
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return path;
  for (const UnitSpec& unit : units) {
    for (const ParamSpec& p : unit.params) {
      EXPECT_TRUE((*writer)->Append(std::vector<float>(p.numel(), 0.0f)).ok());
    }
  }
  EXPECT_TRUE((*writer)->Finish().ok());
  return path;
}

std::string WriteModel(const std::string& name, const GptConfig& tensors_of,
                       const std::map<std::string, std::string>& metadata) {
  return WriteUnits(name, GptUnitSpecs(tensors_of), metadata);
}

absl::Status ConfigStatus(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader = SafetensorsReader::Open(path);
  if (!reader.ok()) return reader.status();
  return GptConfigFromSafetensors(**reader).status();
}

TEST(GptSafetensorsTest, AnExportedFileGivesItsConfigBack) {
  const GptConfig config = SmallConfig();
  const std::string path = WriteModel("good.safetensors", config, MetadataOf(config));
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<GptConfig> read = GptConfigFromSafetensors(**reader);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->layers, config.layers);
  EXPECT_EQ(read->d_model, config.d_model);
  EXPECT_EQ(read->heads, config.heads);
  EXPECT_EQ(read->vocab, config.vocab);
  EXPECT_EQ(read->seq_len, config.seq_len);
}

TEST(GptSafetensorsTest, MetadataTheTensorsDoNotBackAreRefusedUnder100MB) {
  const GptConfig small = SmallConfig();
  struct Case {
    std::string name;
    std::string key;
    std::string value;
    std::string needle;
  };
  const Case cases[] = {
      // GptUnitSpecs alone would build two billion unit lists.
      {"layers", "layers", "2000000000", "calls for 24000000005 tensors"},
      // A [vocab, d_model] buffer of 4 GiB from a 3 KB file.
      {"d_model", "d_model", "65536", "embedding.wte of shape [16, 65536]"},
      {"vocab", "vocab", "2000000000", "embedding.wte of shape [2000000000, 8]"},
      {"seq_len", "seq_len", "2000000000", "embedding.wpe of shape [2000000000, 8]"},
      // 4 C^2 would overflow int64 in GptUnitSpecs.
      {"d_model_limit", "d_model", "2147483646", "above the limit of 65536"},
      {"heads", "heads", "3", "heads (3) must divide d_model (8)"},
      {"missing", "layers", "two", "no integer __metadata__ \"layers\""},
  };
  for (const Case& c : cases) {
    std::map<std::string, std::string> metadata = MetadataOf(small);
    metadata[c.key] = c.value;
    const std::string path = WriteModel(c.name + ".safetensors", small, metadata);
    const fsdp_test::ChildRun run = fsdp_test::RunInChild([&] { return ConfigStatus(path); });
    ASSERT_TRUE(run.finished) << c.name << ": " << run.failure;
    EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << run.status;
    EXPECT_TRUE(absl::StrContains(run.status.message(), c.needle)) << c.name << ": " << run.status;
    EXPECT_TRUE(absl::StrContains(run.status.message(), path)) << run.status;
    EXPECT_LT(run.peak_rss_growth_bytes, kPeakLimitBytes) << c.name;
  }
}

TEST(GptSafetensorsTest, ATensorOfAnotherShapeIsNamed) {
  GptConfig wider = SmallConfig();
  wider.d_model = 12;  // every tensor but the metadata's sizes
  GptConfig small = SmallConfig();
  const std::string path = WriteModel("wider.safetensors", wider, MetadataOf(small));
  const absl::Status status = ConfigStatus(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "embedding.wte of shape [16, 8]")) << status;
}

LlamaConfig SmallLlama() {
  LlamaConfig c;
  c.layers = 2;
  c.d_model = 16;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn_hidden = 24;
  c.vocab = 16;
  c.seq_len = 8;
  c.rope_theta = 500000.0f;
  c.norm_eps = 1e-6f;
  return c;
}

std::map<std::string, std::string> MetadataOf(const LlamaConfig& c) {
  return {{"format", "pt"},
          {"family", "llama"},
          {"layers", absl::StrCat(c.layers)},
          {"d_model", absl::StrCat(c.d_model)},
          {"heads", absl::StrCat(c.heads)},
          {"kv_heads", absl::StrCat(c.kv_heads)},
          {"ffn_hidden", absl::StrCat(c.ffn_hidden)},
          {"vocab", absl::StrCat(c.vocab)},
          {"seq_len", absl::StrCat(c.seq_len)},
          {"rope_theta", "500000"},
          {"norm_eps", "1e-06"}};
}

absl::Status LlamaStatus(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader = SafetensorsReader::Open(path);
  if (!reader.ok()) return reader.status();
  return LlamaConfigFromSafetensors(**reader).status();
}

TEST(LlamaSafetensorsTest, AnExportedFileGivesItsFamilyAndConfigBack) {
  const LlamaConfig config = SmallLlama();
  const std::string path =
      WriteUnits("llama.safetensors", LlamaUnitSpecs(config), MetadataOf(config));
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(SafetensorsFamily(**reader), "llama");
  absl::StatusOr<LlamaConfig> read = LlamaConfigFromSafetensors(**reader);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(LlamaConfigToString(*read), LlamaConfigToString(config));
  EXPECT_EQ(read->rope_theta, config.rope_theta);
  EXPECT_EQ(read->norm_eps, config.norm_eps);
  EXPECT_FALSE(read->tie_embeddings);
  // Tied: one tensor fewer (no lm_head.weight), and the flag read back.
  LlamaConfig tied = config;
  tied.tie_embeddings = true;
  std::map<std::string, std::string> tied_metadata = MetadataOf(tied);
  tied_metadata["tie_embeddings"] = "true";
  const std::string tied_path =
      WriteUnits("llama_tied.safetensors", LlamaUnitSpecs(tied), tied_metadata);
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> tied_reader =
      SafetensorsReader::Open(tied_path);
  ASSERT_TRUE(tied_reader.ok()) << tied_reader.status();
  absl::StatusOr<LlamaConfig> tied_read = LlamaConfigFromSafetensors(**tied_reader);
  ASSERT_TRUE(tied_read.ok()) << tied_read.status();
  EXPECT_TRUE(tied_read->tie_embeddings);
  // An untied file whose metadata claim a tied head holds one tensor too many.
  std::map<std::string, std::string> claims_tied = MetadataOf(config);
  claims_tied["tie_embeddings"] = "true";
  const absl::Status mismatch =
      LlamaStatus(WriteUnits("llama_claims_tied.safetensors", LlamaUnitSpecs(config), claims_tied));
  EXPECT_TRUE(absl::StrContains(mismatch.message(), "calls for 20 tensors")) << mismatch;
  claims_tied["tie_embeddings"] = "yes";
  EXPECT_TRUE(absl::StrContains(
      LlamaStatus(WriteUnits("llama_yes.safetensors", LlamaUnitSpecs(config), claims_tied))
          .message(),
      "\"tie_embeddings\" is \"yes\""));
  // A GPT's file, and one written before families were named, read as "gpt".
  const std::string gpt = WriteModel("gpt.safetensors", SmallConfig(), MetadataOf(SmallConfig()));
  std::map<std::string, std::string> unnamed = MetadataOf(SmallConfig());
  unnamed.erase("family");
  const std::string old = WriteModel("old.safetensors", SmallConfig(), unnamed);
  for (const std::string& file : {gpt, old}) {
    absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(file);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(SafetensorsFamily(**r), "gpt") << file;
  }
}

TEST(LlamaSafetensorsTest, MetadataTheTensorsDoNotBackAreRefusedUnder100MB) {
  const LlamaConfig small = SmallLlama();
  struct Case {
    std::string name;
    std::string key;
    std::string value;
    std::string needle;
  };
  const Case cases[] = {
      {"layers", "layers", "2000000000", "calls for 18000000003 tensors"},
      {"vocab", "vocab", "2000000000", "model.embed_tokens.weight of shape [2000000000, 16]"},
      {"d_model_limit", "d_model", "2147483600", "above the limit of 65536"},
      // Not an even head size: the suggested width computed without overflow.
      {"d_model_odd", "d_model", "2147483646", "e.g. d_model 2147483648"},
      {"ffn_limit", "ffn_hidden", "2147483646", "ffn_hidden 2147483646 is above the limit"},
      // Sizes only the rotary table: 2e9 x 4 floats from a 5 KB file.
      {"seq_len", "seq_len", "2000000000", "calls for a rotary table of 8000000000 floats"},
      // Backed by no tensor count or embedding, but by k_proj's shape.
      {"kv_heads", "kv_heads", "1", "k_proj.weight"},
      {"ffn_hidden", "ffn_hidden", "32", "gate_proj.weight"},
      {"kv_divides", "kv_heads", "3", "kv_heads (3) must divide heads (4)"},
      {"theta", "rope_theta", "warm", "no numeric __metadata__ \"rope_theta\""},
      {"eps", "norm_eps", "-1", "norm_eps"},
  };
  for (const Case& c : cases) {
    std::map<std::string, std::string> metadata = MetadataOf(small);
    metadata[c.key] = c.value;
    const std::string path =
        WriteUnits("llama_" + c.name + ".safetensors", LlamaUnitSpecs(small), metadata);
    const fsdp_test::ChildRun run = fsdp_test::RunInChild([&] { return LlamaStatus(path); });
    ASSERT_TRUE(run.finished) << c.name << ": " << run.failure;
    EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << run.status;
    EXPECT_TRUE(absl::StrContains(run.status.message(), c.needle)) << c.name << ": " << run.status;
    EXPECT_TRUE(absl::StrContains(run.status.message(), path)) << run.status;
    EXPECT_LT(run.peak_rss_growth_bytes, kPeakLimitBytes) << c.name;
  }
}

}  // namespace
}  // namespace fsdp::checkpoint
