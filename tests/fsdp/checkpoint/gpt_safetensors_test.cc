// File: tests/fsdp/checkpoint/gpt_safetensors_test.cc
//
// generate's model config comes from a safetensors file's __metadata__
// (issue #39): an exported file gives its config back, and metadata the
// tensors do not back (layers or sizes of any magnitude) are refused with
// a clear error before anything is sized by them, measured under 100 MB of
// peak memory.
#include "fsdp/checkpoint/gpt_safetensors.h"

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

// The tensors of `tensors_of` (zeros) with `metadata`.
std::string WriteModel(const std::string& name, const GptConfig& tensors_of,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsTensorSpec> specs;
  for (const UnitSpec& unit : GptUnitSpecs(tensors_of)) {
    for (const ParamSpec& p : unit.params) {
      specs.push_back({p.name, std::vector<uint64_t>(p.shape.begin(), p.shape.end())});
    }
  }
  const std::string path = TempPath(name);
  absl::StatusOr<std::unique_ptr<SafetensorsWriter>> writer =
      SafetensorsWriter::Create(path, specs, metadata);
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return path;
  for (const UnitSpec& unit : GptUnitSpecs(tensors_of)) {
    for (const ParamSpec& p : unit.params) {
      EXPECT_TRUE((*writer)->Append(std::vector<float>(p.numel(), 0.0f)).ok());
    }
  }
  EXPECT_TRUE((*writer)->Finish().ok());
  return path;
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

}  // namespace
}  // namespace fsdp::checkpoint
