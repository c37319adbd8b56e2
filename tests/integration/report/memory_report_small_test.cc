// File: tests/integration/report/memory_report_small_test.cc
//
// memory_report --preset=small end to end, with real rank processes over
// loopback: every point the runtime accepts (all five strategies, in fp32
// and the runtime's bf16-on-the-wire mode) is trained and measured, and
// each measurement is within 10% of its prediction in total and within 2%
// for parameters, gradients and optimizer state. Points the runtime does
// not accept yet say why. The PNG plots are real PNG files (gnuplot ran),
// and --predict_only prints the ZeRO paper's numbers.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace {

std::string BinaryPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "fsdp_cpp",
                      "/examples/memory_report");
}

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

struct ReportRun {
  int exit_code = -1;
  std::string output;
};

ReportRun RunReport(const std::string& flags) {
  ReportRun run;
  std::FILE* pipe = popen(absl::StrCat(BinaryPath(), " ", flags, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One CSV line (RFC 4180 quoting) into fields.
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

double RelativeError(const std::map<std::string, std::string>& row, const std::string& measured,
                     const std::string& predicted) {
  double m = 0, p = 0;
  EXPECT_TRUE(absl::SimpleAtod(row.at(measured), &m)) << measured << "=" << row.at(measured);
  EXPECT_TRUE(absl::SimpleAtod(row.at(predicted), &p)) << predicted << "=" << row.at(predicted);
  return p > 0 ? std::fabs(m - p) / p : (m == 0 ? 0.0 : 1.0);
}

TEST(MemoryReportSmallTest, MeasuredPointsAgreeWithTheirPredictions) {
  const std::string out_dir = TmpDir() + "/small";
  const ReportRun run = RunReport(absl::StrCat("--preset=small --out_dir=", out_dir,
                                         " --mem_budget=2MiB"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string csv = ReadFile(out_dir + "/memory.csv");
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_GT(lines.size(), 1u) << csv;
  const std::vector<std::string> header = CsvFields(lines[0]);
  int measured = 0, not_measured = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> fields = CsvFields(lines[i]);
    ASSERT_EQ(fields.size(), header.size()) << lines[i];
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < header.size(); ++c) row[header[c]] = fields[c];
    const std::string where = absl::StrCat(row["strategy"], " ", row["precision"], " ranks=",
                                           row["ranks"], " params=", row["params"]);
    if (row["status"] != "measured") {
      EXPECT_EQ(row["status"].rfind("not measured: ", 0), 0u)
          << where << ": unexpected status '" << row["status"] << "'";
      EXPECT_EQ(row["measured_bytes"], "") << where;
      ++not_measured;
      continue;
    }
    ++measured;
    EXPECT_LE(RelativeError(row, "measured_bytes", "predicted_bytes"), 0.10) << where;
    for (const char* category : {"parameters", "gradients", "optimizer_state"}) {
      EXPECT_LE(RelativeError(row, absl::StrCat("measured_", category, "_bytes"),
                              absl::StrCat("predicted_", category, "_bytes")),
                0.02)
          << where << " " << category;
    }
    // The process holds at least what the tracker counted.
    double rss = 0, tracked = 0;
    ASSERT_TRUE(absl::SimpleAtod(row["measured_rss_bytes"], &rss));
    ASSERT_TRUE(absl::SimpleAtod(row["measured_bytes"], &tracked));
    EXPECT_GE(rss, tracked) << where;
  }
  // The runtime runs at least no_shard in fp32 and on the bf16 wire:
  // 2 models x 3 rank counts each.
  EXPECT_GE(measured, 12) << run.output;
  EXPECT_EQ(measured + not_measured, static_cast<int>(lines.size()) - 1);
  // A progress line per point, and the budget summary.
  EXPECT_NE(run.output.find(absl::StrCat("[", lines.size() - 1, "/", lines.size() - 1, "]")),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("largest GPT-family model within 2.00 MiB per rank"),
            std::string::npos);
  // gnuplot wrote real PNGs; the Markdown has the budget table.
  for (const char* png : {"/memory_fp32.png", "/memory_bf16_wire.png", "/memory_mixed.png"}) {
    const std::string bytes = ReadFile(out_dir + png);
    ASSERT_GT(bytes.size(), 1000u) << png;
    EXPECT_EQ(bytes.substr(1, 3), "PNG") << png;
  }
  EXPECT_NE(ReadFile(out_dir + "/memory.md").find("## Largest model within 2.00 MiB"),
            std::string::npos);
}

TEST(MemoryReportSmallTest, PredictOnlyPrintsTheZeroPapersExample) {
  const ReportRun run = RunReport(
      "--predict_only --params=7.5e9 --ranks=64 --precision=mixed "
      "--strategy=no_shard,shard_optimizer,shard_grad_op,full_shard");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Rajbhandari et al. 2019, Figure 1: 120, 31.4, 16.6, 1.9 GB (rounded there).
  for (const char* gb : {"120.00", "31.41", "16.64", "1.88"}) {
    EXPECT_NE(run.output.find(gb), std::string::npos) << gb << "\n" << run.output;
  }
  const ReportRun shape = RunReport(
      "--predict_only --layers=36 --d_model=4096 --heads=32 --vocab=50304 --seq_len=2048 "
      "--ranks=1,1024,16384 --strategy=full_shard --precision=mixed --mem_budget=48GiB");
  ASSERT_EQ(shape.exit_code, 0) << shape.output;
  EXPECT_NE(shape.output.find("16384"), std::string::npos) << shape.output;
  EXPECT_NE(shape.output.find("budget check for full_shard mixed ranks=1"), std::string::npos)
      << shape.output;
  EXPECT_NE(shape.output.find("Would fit: full_shard on"), std::string::npos) << shape.output;
  const ReportRun bad = RunReport("--predict_only --params=lots");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--params=lots"), std::string::npos) << bad.output;
}

}  // namespace
