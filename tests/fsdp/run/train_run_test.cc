// File: tests/fsdp/run/train_run_test.cc
//
// RunTraining (the GPT + data + optimizer + trainer loop behind train_gpt)
// with ranks as threads: the same global batch split over 1, 2 and 4 ranks
// gives the same losses, the run learns, and the metrics file has a line per
// step plus the final line. Real processes: tests/integration/train/.
#include "fsdp/run/train_run.h"

#include <cmath>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/fsdp/train/thread_communicator.h"

namespace fsdp {
namespace {

TrainOptions SmallOptions(int nproc, int micro_batch, int accum) {
  TrainOptions o;
  o.nproc = nproc;
  o.layers = 1;
  o.d_model = 16;
  o.heads = 2;
  o.vocab = 32;
  o.seq_len = 8;
  o.micro_batch = micro_batch;
  o.accum = accum;
  o.steps = 8;
  o.warmup_steps = 1;
  o.lr = 1e-2f;
  o.min_lr = 1e-3f;
  o.threads = 1;
  o.comm_timeout = absl::Seconds(30);
  return o;
}

// Runs every rank in a thread; returns each rank's summary.
std::vector<RunSummary> RunThreads(TrainOptions options) {
  auto comms = fsdp_test::MakeThreadCommunicators(options.nproc);
  std::vector<RunSummary> summaries(options.nproc);
  std::vector<std::thread> threads;
  for (int r = 0; r < options.nproc; ++r) {
    threads.emplace_back([&, r] {
      TrainOptions mine = options;
      if (r != 0) mine.metrics_out.clear();
      auto summary = RunTraining(mine, *comms[r], nullptr);
      ASSERT_TRUE(summary.ok()) << "rank " << r << ": " << summary.status();
      summaries[r] = *summary;
    });
  }
  for (auto& t : threads) t.join();
  return summaries;
}

std::vector<double> ReadLosses(const std::string& path, std::string* final_line) {
  std::ifstream in(path);
  std::vector<double> losses;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"final\":true") != std::string::npos) {
      *final_line = line;
      continue;
    }
    const size_t at = line.find("\"loss\":");
    losses.push_back(std::strtod(line.c_str() + at + 7, nullptr));
  }
  return losses;
}

TEST(TrainRunTest, SameLossesForEverySplitOfTheGlobalBatch) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  struct Split {
    int nproc, micro_batch, accum;
  };
  const Split splits[] = {{1, 4, 1}, {2, 2, 1}, {4, 1, 1}, {2, 1, 2}};
  std::vector<double> reference;
  for (const Split& s : splits) {
    TrainOptions options = SmallOptions(s.nproc, s.micro_batch, s.accum);
    options.metrics_out = absl::StrCat(dir, "/run_", s.nproc, "_", s.micro_batch, ".jsonl");
    std::vector<RunSummary> summaries = RunThreads(options);
    for (const RunSummary& summary : summaries) {
      EXPECT_EQ(summary.param_sha256, summaries[0].param_sha256) << "ranks diverged";
    }
    std::string final_line;
    std::vector<double> losses = ReadLosses(options.metrics_out, &final_line);
    ASSERT_EQ(losses.size(), 8u);
    EXPECT_NE(final_line.find(summaries[0].param_sha256), std::string::npos) << final_line;
    if (reference.empty()) {
      reference = losses;
      EXPECT_LT(reference.back(), reference.front()) << "the reference run does not learn";
      continue;
    }
    for (size_t i = 0; i < losses.size(); ++i) {
      EXPECT_NEAR(losses[i], reference[i], 1e-5 * std::fabs(reference[i]))
          << "nproc " << s.nproc << " micro_batch " << s.micro_batch << " accum " << s.accum
          << " step " << i + 1;
    }
  }
}

TEST(TrainRunTest, WorldSizeMustMatchNproc) {
  auto comms = fsdp_test::MakeThreadCommunicators(1);
  auto summary = RunTraining(SmallOptions(2, 2, 1), *comms[0], nullptr);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument);
}

// RunTraining with every strategy (the API fsdp/report and train_gpt call):
// the fp32 strategies end with no_shard's digest, hybrid close to it, and
// the summary reports the plan and the working-buffer peaks.
TEST(TrainRunTest, EveryStrategyThroughRunTraining) {
  TrainOptions base = SmallOptions(/*nproc=*/4, /*micro_batch=*/1, /*accum=*/1);
  base.steps = 3;
  const std::vector<RunSummary> no_shard = RunThreads(base);
  for (Strategy strategy :
       {Strategy::kShardOptimizer, Strategy::kShardGradOp, Strategy::kFullShard}) {
    TrainOptions o = base;
    o.sharding.strategy = strategy;
    const std::vector<RunSummary> runs = RunThreads(o);
    for (const RunSummary& run : runs) {
      EXPECT_EQ(run.param_sha256, no_shard[0].param_sha256) << StrategyName(strategy);
      EXPECT_EQ(run.plan_fingerprint, runs[0].plan_fingerprint);
    }
    if (strategy == Strategy::kFullShard) {
      EXPECT_GT(runs[0].peak_gathered_param_numel, 0);
      EXPECT_LT(runs[0].memory.peak(MemoryCategory::kOptimizerState),
                no_shard[0].memory.peak(MemoryCategory::kOptimizerState));
    } else {
      EXPECT_EQ(runs[0].peak_gathered_param_numel, 0);
    }
  }
  TrainOptions hybrid = base;
  hybrid.sharding.strategy = Strategy::kHybridShard;
  hybrid.sharding.group_size = 2;
  const std::vector<RunSummary> runs = RunThreads(hybrid);
  EXPECT_NEAR(runs[0].final_loss, no_shard[0].final_loss, 1e-6 * no_shard[0].final_loss);
  EXPECT_EQ(runs[1].param_sha256, runs[0].param_sha256);
}

}  // namespace
}  // namespace fsdp

namespace fsdp {
namespace {

// The runtime's own budget check: a run whose allocations exceed
// mem_budget_bytes fails with ResourceExhausted naming the category and the
// budget, on the rank that hit it, instead of crashing. The budget is set
// from the same run's measured peak, so the test follows the model's size.
TEST(TrainRunTest, BudgetBelowTheMeasuredPeakFailsCleanly) {
  TrainOptions options = SmallOptions(/*nproc=*/1, /*micro_batch=*/2, /*accum=*/1);
  options.steps = 2;
  auto comms = fsdp_test::MakeThreadCommunicators(1);
  absl::StatusOr<RunSummary> unlimited = RunTraining(options, *comms[0], nullptr);
  ASSERT_TRUE(unlimited.ok()) << unlimited.status();
  const int64_t peak = unlimited->memory.peak_total_bytes;
  ASSERT_GT(peak, 0);

  options.mem_budget_bytes = peak;  // exactly enough
  EXPECT_TRUE(RunTraining(options, *comms[0], nullptr).ok());

  options.mem_budget_bytes = peak - 1;
  absl::StatusOr<RunSummary> over = RunTraining(options, *comms[0], nullptr);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_NE(over.status().message().find("budget"), absl::string_view::npos) << over.status();
}

}  // namespace
}  // namespace fsdp
