// File: tests/integration/train/train_gpt_runner.cc
#include "tests/integration/train/train_gpt_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace fsdp_test {
namespace {

// The number after "\"key\":" in a JSON line, or NaN.
double NumberField(const std::string& line, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = line.find(needle);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(line.c_str() + at + needle.size(), nullptr);
}

std::string StringField(const std::string& line, const std::string& key) {
  const std::string needle = "\"" + key + "\":\"";
  const size_t at = line.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = at + needle.size();
  return line.substr(begin, line.find('"', begin) - begin);
}

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

}  // namespace

std::string TrainGptPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "fsdp_cpp",
                      "/examples/train_gpt");
}

std::string ExamplePath(const std::string& name) {
  const std::string train_gpt = TrainGptPath();
  return train_gpt.substr(0, train_gpt.rfind('/') + 1) + name;
}

int RunCommand(const std::string& command, std::string* output) {
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  output->clear();
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

const std::string& TokenizedFortunes(int vocab) {
  static const std::string* prefix = [vocab] {
    auto* p = new std::string(absl::StrCat(TmpDir(), "/fortunes"));
    std::string output;
    const int code = RunCommand(
        absl::StrCat(ExamplePath("tokenize"), " --input=/usr/share/games/fortunes/fortunes",
                     " --vocab=", vocab, " --out=", *p),
        &output);
    EXPECT_EQ(code, 0) << output << " (tools/setup.sh installs fortunes)";
    return p;
  }();
  return *prefix;
}

TrainGptRun RunTrainGptJob(const std::string& run_name, std::vector<std::string> base,
                           const std::vector<std::string>& extra, int steps) {
  base.insert(base.end(), extra.begin(), extra.end());
  TrainGptRun run = RunTrainGpt(run_name, base);
  EXPECT_EQ(run.exit_code, 0) << run_name << " output:\n" << run.output;
  EXPECT_EQ(run.losses.size(), static_cast<size_t>(steps)) << run_name << "\n" << run.output;
  EXPECT_EQ(run.param_sha256.size(), 64u) << run_name;
  return run;
}

TrainGptRun RunTrainGpt(const std::string& run_name, const std::vector<std::string>& flags) {
  return RunTrainGptBinary(TrainGptPath(), run_name, flags);
}

TrainGptRun RunTrainGptBinary(const std::string& binary, const std::string& run_name,
                              const std::vector<std::string>& flags) {
  const std::string metrics = absl::StrCat(TmpDir(), "/", run_name, ".jsonl");
  std::remove(metrics.c_str());
  std::string command = binary;
  for (const std::string& flag : flags) absl::StrAppend(&command, " '", flag, "'");
  absl::StrAppend(&command, " --metrics_out=", metrics, " 2>&1");
  TrainGptRun run;
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"final\":true") != std::string::npos) {
      run.has_final_line = true;
      run.param_sha256 = StringField(line, "param_sha256");
      run.matmul_backend = StringField(line, "matmul_backend");
      if (line.find("\"gradient_noise_scale\":") != std::string::npos) {
        run.has_noise_scale = true;
        run.noise_scale = NumberField(line, "gradient_noise_scale");
        run.noise_scale_stderr = NumberField(line, "gradient_noise_scale_stderr");
      }
    } else if (line.find("\"loss\":") != std::string::npos) {
      run.losses.push_back(NumberField(line, "loss"));
      run.lrs.push_back(NumberField(line, "lr"));
    }
    if (line.find("\"val_loss\":") != std::string::npos) {
      run.val_losses.push_back(NumberField(line, "val_loss"));
    }
  }
  return run;
}

std::vector<std::string> ElasticJobFlags(int steps) {
  return {"--layers=2",        "--d_model=64",       "--heads=2",     "--vocab=64",
          "--seq_len=32",      "--micro_batch=2",    "--accum=3",     "--nproc=4",
          "--strategy=full_shard", absl::StrCat("--steps=", steps), "--warmup_steps=2",
          "--threads=1",       "--seed=5"};
}

pid_t StartTrainGpt(const std::vector<std::string>& flags, const std::string& log) {
  std::vector<std::string> args = {TrainGptPath()};
  args.insert(args.end(), flags.begin(), flags.end());
  const pid_t pid = fork();
  if (pid != 0) return pid;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (std::freopen(log.c_str(), "w", stdout) == nullptr) _exit(126);
  dup2(fileno(stdout), 2);
  execv(argv[0], argv.data());
  _exit(127);
}

std::vector<pid_t> ChildPids(pid_t pid) {
  std::vector<pid_t> children;
  std::ifstream in(absl::StrCat("/proc/", pid, "/task/", pid, "/children"));
  pid_t child;
  while (in >> child) children.push_back(child);
  return children;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int CountLines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

pid_t RankPid(const std::vector<pid_t>& pids, int rank) {
  const std::string needle = absl::StrCat(std::string(1, '\0'), "RANK=", rank,
                                          std::string(1, '\0'));
  for (pid_t pid : pids) {
    if (ReadWholeFile(absl::StrCat("/proc/", pid, "/environ")).find(needle) != std::string::npos) {
      return pid;
    }
  }
  return -1;
}

std::vector<std::string> UcxWarningLines(const std::string& output) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StrContains(line, "UCX  WARN") || absl::StrContains(line, "UCX  ERROR")) {
      lines.emplace_back(line);
    }
  }
  return lines;
}

std::string SampleText(const std::string& output) {
  const size_t header = output.rfind("---- sample after step");
  const size_t marker = output.rfind("---- end of sample ----");
  if (header == std::string::npos || marker == std::string::npos || marker < header) return "";
  const size_t begin = output.find('\n', header) + 1;
  const size_t end = output.rfind('\n', marker) + 1;  // start of the end marker's line
  if (end <= begin) return "";
  const std::string block = output.substr(begin, end - begin);
  std::string text;
  size_t at = 0;
  while (at < block.size()) {
    const size_t eol = block.find('\n', at);
    std::string line = block.substr(at, eol - at);
    if (line.rfind("[rank 0] ", 0) == 0) line = line.substr(9);
    text += line + "\n";
    at = eol + 1;
  }
  return text;
}

}  // namespace fsdp_test
