// File: tests/integration/train/bad_inputs_test.cc
//
// Issue #39, end to end: each bad input file given to train_gpt or generate
// is refused with a clear error, and the whole process (every rank and the
// launcher: wait4 reports the largest peak among a child and the children it
// reaped) stays under 100 MB of resident memory. Before the fix the
// tokenizer reached 5.2 GB and the token file 4.2 GB per rank.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fsdp/checkpoint/safetensors.h"
#include "fsdp/data/token_file.h"
#include "fsdp/nn/gpt_spec.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

constexpr int64_t kPeakLimitBytes = int64_t{100} << 20;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string RunfilePath(const std::string& target_path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "fsdp_cpp", "/",
                      target_path);
}

struct Measured {
  int exit_code = -1;          // -1: killed by a signal or the deadline
  std::string output;          // stdout and stderr
  int64_t peak_rss_bytes = 0;  // the largest of the process and its reaped children
};

// Runs `args` (args[0] is the binary) to completion, at most two minutes.
Measured RunMeasured(const std::string& name, const std::vector<std::string>& args) {
  const std::string log = TempPath(name + ".log");
  Measured m;
  std::fflush(nullptr);  // or the child's exit would print our buffered lines again
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (std::freopen(log.c_str(), "w", stdout) == nullptr) _exit(126);
    dup2(fileno(stdout), 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + absl::Minutes(2);
  int status = 0;
  struct rusage usage = {};
  for (;;) {
    const pid_t done = wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &usage);
      m.output = "(killed after 2 minutes) ";
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  m.peak_rss_bytes = int64_t{usage.ru_maxrss} * 1024;
  m.output += ReadWholeFile(log);
  std::printf("%s: exit %d, peak RSS %.1f MiB\n", name.c_str(), m.exit_code,
              m.peak_rss_bytes / 1048576.0);
  return m;
}

void ExpectRefusedUnder100MB(const Measured& m, const std::vector<std::string>& needles) {
  EXPECT_NE(m.exit_code, 0) << m.output;
  EXPECT_NE(m.exit_code, -1) << m.output;  // an error, not a crash
  for (const std::string& needle : needles) {
    EXPECT_TRUE(absl::StrContains(m.output, needle)) << "no '" << needle << "' in\n" << m.output;
  }
  EXPECT_LT(m.peak_rss_bytes, kPeakLimitBytes) << m.output;
}

// The 40-line file: each merge doubles the last token's length.
std::string DoublingTokenizer() {
  const std::string path = TempPath("doubling.tokenizer");
  std::ofstream out(path);
  out << "fsdp-byte-bpe 1\nmerges 38\n65 65\n";
  for (int i = 0; i < 37; ++i) out << 256 + i << " " << 256 + i << "\n";
  return path;
}

// A header announcing 2^31 - 1 tokens with 100 behind it.
std::string AnnouncesTwoGigaTokens() {
  const std::string path = TempPath("announces_2g.bin");
  std::ofstream out(path, std::ios::binary);
  std::vector<int32_t> header(fsdp::kTokenFileHeaderInts, 0);
  header[0] = fsdp::kTokenFileMagic;
  header[1] = fsdp::kTokenFileVersion;
  header[2] = INT32_MAX;
  out.write(reinterpret_cast<const char*>(header.data()), header.size() * sizeof(int32_t));
  const std::vector<uint16_t> tokens(100, 7);
  out.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(uint16_t));
  return path;
}

