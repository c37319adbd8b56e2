// File: tests/fsdp/report/report_tables_test.cc
//
// The CSV has the promised columns and one line per row with the row's own
// numbers; statuses with commas are quoted; the Markdown has a line per row
// and the budget table; the gnuplot script has a curve per strategy, the
// measured ones solid, and the budget line.
#include "fsdp/report/report_tables.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fsdp/report/activation_mode.h"
#include "fsdp/report/report_plot.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace report {
namespace {

ReportData TwoRows() {
  ReportData data;
  data.title = "test sweep";
  MemoryPoint point;
  point.config = {2, 32, 1, 256, 32};
  point.ranks = 2;
  ReportRow measured;
  measured.point = point;
  measured.predicted = *EstimateRankMemory(point);
  RankMeasurement m;
  for (int c = 0; c < kNumMemoryCategories; ++c) m.peak_bytes[c] = 1000 + c;
  m.peak_total_bytes = 123456;
  m.peak_rss_bytes = 7777777;
  m.baseline_rss_bytes = 5555555;
  measured.measured = m;
  measured.status = "measured";
  data.rows.push_back(measured);
  ReportRow predicted;
  predicted.point = point;
  predicted.point.strategy = proto::FULL_SHARD;
  predicted.predicted = *EstimateRankMemory(predicted.point);
  predicted.status = "not measured: strategy 'full_shard' is not available yet, use no_shard";
  data.rows.push_back(predicted);
  return data;
}

TEST(ReportTablesTest, CsvHasTheRequiredColumnsAndEachRowsNumbers) {
  const ReportData data = TwoRows();
  const std::vector<std::string> lines =
      absl::StrSplit(ReportCsv(data), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  for (const char* column : {"strategy", "precision", "ranks", "params", "predicted_bytes",
                             "measured_bytes", "measured_rss_bytes",
                             "predicted_optimizer_state_bytes", "measured_comm_buffers_bytes",
                             "status"}) {
    EXPECT_NE(std::find(header.begin(), header.end(), column), header.end()) << column;
  }
  auto field = [&header](const std::string& line, const std::string& column) {
    const std::vector<std::string> fields = absl::StrSplit(line, ',');
    const size_t index = std::find(header.begin(), header.end(), column) - header.begin();
    return index < fields.size() ? fields[index] : std::string("<missing>");
  };
  EXPECT_EQ(field(lines[1], "strategy"), "no_shard");
  EXPECT_EQ(field(lines[1], "params"), absl::StrCat(data.rows[0].predicted.num_params));
  EXPECT_EQ(field(lines[1], "predicted_bytes"), absl::StrCat(data.rows[0].predicted.total_bytes()));
  EXPECT_EQ(field(lines[1], "measured_bytes"), "123456");
  EXPECT_EQ(field(lines[1], "measured_rss_bytes"), "7777777");
  EXPECT_EQ(field(lines[1], "measured_gradients_bytes"), "1001");
  EXPECT_EQ(field(lines[2], "strategy"), "full_shard");
  EXPECT_EQ(field(lines[2], "measured_bytes"), "");
  // The status holds a comma, so it is quoted.
  EXPECT_TRUE(absl::EndsWith(lines[2], "\"not measured: strategy 'full_shard' is not available "
                                       "yet, use no_shard\""))
      << lines[2];
}

TEST(ReportTablesTest, MarkdownHasARowPerPointAndTheBudgetTable) {
  ReportData data = TwoRows();
  data.budget_bytes = int64_t{1} << 20;
  FitRow fit;
  fit.ranks = 2;
  MemoryPoint point = data.rows[0].point;
  fit.largest = FittingModel{point.config, data.rows[0].predicted};
  data.fits.push_back(fit);
  const std::string md = ReportMarkdown(data);
  EXPECT_NE(md.find("| no_shard | fp32 | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| full_shard | fp32 | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Largest model within 1.00 MiB"), std::string::npos) << md;
  EXPECT_NE(md.find("(d_model 32, 2 layers)"), std::string::npos) << md;
}

TEST(ReportPlotTest, ScriptDrawsEachStrategyPredictedDashedMeasuredSolidAndTheBudget) {
  ReportData data = TwoRows();
  data.budget_bytes = 1000000;
  const std::string script = ReportGnuplotScript(data, Precision::kFp32, "/tmp/x.png");
  EXPECT_NE(script.find("set output '/tmp/x.png'"), std::string::npos);
  EXPECT_NE(script.find("set logscale xy"), std::string::npos);
  EXPECT_NE(script.find("$r2_no_shard_predicted using 1:2 with lines dt 2"), std::string::npos)
      << script;
  EXPECT_NE(script.find("$r2_no_shard_measured using 1:2 with linespoints dt 1"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("$r2_full_shard_predicted"), std::string::npos);
  EXPECT_EQ(script.find("$r2_full_shard_measured"), std::string::npos) << "never measured";
  EXPECT_NE(script.find("1e+06 with lines dt 4"), std::string::npos) << script;
  // Mixed precision has no rows here: still a valid script.
  EXPECT_NE(ReportGnuplotScript(data, Precision::kMixed, "/tmp/y.png").find("no points"),
            std::string::npos);
}

// The activation mode is a column of the CSV and of the Markdown, and with
// a budget the longest-sequence table has a row per mode.
TEST(ReportTablesTest, ActivationModesAreColumnsAndTheLongestSequenceTable) {
  ReportData data = TwoRows();
  ASSERT_TRUE(ApplyActivationMode({2, true}, data.rows[1].point.config).ok());
  data.rows[1].predicted = *EstimateRankMemory(data.rows[1].point);
  const std::vector<std::string> lines =
      absl::StrSplit(ReportCsv(data), '\n', absl::SkipEmpty());
  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  const auto column = [&](const char* name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  ASSERT_LT(column("activation_checkpointing"), static_cast<long>(header.size()));
  const std::vector<std::string> first = absl::StrSplit(lines[1], ',');
  const std::vector<std::string> second = absl::StrSplit(lines[2], ',');
  EXPECT_EQ(first[column("activation_checkpointing")], "none");
  EXPECT_EQ(first[column("attention")], "standard");
  EXPECT_EQ(second[column("activation_checkpointing")], "every:2");
  EXPECT_EQ(second[column("attention")], "flash");

  data.budget_bytes = int64_t{1} << 20;
  data.seq_len_model = data.rows[0].point.config;
  data.seq_len_micro_batch = 4;
  for (const ActivationMode& mode : {ActivationMode{0, false}, ActivationMode{1, true}}) {
    SeqLenFitRow fit;
    fit.strategy = proto::FULL_SHARD;
    fit.ranks = 2;
    fit.mode = mode;
    fit.longest = FittingSeqLen{mode.flash_attention ? 900 : 300, data.rows[0].predicted};
    data.seq_len_fits.push_back(fit);
  }
  const std::string md = ReportMarkdown(data);
  EXPECT_NE(md.find("| 32 | every:2+flash |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Longest sequence within 1.00 MiB"), std::string::npos) << md;
  EXPECT_NE(md.find("| full_shard | fp32 | none | 300 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| full_shard | fp32 | all+flash | 900 |"), std::string::npos) << md;
}

// The sequence-length plot: a line per mode, predicted dashed and measured
// solid, the budget with a triangle per mode at its longest sequence.
TEST(ReportPlotTest, SeqLenScriptDrawsEachModeAndTheLongestSequences) {
  ReportData data;
  data.title = "seq sweep";
  data.budget_bytes = 4000000;
  for (const ActivationMode& mode : {ActivationMode{0, false}, ActivationMode{1, true}}) {
    for (int seq_len : {32, 64}) {
      ReportRow row;
      row.point.config = {2, 32, 1, 256, seq_len};
      ASSERT_TRUE(ApplyActivationMode(mode, row.point.config).ok());
      row.point.strategy = proto::FULL_SHARD;
      row.point.ranks = 2;
      row.predicted = *EstimateRankMemory(row.point);
      if (!mode.flash_attention) {
        RankMeasurement m;
        m.peak_total_bytes = row.predicted.total_bytes();
        row.measured = m;
      }
      data.rows.push_back(row);
    }
    SeqLenFitRow fit;
    fit.strategy = proto::FULL_SHARD;
    fit.ranks = 2;
    fit.mode = mode;
    fit.longest = FittingSeqLen{100, data.rows.back().predicted};
    data.seq_len_fits.push_back(fit);
  }
  const std::string script = SeqLenGnuplotScript(data, "/tmp/s.png");
  EXPECT_NE(script.find("set output '/tmp/s.png'"), std::string::npos);
  EXPECT_NE(script.find("$none_total_predicted using 1:2 with lines dt 2"), std::string::npos)
      << script;
  EXPECT_NE(script.find("$none_total_measured using 1:2 with linespoints dt 1"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("$all_flash_total_predicted"), std::string::npos) << script;
  EXPECT_EQ(script.find("$all_flash_total_measured"), std::string::npos) << "never measured";
  EXPECT_NE(script.find("$all_flash_longest using 1:2 with points"), std::string::npos);
  EXPECT_NE(script.find("$none_activations_measured"), std::string::npos);
  EXPECT_NE(script.find("4e+06 with lines dt 4"), std::string::npos) << script;
  EXPECT_NE(SeqLenGnuplotScript(ReportData(), "/tmp/e.png").find("no points"), std::string::npos);
}

}  // namespace
}  // namespace report
}  // namespace fsdp
