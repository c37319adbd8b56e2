// File: tests/fsdp/run/metrics_plot_test.cc
//
// Metrics files to a PNG: the parser reads step, tokens, loss, val_loss and
// tokens/s (and skips the final line); the script holds each run's series
// with the data it was given; gnuplot's output is a whole PNG of the
// script's size, renamed into place; a bad file is an error naming it.
#include "fsdp/run/metrics_plot.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace fsdp {
namespace {

constexpr char kMetrics[] =
    "{\"step\":0,\"tokens\":0,\"val_loss\":6.25}\n"
    "{\"step\":1,\"loss\":6.2,\"lr\":0.001,\"tokens_per_s\":1000,\"peak_bytes\":1,"
    "\"comm_wait_s\":0.1,\"tokens\":2048}\n"
    "{\"step\":2,\"loss\":5.5,\"lr\":0.001,\"tokens_per_s\":1200,\"peak_bytes\":1,"
    "\"comm_wait_s\":0.1,\"tokens\":4096,\"val_loss\":5.75}\n"
    "{\"final\":true,\"steps\":2,\"loss\":5.5}\n";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<unsigned char>(s[at])} << 24) |
         (uint32_t{static_cast<unsigned char>(s[at + 1])} << 16) |
         (uint32_t{static_cast<unsigned char>(s[at + 2])} << 8) |
         uint32_t{static_cast<unsigned char>(s[at + 3])};
}

TEST(MetricsPlotTest, ParsesStepsAndValidation) {
  absl::StatusOr<MetricsRun> run = ParseMetrics(kMetrics, "a", "m.jsonl");
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->points.size(), 3u);
  EXPECT_FALSE(run->points[0].has_loss);
  EXPECT_TRUE(run->points[0].has_val);
  EXPECT_DOUBLE_EQ(run->points[0].val_loss, 6.25);
  EXPECT_DOUBLE_EQ(run->points[1].loss, 6.2);
  EXPECT_FALSE(run->points[1].has_val);
  EXPECT_EQ(run->points[2].tokens, 4096);
  EXPECT_DOUBLE_EQ(run->points[2].tokens_per_s, 1200);
  EXPECT_DOUBLE_EQ(run->points[2].val_loss, 5.75);
  absl::StatusOr<MetricsRun> bad = ParseMetrics("{\"loss\":1}\n", "a", "bad.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.jsonl line 1"), std::string::npos) << bad.status();
}

TEST(MetricsPlotTest, ScriptHoldsEveryRunsSeriesAndData) {
  absl::StatusOr<MetricsRun> a = ParseMetrics(kMetrics, "no_shard", "a");
  absl::StatusOr<MetricsRun> b = ParseMetrics(kMetrics, "full_shard", "b");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string script = MetricsGnuplotScript({*a, *b}, "/x/out.png");
  for (const char* title : {"'no_shard train'", "'no_shard val'", "'no_shard tok/s'",
                            "'full_shard train'", "'full_shard val'", "'full_shard tok/s'"}) {
    EXPECT_NE(script.find(title), std::string::npos) << title;
  }
  EXPECT_NE(script.find("$train1 << EOD\n1 2048 6.2 1000\n2 4096 5.5 1200\nEOD\n"),
            std::string::npos) << script;
  EXPECT_NE(script.find("$val0 << EOD\n0 0 6.25\n2 4096 5.75\nEOD\n"), std::string::npos);
  EXPECT_NE(script.find("set output '/x/out.png'"), std::string::npos);
}

TEST(MetricsPlotTest, GnuplotWritesAWholePng) {
  absl::StatusOr<MetricsRun> run = ParseMetrics(kMetrics, "run", "m");
  ASSERT_TRUE(run.ok());
  const std::string png = std::string(std::getenv("TEST_TMPDIR")) + "/curves.png";
  absl::Status plotted = PlotMetrics({*run}, png, absl::Seconds(120));
  ASSERT_TRUE(plotted.ok()) << plotted << " (tools/setup.sh installs gnuplot-nox)";
  const std::string bytes = Slurp(png);
  ASSERT_GT(bytes.size(), 33u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(BigEndian32(bytes, 8), 13u);  // IHDR length
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(BigEndian32(bytes, 16), 1500u);  // width, as the script sets it
  EXPECT_EQ(BigEndian32(bytes, 20), 500u);
  EXPECT_EQ(bytes.substr(bytes.size() - 8, 4), "IEND");  // whole, not cut short
  EXPECT_EQ(Slurp(png + ".gp"), MetricsGnuplotScript({*run}, png));
}

// A count that no integer holds (or NaN) is refused, naming the line; its
// conversion would be undefined.
TEST(MetricsPlotTest, ACountOutOfRangeIsRefusedNamingTheLine) {
  for (const char* line : {"{\"step\":1e300}", "{\"step\":-1}", "{\"step\":nan}",
                           "{\"step\":1.5}", "{\"step\":1,\"tokens\":1e300}"}) {
    absl::StatusOr<MetricsRun> run = ParseMetrics(std::string("\n") + line, "run", "m.jsonl");
    ASSERT_FALSE(run.ok()) << line;
    EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(run.status().message().find("m.jsonl line 2"), std::string::npos) << run.status();
  }
}

// A resumed attempt's marker drops what the earlier attempt wrote past it.
TEST(MetricsPlotTest, AResumedRunReplacesTheStepsAfterItsCheckpoint) {
  const std::string contents =
      "{\"step\":1,\"loss\":6.0,\"tokens\":10}\n"
      "{\"step\":2,\"loss\":5.0,\"tokens\":20}\n"
      "{\"step\":3,\"loss\":4.0,\"tokens\":30}\n"
      "{\"step\":1,\"resumed\":true}\n"
      "{\"step\":2,\"loss\":5.5,\"tokens\":20}\n";
  absl::StatusOr<MetricsRun> run = ParseMetrics(contents, "run", "m");
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->points.size(), 2u);
  EXPECT_EQ(run->points[0].step, 1);
  EXPECT_EQ(run->points[1].step, 2);
  EXPECT_EQ(run->points[1].loss, 5.5);
}

// [Note: text in a gnuplot script]: a label with a newline would carry a
// command of its own; it is refused before any file is written.
TEST(MetricsPlotTest, ALabelWithANewlineIsRefusedBeforeAnythingIsWritten) {
  absl::StatusOr<MetricsRun> run = ParseMetrics(kMetrics, "a\nsystem('touch /tmp/x')", "m");
  ASSERT_TRUE(run.ok());
  const std::string png = std::string(std::getenv("TEST_TMPDIR")) + "/injected.png";
  const absl::Status plotted = PlotMetrics({*run}, png, absl::Seconds(120));
  EXPECT_EQ(plotted.code(), absl::StatusCode::kInvalidArgument) << plotted;
  EXPECT_NE(plotted.message().find("the run label"), std::string::npos) << plotted;
  EXPECT_NE(plotted.message().find("0x0a"), std::string::npos) << plotted;
  EXPECT_EQ(Slurp(png + ".gp"), "");
  // A quote is fine: it is doubled inside the single-quoted title.
  run->label = "it's";
  EXPECT_NE(MetricsGnuplotScript({*run}, png).find("title 'it''s train'"), std::string::npos);
}

}  // namespace
}  // namespace fsdp
