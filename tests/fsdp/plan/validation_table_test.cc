// File: tests/fsdp/plan/validation_table_test.cc
//
// The stored table of this machine's measurements (testdata/
// validation_here.csv, written by tools/plan_validate.sh: its '#' lines say
// when, on what CPU and with which binaries) against the step-time model,
// for shape and regression only; docs/planning.md reads the accuracy from
// the same table. It fails when
//   - the model's prediction for a stored row moves by more than 1% from
//     the table's (a model or description change: rerun plan_validate.sh
//     and store the new table, or say why not);
//   - a row's error column is not (predicted - measured) / measured;
//   - a cell of the full table is missing (sizes S, M, L x fp32, bf16 x the
//     five strategies x 1, 2, 4, 8 ranks, hybrid_shard in groups of 2 at 4
//     and 8 only: 108 rows), or a measurement is not positive;
//   - predicted step time does not grow from size S to M to L at a fixed
//     precision, strategy and rank count.
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/posix_file.h"
#include "fsdp/plan/gpt_step_prediction.h"
#include "fsdp/plan/hardware_description.h"
#include "fsdp/plan/sharding_strategy.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace plan {
namespace {

struct Row {
  std::string size, precision, strategy;
  GptRun run;
  double predicted_s = 0, measured_s = 0, error = 0;
};

int Int(absl::string_view text) {
  int value = 0;
  EXPECT_TRUE(absl::SimpleAtoi(text, &value)) << text;
  return value;
}

double Double(absl::string_view text) {
  double value = 0;
  EXPECT_TRUE(absl::SimpleAtod(text, &value)) << text;
  return value;
}

std::vector<Row> ReadTable(std::string* comments) {
  absl::StatusOr<std::string> text =
      base::ReadWholeFile("tests/fsdp/plan/testdata/validation_here.csv");
  EXPECT_TRUE(text.ok()) << text.status();
  std::vector<Row> rows;
  if (!text.ok()) return rows;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) {
      absl::StrAppend(comments, line, "\n");
      continue;
    }
    if (absl::StartsWith(line, "size,")) continue;
    const std::vector<std::string> f = absl::StrSplit(line, ',');
    EXPECT_EQ(f.size(), 16u) << line;
    if (f.size() != 16) continue;
    Row r;
    r.size = f[0];
    r.run.config.layers = Int(f[1]);
    r.run.config.d_model = Int(f[2]);
    r.run.config.heads = Int(f[3]);
    r.run.config.vocab = Int(f[4]);
    r.run.config.seq_len = Int(f[5]);
    r.run.micro_batch = Int(f[6]);
    r.precision = f[7];
    r.run.bf16 = f[7] == "bf16";
    r.strategy = f[8];
    absl::StatusOr<proto::ShardingStrategy> strategy = ParseShardingStrategy(f[8]);
    EXPECT_TRUE(strategy.ok()) << line;
    if (strategy.ok()) r.run.strategy = *strategy;
    r.run.ranks = Int(f[9]);
    r.run.group_size = Int(f[10]);
    r.predicted_s = Double(f[11]);
    r.measured_s = Double(f[12]);
    absl::string_view error = f[13];
    EXPECT_TRUE(absl::ConsumeSuffix(&error, "%")) << line;
    r.error = Double(error) / 100;
    rows.push_back(r);
  }
  return rows;
}

TEST(ValidationTableTest, StoredTableMatchesTheModelAndItsShape) {
  std::string comments;
  const std::vector<Row> rows = ReadTable(&comments);
  EXPECT_EQ(rows.size(), 108u) << "the full table: 3 sizes x 2 precisions x 18 cells";
  // Where and how it was measured travels with the numbers.
  EXPECT_NE(comments.find("# plan_validate.sh 20"), std::string::npos) << comments;
  EXPECT_NE(comments.find("# CPU: "), std::string::npos) << comments;
  EXPECT_NE(comments.find("# command: "), std::string::npos) << comments;

  absl::StatusOr<std::string> text =
      base::ReadWholeFile("fsdp/plan/clusters/this_machine.textproto");
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<proto::HardwareDescription> hw =
      ParseHardwareDescription(*text, "this_machine.textproto");
  ASSERT_TRUE(hw.ok()) << hw.status();

  std::map<std::tuple<std::string, std::string, int>, std::map<std::string, const Row*>> by_size;
  for (const Row& r : rows) {
    const std::string name = r.size + " " + r.precision + " " + r.strategy + " at " +
                             std::to_string(r.run.ranks);
    absl::StatusOr<GptStepPrediction> p = PredictGptStep(r.run, *hw);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    EXPECT_NEAR(p->step.step_s / r.predicted_s, 1, 0.01)
        << name << ": the model moved from the stored table; rerun tools/plan_validate.sh";
    EXPECT_GT(r.measured_s, 0) << name;
    EXPECT_NEAR(r.error, (r.predicted_s - r.measured_s) / r.measured_s, 0.001) << name;
    by_size[{r.precision, r.strategy, r.run.ranks}][r.size] = &r;
  }
  int ordered = 0;
  for (const auto& [key, sizes] : by_size) {
    if (!sizes.count("S") || !sizes.count("M") || !sizes.count("L")) continue;
    const Row &s = *sizes.at("S"), &m = *sizes.at("M"), &l = *sizes.at("L");
    const std::string name = std::get<0>(key) + " " + std::get<1>(key) + " at " +
                             std::to_string(std::get<2>(key)) + " ranks";
    EXPECT_LT(s.predicted_s, m.predicted_s) << name;
    EXPECT_LT(m.predicted_s, l.predicted_s) << name;
    ++ordered;
  }
  EXPECT_EQ(ordered, 36) << "every precision, strategy and rank count at all three sizes";
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
