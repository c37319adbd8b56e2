// File: tests/integration/train/train_gpt_backend_test.cc
//
// The same command gives the same bits every time. train_gpt runs without
// --matmul_backend, so the product backend is its default: a rule of the
// machine and the build (fsdp/nn/matmul.h DefaultMatmulBackend), never a
// timing. While another process keeps a core busy (a timed choice is what
// such load used to flip), the same fortunes command runs at 1 and at 2 ranks,
// twice each:
//   - every run names one backend, the same one, on its start-up line and in
//     its metrics file, and says it was the default's choice;
//   - the two runs at a world size end with one parameter digest;
//   - every run's val_loss (before training, mid-way, after the last step) is
//     the same within 1e-6 relative (val_loss does not depend on the world
//     size).
// And below AVX2 (oneDNN capped with ONEDNN_MAX_CPU_ISA) the default is
// OpenBLAS.
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

// A child process that spins on the CPU until this object goes (or the test
// process dies, or 10 minutes pass).
class CpuLoad {
 public:
  CpuLoad() {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      alarm(600);
      volatile unsigned long spin = 0;
      for (;;) spin = spin + 1;
    }
  }
  ~CpuLoad() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

std::vector<std::string> Flags(int nproc) {
  const std::string prefix = TokenizedFortunes(300);
  // The same global batch at both world sizes; no --threads either: the
  // command a user would type.
  return {absl::StrCat("--nproc=", nproc), absl::StrCat("--micro_batch=", 8 / nproc),
          "--strategy=full_shard", "--data=" + prefix + "_train.bin",
          "--val_data=" + prefix + "_val.bin", "--vocab=300", "--layers=2", "--d_model=32",
          "--heads=2", "--seq_len=32", "--steps=6", "--warmup_steps=2", "--val_every=3",
          "--val_batches=2"};
}

// "onednn" from "train_gpt: matmul backend onednn (default: ...", or "".
std::string StartupBackend(const std::string& output) {
  const std::string marker = "train_gpt: matmul backend ";
  const size_t at = output.find(marker);
  if (at == std::string::npos) return "";
  const size_t begin = at + marker.size();
  return output.substr(begin, output.find(' ', begin) - begin);
}

TEST(TrainGptBackendTest, TheDefaultBackendGivesTheSameBitsEveryRunUnderLoad) {
  TokenizedFortunes(300);  // before the load: tokenizing is not under test
  CpuLoad load;
  ASSERT_TRUE(load.started());

  std::string backend;
  std::vector<double> reference_val;
  for (int nproc : {1, 2}) {
    std::string digest;
    for (int repeat = 0; repeat < 2; ++repeat) {
      const std::string name = absl::StrCat("backend_", nproc, "_", repeat);
      const TrainGptRun run = RunTrainGpt(name, Flags(nproc));
      ASSERT_EQ(run.exit_code, 0) << run.output;
      ASSERT_TRUE(run.has_final_line) << run.output;

      // One backend, named on the start-up line and in the metrics file,
      // chosen by the default rule (not by a timing).
      const std::string named = StartupBackend(run.output);
      EXPECT_TRUE(named == "onednn" || named == "openblas") << run.output;
      EXPECT_NE(run.output.find("matmul backend " + named + " (default: "), std::string::npos)
          << run.output;
      EXPECT_EQ(run.matmul_backend, named) << name;
      if (backend.empty()) backend = named;
      EXPECT_EQ(named, backend) << name;

      // One digest per world size.
      ASSERT_EQ(run.param_sha256.size(), 64u) << run.output;
      if (digest.empty()) digest = run.param_sha256;
      EXPECT_EQ(run.param_sha256, digest) << name << " differs from the first run at nproc "
                                          << nproc;

      // One validation loss for every run.
      ASSERT_EQ(run.val_losses.size(), 3u) << name;  // steps 0, 3, 6
      if (reference_val.empty()) reference_val = run.val_losses;
      for (size_t i = 0; i < run.val_losses.size(); ++i) {
        EXPECT_NEAR(run.val_losses[i], reference_val[i], 1e-6 * reference_val[i])
            << name << ", evaluation " << i;
      }
    }
  }
}

// The rule follows the instruction set oneDNN runs with: capped below AVX2
// (ONEDNN_MAX_CPU_ISA, which oneDNN honours), the default is OpenBLAS.
TEST(TrainGptBackendTest, BelowAvx2TheDefaultIsOpenBlas) {
  ASSERT_EQ(setenv("ONEDNN_MAX_CPU_ISA", "SSE41", 1), 0);
  const TrainGptRun run = RunTrainGpt(
      "backend_sse41", {"--nproc=1", "--micro_batch=2", "--layers=1", "--d_model=32",
                        "--heads=2", "--vocab=64", "--seq_len=16", "--steps=2",
                        "--warmup_steps=1"});
  unsetenv("ONEDNN_MAX_CPU_ISA");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("matmul backend openblas (default: oneDNN's instruction set here is "
                            "sse41 (older than AVX2)"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.matmul_backend, "openblas");
}

}  // namespace
}  // namespace fsdp_test
