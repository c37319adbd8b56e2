// File: tests/integration/train/train_gpt_text_test.cc
//
// Real text through train_gpt with real ranks over loopback: the tokenize
// example prepares a fortunes file, then
//   - val_loss (before training and after the last step) is the same at 1,
//     2 and 4 ranks and under every strategy, within 1e-6 relative;
//   - the sample is the same for a seed, run twice, under no_shard and
//     full_shard, and another seed gives other text; greedy works too;
//   - //examples:generate on the run's export, and on its checkpoint,
//     prints the run's own sample;
//   - --plot writes a PNG (header and IHDR checked) from a script holding
//     the run's train and val series;
//   - bad text flags are refused by the parent before any rank starts.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fsdp/run/metrics_plot.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

std::string Tmp() { return std::getenv("TEST_TMPDIR"); }

// The fortunes file tokenized once for the whole test (vocabulary 300).
const std::string& Prefix() { return TokenizedFortunes(300); }

std::vector<std::string> Flags(int nproc, int micro_batch, const std::string& strategy) {
  return {absl::StrCat("--nproc=", nproc), absl::StrCat("--micro_batch=", micro_batch),
          "--strategy=" + strategy, "--data=" + Prefix() + "_train.bin",
          "--val_data=" + Prefix() + "_val.bin", "--vocab=300", "--layers=2", "--d_model=32",
          "--heads=2", "--seq_len=32", "--steps=6", "--warmup_steps=2", "--val_every=3",
          "--val_batches=2",
          "--threads=1"};
}

// (step, val_loss) of a run's metrics file.
std::vector<std::pair<int, double>> ValLosses(const std::string& run_name) {
  absl::StatusOr<fsdp::MetricsRun> run =
      fsdp::ReadMetricsFile(absl::StrCat(Tmp(), "/", run_name, ".jsonl"), run_name);
  EXPECT_TRUE(run.ok()) << run.status();
  std::vector<std::pair<int, double>> out;
  if (!run.ok()) return out;
  for (const fsdp::MetricsPoint& p : run->points) {
    if (p.has_val) out.emplace_back(p.step, p.val_loss);
  }
  return out;
}

TEST(TrainGptTextTest, ValLossIsTheSameForEveryWorldSizeAndStrategy) {
  struct Case {
    int nproc, micro_batch;
    std::string strategy;
    std::vector<std::string> extra;
  };
  const std::vector<Case> cases = {
      {1, 8, "no_shard", {}},       {2, 4, "no_shard", {}},
      {2, 4, "full_shard", {}},     {4, 2, "full_shard", {}},
      {4, 2, "shard_grad_op", {}},  {2, 4, "shard_optimizer", {}},
      {4, 2, "hybrid_shard", {"--group_size=2"}},
  };
  std::vector<std::pair<int, double>> reference;
  for (const Case& c : cases) {
    const std::string name = absl::StrCat("val_", c.nproc, "_", c.strategy);
    std::vector<std::string> flags = Flags(c.nproc, c.micro_batch, c.strategy);
    flags.insert(flags.end(), c.extra.begin(), c.extra.end());
    const TrainGptRun run = RunTrainGpt(name, flags);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("| val_loss "), std::string::npos) << run.output;
    const std::vector<std::pair<int, double>> val = ValLosses(name);
    ASSERT_EQ(val.size(), 3u) << name;  // steps 0, 3, 6
    EXPECT_EQ(val[0].first, 0);
    EXPECT_EQ(val[2].first, 6);
    // Untrained, the loss is about ln(vocab); training lowers it.
    EXPECT_NEAR(val[0].second, std::log(300.0), 0.2);
    EXPECT_LT(val[2].second, val[0].second);
    if (reference.empty()) {
      reference = val;
      continue;
    }
    for (size_t i = 0; i < val.size(); ++i) {
      EXPECT_NEAR(val[i].second, reference[i].second, 1e-6 * reference[i].second)
          << name << " at step " << val[i].first;
    }
  }
}

