// File: tests/integration/train/train_gpt_export_test.cc
//
// Safetensors export and import through train_gpt and export_checkpoint,
// real ranks over loopback (docs/checkpoints.md):
//   - --export after a hybrid_shard run, read back by a reader written
//     here (not the library's): the header's tensors are the model's names
//     and shapes in model order, F32, back to back, and the SHA-256 of the
//     data section is the run's param_sha256 (the digest of the gathered
//     parameters in model order);
//   - export_checkpoint of the same run's final checkpoint gives the same
//     bytes, without launching ranks;
//   - --init_from then --export (at another world size and strategy, with
//     --steps=0) is a bitwise round trip, and training from the file starts
//     from its weights;
//   - a missing, extra, wrong-shape or wrong-dtype tensor is a clear error
//     naming it, before any rank starts.
#include <openssl/evp.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

// The independent reader: the u64 length, then each tensor entry of the
// JSON header found by its name, in file order.
struct TensorEntry {
  std::string name;
  std::string dtype;
  std::string shape;  // as written, e.g. "[64,32]"
  uint64_t begin = 0, end = 0;
};

struct ParsedFile {
  std::string header;
  std::string data;
  std::vector<TensorEntry> tensors;  // in data order
};

ParsedFile Parse(const std::string& bytes) {
  ParsedFile parsed;
  EXPECT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | static_cast<unsigned char>(bytes[b]);
  EXPECT_LE(8 + n, bytes.size());
  parsed.header = bytes.substr(8, n);
  parsed.data = bytes.substr(8 + n);
  // "name":{"dtype":"F32","shape":[..],"data_offsets":[b,e]}
  size_t at = 0;
  while ((at = parsed.header.find("{\"dtype\":\"", at)) != std::string::npos) {
    TensorEntry t;
    const size_t name_end = parsed.header.rfind("\":", at);
    const size_t name_begin = parsed.header.rfind('"', name_end - 1) + 1;
    t.name = parsed.header.substr(name_begin, name_end - name_begin);
    const size_t dtype_begin = at + 10;
    t.dtype = parsed.header.substr(dtype_begin, parsed.header.find('"', dtype_begin) - dtype_begin);
    const size_t shape_begin = parsed.header.find("\"shape\":", at) + 8;
    t.shape = parsed.header.substr(shape_begin,
                                   parsed.header.find(']', shape_begin) + 1 - shape_begin);
    const size_t offsets = parsed.header.find("\"data_offsets\":[", at) + 16;
    t.begin = std::strtoull(parsed.header.c_str() + offsets, nullptr, 10);
    t.end = std::strtoull(parsed.header.c_str() + parsed.header.find(',', offsets) + 1, nullptr, 10);
    parsed.tensors.push_back(t);
    at = offsets;
  }
  return parsed;
}

std::vector<std::string> Model(std::vector<std::string> extra) {
  std::vector<std::string> flags = {"--layers=2", "--d_model=32", "--heads=2", "--vocab=64",
                                    "--seq_len=16", "--steps=8", "--warmup_steps=2",
                                    "--threads=1", "--seed=11"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

std::string ExportCheckpointPath() {
  const std::string train_gpt = TrainGptPath();
  return train_gpt.substr(0, train_gpt.rfind('/')) + "/export_checkpoint";
}

class ExportTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    exported_ = new std::string(TmpDir() + "/live.safetensors");
    checkpoints_ = new std::string(TmpDir() + "/export_ckpt");
    run_ = new TrainGptRun(RunTrainGpt(
        "export_source", Model({"--nproc=4", "--strategy=hybrid_shard", "--group_size=2",
                                "--micro_batch=2", "--checkpoint_dir=" + *checkpoints_,
                                "--export=" + *exported_})));
  }
  static std::string* exported_;
  static std::string* checkpoints_;
  static TrainGptRun* run_;
};
std::string* ExportTest::exported_ = nullptr;
std::string* ExportTest::checkpoints_ = nullptr;
TrainGptRun* ExportTest::run_ = nullptr;

TEST_F(ExportTest, TheFileHoldsTheModelsTensorsAndTheGatheredParameters) {
  ASSERT_EQ(run_->exit_code, 0) << run_->output;
  const ParsedFile file = Parse(ReadFile(*exported_));
  // docs/model.md: C = 32, V = 64, T = 16; 2 blocks.
  std::vector<std::pair<std::string, std::string>> expected = {
      {"embedding.wte", "[64,32]"}, {"embedding.wpe", "[16,32]"}};
  for (int l = 0; l < 2; ++l) {
    const std::string b = absl::StrCat("block", l, ".");
    for (const auto& p : std::vector<std::pair<std::string, std::string>>{
             {"ln1.weight", "[32]"},       {"ln1.bias", "[32]"},
             {"attn.qkv.weight", "[96,32]"}, {"attn.qkv.bias", "[96]"},
             {"attn.proj.weight", "[32,32]"}, {"attn.proj.bias", "[32]"},
             {"ln2.weight", "[32]"},       {"ln2.bias", "[32]"},
             {"mlp.fc.weight", "[128,32]"}, {"mlp.fc.bias", "[128]"},
             {"mlp.proj.weight", "[32,128]"}, {"mlp.proj.bias", "[32]"}}) {
      expected.push_back({b + p.first, p.second});
    }
  }
  expected.push_back({"head.ln_f.weight", "[32]"});
  expected.push_back({"head.ln_f.bias", "[32]"});
  expected.push_back({"head.lm_head.weight", "[64,32]"});
  ASSERT_EQ(file.tensors.size(), expected.size()) << file.header;
  uint64_t offset = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].first);
    EXPECT_EQ(file.tensors[i].name, expected[i].first);
    EXPECT_EQ(file.tensors[i].shape, expected[i].second);
    EXPECT_EQ(file.tensors[i].dtype, "F32");
    EXPECT_EQ(file.tensors[i].begin, offset);
    offset = file.tensors[i].end;
  }
  EXPECT_EQ(offset, file.data.size());
  EXPECT_TRUE(absl::StrContains(file.header, "\"__metadata__\":{")) << file.header;
  EXPECT_TRUE(absl::StrContains(file.header, "\"d_model\":\"32\"")) << file.header;
  // Model order, back to back, little-endian: the data section IS what the
  // parameter digest hashes.
  EXPECT_EQ(Sha256Hex(file.data), run_->param_sha256);
}

