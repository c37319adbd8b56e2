// File: tests/integration/train/train_gpt_faults_test.cc
//
// Faults injected by the transport itself (FSDP_FAULTS,
// comm/fault_injection.h) into train_gpt jobs of 4 real ranks: sends held
// back change no bit; a rank that kills or stops itself at an operation
// drawn from the seed is recovered from the survivors' memory and the job
// ends with the digest of the run without faults (--exact); a lost message
// ends the job by its deadline, naming the rank waited for; a bad spec is
// refused before anything runs. FSDP_FAULTS_TEST_SEED draws other faults.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

constexpr int kSteps = 40;

int TestSeed() {
  const char* seed = std::getenv("FSDP_FAULTS_TEST_SEED");
  return seed != nullptr ? std::atoi(seed) : 4;
}

// FSDP_FAULTS for one job.
class ScopedFaults {
 public:
  explicit ScopedFaults(const std::string& spec) { setenv("FSDP_FAULTS", spec.c_str(), 1); }
  ~ScopedFaults() { unsetenv("FSDP_FAULTS"); }
};

std::vector<std::string> ExactFlags() {
  std::vector<std::string> flags = ElasticJobFlags(kSteps);
  flags.push_back("--exact");
  return flags;
}

// The digest of the job without faults, computed once.
const std::string& CleanDigest() {
  static const std::string* digest = [] {
    const TrainGptRun run = RunTrainGptJob("clean", ExactFlags(), {}, kSteps);
    return new std::string(run.param_sha256);
  }();
  return *digest;
}

TEST(TrainGptFaultsTest, HeldBackSendsChangeNoBit) {
  std::vector<std::string> flags = ElasticJobFlags(8);  // rounded as usual: not --exact
  const TrainGptRun clean = RunTrainGptJob("delays_clean", flags, {}, 8);
  ScopedFaults faults(absl::StrCat("seed=", TestSeed(), ",delay=0.3:0-4ms"));
  const TrainGptRun delayed = RunTrainGptJob("delays", flags, {}, 8);
  EXPECT_TRUE(absl::StrContains(delayed.output, "0.3 of sends held back 0-4 ms")) << delayed.output;
  EXPECT_EQ(delayed.param_sha256, clean.param_sha256) << delayed.output;
  EXPECT_EQ(delayed.losses, clean.losses);
}

// A rank drawn from the seed kills (or stops) itself at an operation drawn
// from the seed, somewhere in steps 3-20 (about 200 operations a step).
void ExpectRecovered(const std::string& action, const std::vector<std::string>& extra) {
  const std::string clean = CleanDigest();  // before the faults are set
  ScopedFaults faults(absl::StrCat("seed=", TestSeed(), ",", action, "=any@random:600-4000"));
  std::vector<std::string> more = {"--min_nproc=2", "--buddy_every=1"};
  more.insert(more.end(), extra.begin(), extra.end());
  const TrainGptRun run = RunTrainGptJob(action, ExactFlags(), more, kSteps);
  EXPECT_TRUE(absl::StrContains(run.output,
                                absl::StrCat("itself (SIG", action == "kill" ? "KILL" : "STOP")))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "going on without rank")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "resumed from")) << run.output;
  EXPECT_EQ(run.param_sha256, clean) << run.output;
  EXPECT_EQ(UcxWarningLines(run.output), std::vector<std::string>()) << run.output;
}

TEST(TrainGptFaultsTest, ARankKilledAtADrawnOperationIsRecoveredWithTheSameBits) {
  ExpectRecovered("kill", {});
}

TEST(TrainGptFaultsTest, ARankStoppedAtADrawnOperationIsFoundHungAndLeftOut) {
  ExpectRecovered("stop", {"--hang_timeout_s=2"});
}

TEST(TrainGptFaultsTest, ALostMessageEndsTheJobByItsDeadlineNamingTheRankWaitedFor) {
  ScopedFaults faults(absl::StrCat("seed=", TestSeed(), ",drop=0.002"));
  const TrainGptRun run = RunTrainGpt("drop", [] {
    std::vector<std::string> flags = ElasticJobFlags(kSteps);
    flags.push_back("--comm_timeout_s=3");
    return flags;
  }());
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "waited 3.")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "s for rank ")) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "train_gpt: done")) << run.output;
}

TEST(TrainGptFaultsTest, ABadSpecIsRefusedNamingWhatIsWrong) {
  ScopedFaults faults("kill=7@100");
  const TrainGptRun run = RunTrainGpt("bad_spec", ElasticJobFlags(2));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(run.output, "FSDP_FAULTS: kill names rank 7, but the job has 4"))
      << run.output;
  ScopedFaults typo("dleay=0.1:1-2ms");
  const TrainGptRun typo_run = RunTrainGpt("bad_key", ElasticJobFlags(2));
  EXPECT_NE(typo_run.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(typo_run.output, "'dleay=0.1:1-2ms': unknown key"))
      << typo_run.output;
}

}  // namespace
}  // namespace fsdp_test