// A small GPT's tensors (zeros) with its config in __metadata__, `key` then
// overridden to `value` (none if `key` is empty).
std::string ExportedModel(const std::string& name, const std::string& key,
                          const std::string& value) {
  fsdp::GptConfig config;
  config.layers = 1;
  config.d_model = 16;
  config.heads = 2;
  config.vocab = 512;
  config.seq_len = 16;
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"family", "gpt"}, {"layers", "1"},  {"d_model", "16"},
      {"heads", "2"},   {"vocab", "512"},  {"seq_len", "16"}};
  if (!key.empty()) metadata[key] = value;
  std::vector<fsdp::checkpoint::SafetensorsTensorSpec> specs;
  for (const fsdp::UnitSpec& unit : fsdp::GptUnitSpecs(config)) {
    for (const fsdp::ParamSpec& p : unit.params) {
      specs.push_back({p.name, std::vector<uint64_t>(p.shape.begin(), p.shape.end())});
    }
  }
  const std::string path = TempPath(name);
  auto writer = fsdp::checkpoint::SafetensorsWriter::Create(path, specs, metadata);
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (const fsdp::UnitSpec& unit : fsdp::GptUnitSpecs(config)) {
    for (const fsdp::ParamSpec& p : unit.params) {
      EXPECT_TRUE((*writer)->Append(std::vector<float>(p.numel(), 0.0f)).ok());
    }
  }
  EXPECT_TRUE((*writer)->Finish().ok());
  return path;
}

std::vector<std::string> SmallRun(std::vector<std::string> flags) {
  std::vector<std::string> args = {
      TrainGptPath(),           "--nproc=1",       "--layers=1", "--d_model=16",     "--heads=2",
      "--seq_len=16",           "--micro_batch=1", "--steps=4",  "--warmup_steps=1", "--vocab=512",
      "--matmul_backend=onednn"};
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

TEST(BadInputsTest, TrainGptRefusesTheDoublingTokenizer) {
  // The command: --sample_every=1 --sample_tokens=8.
  const Measured m = RunMeasured(
      "train_doubling",
      SmallRun({"--tokenizer=" + DoublingTokenizer(), "--sample_every=1", "--sample_tokens=8"}));
  ExpectRefusedUnder100MB(m, {"doubling.tokenizer", "line 11",
                              "512 bytes long, more than the limit of 256 bytes per token"});
}

TEST(BadInputsTest, TrainGptRefusesATokenFileLongerInItsHeaderThanOnDisk) {
  const std::string path = AnnouncesTwoGigaTokens();
  ExpectRefusedUnder100MB(RunMeasured("train_data", SmallRun({"--data=" + path})),
                          {path, "announces 2147483647 tokens but only 100 follow"});
  ExpectRefusedUnder100MB(
      RunMeasured("train_val_data", SmallRun({"--val_data=" + path, "--val_every=1"})),
      {path, "announces 2147483647 tokens but only 100 follow"});
}

TEST(BadInputsTest, GenerateRefusesMetadataItsTensorsDoNotBack) {
  const std::string generate = RunfilePath("examples/generate");
  const std::string layers = ExportedModel("layers.safetensors", "layers", "2000000000");
  ExpectRefusedUnder100MB(
      RunMeasured("generate_layers", {generate, "--safetensors=" + layers, "--tokens=4"}),
      {layers, "layers 2000000000 calls for 24000000005 tensors"});
  const std::string d_model = ExportedModel("d_model.safetensors", "d_model", "65536");
  ExpectRefusedUnder100MB(
      RunMeasured("generate_d_model", {generate, "--safetensors=" + d_model, "--tokens=4"}),
      {d_model, "embedding.wte of shape [512, 65536]"});
  // A good model with the doubling tokenizer.
  const std::string good = ExportedModel("good.safetensors", "", "");
  ExpectRefusedUnder100MB(
      RunMeasured("generate_tokenizer", {generate, "--safetensors=" + good,
                                         "--tokenizer=" + DoublingTokenizer(), "--tokens=4"}),
      {"doubling.tokenizer", "line 11", "limit of 256 bytes per token"});
  // The same model and no tokenizer generates: the files above were refused
  // for what they hold, not for the model.
  const Measured ok = RunMeasured(
      "generate_good", {generate, "--safetensors=" + good, "--tokens=4", "--temperature=0"});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

}  // namespace
}  // namespace fsdp_test