TEST_F(ExportTest, TheOfflineConverterWritesTheSameBytes) {
  ASSERT_EQ(run_->exit_code, 0) << run_->output;
  const std::string out = TmpDir() + "/converted.safetensors";
  const std::string command =
      absl::StrCat(ExportCheckpointPath(), " --checkpoint=", *checkpoints_,
                   "/step-00000008 --out=", out, " --piece_numel=100 2>&1");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  EXPECT_EQ(ReadFile(out), ReadFile(*exported_));
  // A directory that is not a checkpoint.
  const std::string bad = absl::StrCat(ExportCheckpointPath(), " --checkpoint=", TmpDir(),
                                       " --out=", TmpDir(), "/never.safetensors > ", TmpDir(),
                                       "/bad.log 2>&1");
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_TRUE(absl::StrContains(ReadFile(TmpDir() + "/bad.log"), "not a complete checkpoint"));
  EXPECT_TRUE(ReadFile(TmpDir() + "/never.safetensors").empty());
}

TEST_F(ExportTest, ImportThenExportIsABitwiseRoundTrip) {
  ASSERT_EQ(run_->exit_code, 0) << run_->output;
  const std::string again = TmpDir() + "/again.safetensors";
  const TrainGptRun round = RunTrainGpt(
      "round_trip", Model({"--nproc=3", "--strategy=shard_grad_op", "--micro_batch=2",
                           "--steps=0", "--init_from=" + *exported_, "--export=" + again}));
  ASSERT_EQ(round.exit_code, 0) << round.output;
  EXPECT_EQ(ReadFile(again), ReadFile(*exported_));
  EXPECT_EQ(round.param_sha256, run_->param_sha256);
  // Training from the file starts from its weights: the first loss differs
  // from a run from the seed.
  const TrainGptRun from_file = RunTrainGpt(
      "from_file", Model({"--nproc=2", "--strategy=full_shard", "--micro_batch=4",
                          "--init_from=" + *exported_}));
  const TrainGptRun from_seed =
      RunTrainGpt("from_seed", Model({"--nproc=2", "--strategy=full_shard", "--micro_batch=4"}));
  ASSERT_EQ(from_file.exit_code, 0) << from_file.output;
  ASSERT_FALSE(from_file.losses.empty());
  ASSERT_FALSE(from_seed.losses.empty());
  EXPECT_LT(from_file.losses[0], from_seed.losses[0] - 0.1) << from_file.output;
}

TEST_F(ExportTest, AFileThatDoesNotFitIsAClearErrorNamingTheTensor) {
  ASSERT_EQ(run_->exit_code, 0) << run_->output;
  const std::string good = ReadFile(*exported_);
  const struct {
    const char* name;
    std::string bytes;
    std::vector<std::string> flags;
    std::vector<std::string> expected;
  } cases[] = {
      // Same length, so every offset stays valid: wte is missing, "wtX" extra.
      {"missing",
       absl::StrReplaceAll(good, {{"\"embedding.wte\"", "\"embedding.wtX\""}}),
       {},
       {"has no tensor embedding.wte"}},
      {"wrong dtype",
       absl::StrReplaceAll(good, {{"\"embedding.wpe\":{\"dtype\":\"F32\"",
                                   "\"embedding.wpe\":{\"dtype\":\"I32\""}}),
       {},
       {"embedding.wpe is I32"}},
      {"wrong shape", good, {"--d_model=16", "--heads=2"}, {"embedding.wte has shape [64, 32]",
                                                              "[64, 16]"}},
      {"extra", good, {"--layers=1"}, {"block1.", "does not have"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path =
        absl::StrCat(TmpDir(), "/bad_", absl::StrReplaceAll(c.name, {{" ", "_"}}), ".safetensors");
    WriteFile(path, c.bytes);
    std::vector<std::string> flags = Model({"--nproc=2", "--strategy=full_shard",
                                            "--micro_batch=4", "--init_from=" + path});
    flags.insert(flags.end(), c.flags.begin(), c.flags.end());
    const TrainGptRun run = RunTrainGpt("bad_import", flags);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    for (const std::string& e : c.expected) {
      EXPECT_TRUE(absl::StrContains(run.output, e)) << run.output;
    }
    EXPECT_TRUE(run.losses.empty()) << run.output;
  }
  const TrainGptRun conflict = RunTrainGpt(
      "conflict", Model({"--init_from=" + *exported_, "--resume", "--checkpoint_dir=" + TmpDir()}));
  EXPECT_EQ(conflict.exit_code, 2) << conflict.output;
  EXPECT_TRUE(absl::StrContains(conflict.output, "--init_from conflicts with --resume"))
      << conflict.output;
}

}  // namespace
}  // namespace fsdp_test