TEST(TrainGptTextTest, SamplesAreDeterministicAndEqualAcrossStrategies) {
  auto sample = [](const std::string& name, int nproc, const std::string& strategy,
                   const std::vector<std::string>& extra) {
    std::vector<std::string> flags = Flags(nproc, 8 / nproc, strategy);
    flags.push_back("--sample_tokens=40");
    flags.push_back("--sample_every=3");
    flags.push_back("--prompt=The ");
    flags.insert(flags.end(), extra.begin(), extra.end());
    const TrainGptRun run = RunTrainGpt(name, flags);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    if (::testing::Test::HasFailure()) return std::string();
    // One sample at step 3 and one at the end.
    EXPECT_NE(run.output.find("---- sample after step 3 ("),
              std::string::npos) << run.output;
    EXPECT_NE(run.output.find("---- sample after step 6"), std::string::npos);
    return SampleText(run.output);
  };
  const std::string no_shard = sample("sample_no_shard", 2, "no_shard", {});
  ASSERT_FALSE(no_shard.empty());
  EXPECT_EQ(no_shard.rfind("The ", 0), 0u) << no_shard;  // continues the prompt
  EXPECT_GT(no_shard.size(), 40u);                       // 40 tokens of >= 1 byte
  EXPECT_EQ(sample("sample_no_shard_again", 2, "no_shard", {}), no_shard);
  EXPECT_EQ(sample("sample_full_shard", 2, "full_shard", {}), no_shard);
  EXPECT_NE(sample("sample_seed_2", 2, "full_shard", {"--sample_seed=2"}), no_shard);
  const std::string greedy = sample("sample_greedy", 2, "full_shard", {"--temperature=0"});
  EXPECT_EQ(sample("sample_greedy_no_shard", 2, "no_shard", {"--temperature=0"}), greedy);
}

TEST(TrainGptTextTest, GenerateFromTheExportOrCheckpointPrintsTheRunsSample) {
  const std::string exported = Tmp() + "/text.safetensors";
  std::vector<std::string> flags = Flags(2, 4, "full_shard");
  const std::string checkpoints = Tmp() + "/text_checkpoints";
  flags.insert(flags.end(), {"--sample_tokens=30", "--sample_seed=5", "--export=" + exported,
                             "--checkpoint_dir=" + checkpoints});
  const TrainGptRun run = RunTrainGpt("generate_source", flags);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string output;
  ASSERT_EQ(RunCommand(absl::StrCat(ExamplePath("generate"), " --safetensors=", exported,
                             " --tokenizer=", Prefix(), ".tokenizer --tokens=30 --seed=5"),
                &output),
            0)
      << output;
  EXPECT_EQ(output, SampleText(run.output));
  // From the sharded checkpoint of the same step: the same weights, the same text.
  ASSERT_EQ(RunCommand(absl::StrCat(ExamplePath("generate"), " --checkpoint=", checkpoints,
                                    "/step-00000006 --tokenizer=", Prefix(),
                                    ".tokenizer --tokens=30 --seed=5"),
                       &output),
            0)
      << output;
  EXPECT_EQ(output, SampleText(run.output));
  EXPECT_NE(RunCommand(
                absl::StrCat(ExamplePath("generate"), " --safetensors=/nonexistent.safetensors"),
                &output),
            0);
  EXPECT_NE(output.find("/nonexistent.safetensors"), std::string::npos) << output;
}

TEST(TrainGptTextTest, PlotIsAPngOfTheRunsSeries) {
  const std::string png = Tmp() + "/curves.png";
  std::vector<std::string> flags = Flags(2, 4, "full_shard");
  flags.push_back("--plot=" + png);
  const TrainGptRun run = RunTrainGpt("plot", flags);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("plotted"), std::string::npos) << run.output;
  const std::string bytes = ReadWholeFile(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  const std::string script = ReadWholeFile(png + ".gp");
  EXPECT_NE(script.find("'full_shard train'"), std::string::npos) << script;
  EXPECT_NE(script.find("'full_shard val'"), std::string::npos);
  EXPECT_NE(script.find("'full_shard tok/s'"), std::string::npos);
  // Its data: the six steps' losses and the three evaluations.
  absl::StatusOr<fsdp::MetricsRun> metrics =
      fsdp::ReadMetricsFile(Tmp() + "/plot.jsonl", "full_shard");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(script, fsdp::MetricsGnuplotScript({*metrics}, png));
  int train_rows = 0;
  for (const auto& p : metrics->points) train_rows += p.has_loss;
  EXPECT_EQ(train_rows, 6);
}

TEST(TrainGptTextTest, BadTextFlagsAreRefusedBeforeAnyRankStarts) {
  auto refused = [](std::vector<std::string> flags, const std::string& message) {
    const TrainGptRun run = RunTrainGpt("refused", flags);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find(message), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("[rank"), std::string::npos) << run.output;
  };
  refused({"--val_every=5"}, "--val_every needs --val_data");
  refused({"--val_data=/nonexistent_val.bin"}, "/nonexistent_val.bin");
  refused({"--sample_every=5"}, "needs --sample_tokens > 0");
  refused({"--tokenizer=" + Prefix() + ".tokenizer", "--vocab=256", "--sample_tokens=5"},
          "has 300 tokens but --vocab=256");
  refused({"--sample_tokens=5", "--temperature=-1"}, "--temperature=-1");
}

}  // namespace
}  // namespace fsdp_test
