// File: tests/integration/report/memory_report_small_test.cc
//
// memory_report --preset=small end to end, with real rank processes over
// loopback: every point the runtime accepts (all five strategies, in fp32
// and the runtime's bf16-on-the-wire mode, and the sequence-length sweep
// under every activation mode) is trained and measured, and each
// measurement equals its prediction to the byte, in the total and in every
// tracker category. So does every strategy under every activation mode on
// 3 ranks. Points the runtime does not accept say why. The PNG plots are
// real PNG files (gnuplot ran), and --predict_only prints the ZeRO paper's
// numbers.
#include <sys/wait.h>

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

using CsvRow = std::map<std::string, std::string>;

// The rows of a report CSV, by column name.
std::vector<CsvRow> ReadCsv(const std::string& path) {
  const std::string csv = ReadFile(path);
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  std::vector<CsvRow> rows;
  EXPECT_GT(lines.size(), 1u) << path << ":\n" << csv;
  if (lines.empty()) return rows;
  const std::vector<std::string> header = CsvFields(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> fields = CsvFields(lines[i]);
    EXPECT_EQ(fields.size(), header.size()) << lines[i];
    CsvRow row;
    for (size_t c = 0; c < header.size() && c < fields.size(); ++c) row[header[c]] = fields[c];
    rows.push_back(row);
  }
  return rows;
}

std::string Where(const CsvRow& row) {
  return absl::StrCat(row.at("strategy"), " ", row.at("precision"), " ranks=", row.at("ranks"),
                      " params=", row.at("params"), " seq_len=", row.at("seq_len"),
                      " activation_checkpointing=", row.at("activation_checkpointing"),
                      " attention=", row.at("attention"));
}

// Every measured row equals its prediction to the byte, in the total and in
// every tracker category; the others say why they were not measured.
// Returns the number of measured rows.
int ExpectMeasuredRowsExact(const std::vector<CsvRow>& rows) {
  int measured = 0;
  for (const CsvRow& row : rows) {
    if (row.at("status") != "measured") {
      EXPECT_TRUE(row.at("status").rfind("not measured: ", 0) == 0 ||
                  row.at("status").rfind("predicted only: ", 0) == 0)
          << Where(row) << ": unexpected status '" << row.at("status") << "'";
      EXPECT_EQ(row.at("measured_bytes"), "") << Where(row);
      continue;
    }
    ++measured;
    EXPECT_EQ(row.at("measured_bytes"), row.at("predicted_bytes")) << Where(row);
    for (const char* category : {"parameters", "gradients", "optimizer_state", "activations",
                                 "comm_buffers", "workspace"}) {
      EXPECT_EQ(row.at(absl::StrCat("measured_", category, "_bytes")),
                row.at(absl::StrCat("predicted_", category, "_bytes")))
          << Where(row) << " " << category;
    }
    // The process holds at least what the tracker counted.
    double rss = 0, tracked = 0;
    EXPECT_TRUE(absl::SimpleAtod(row.at("measured_rss_bytes"), &rss));
    EXPECT_TRUE(absl::SimpleAtod(row.at("measured_bytes"), &tracked));
    EXPECT_GE(rss, tracked) << Where(row);
  }
  return measured;
}

double Number(const CsvRow& row, const std::string& column) {
  double value = 0;
  EXPECT_TRUE(absl::SimpleAtod(row.at(column), &value)) << column << "=" << row.at(column);
  return value;
}

TEST(MemoryReportSmallTest, MeasuredPointsEqualTheirPredictions) {
  const std::string out_dir = TmpDir() + "/small";
  const ReportRun run = RunReport(absl::StrCat("--preset=small --out_dir=", out_dir,
                                         " --mem_budget=2MiB"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<CsvRow> rows = ReadCsv(out_dir + "/memory.csv");
  const int measured = ExpectMeasuredRowsExact(rows);
  // The runtime runs every strategy in every precision (fp32, the bf16
  // layout with fp32 gradients, and mixed: its 2-byte gradients):
  // 2 models x 3 rank counts x 5 strategies x 3 precisions.
  EXPECT_EQ(measured, 90) << run.output;

  // The sequence-length sweep: every (mode, seq_len) measured and exact.
  const std::vector<CsvRow> seq_rows = ReadCsv(out_dir + "/memory_seq_len.csv");
  EXPECT_EQ(ExpectMeasuredRowsExact(seq_rows), 20) << run.output;
  EXPECT_EQ(seq_rows.size(), 20u);
  // At the longest sequence each lever lowers the measured activations.
  std::map<std::string, double> activations_at_256;
  for (const CsvRow& row : seq_rows) {
    if (row.at("seq_len") != "256") continue;
    activations_at_256[row.at("activation_checkpointing") + "/" + row.at("attention")] =
        Number(row, "measured_activations_bytes");
  }
  ASSERT_EQ(activations_at_256.size(), 5u);
  const double none = activations_at_256["none/standard"];
  EXPECT_LT(activations_at_256["every:2/standard"], none);
  EXPECT_LT(activations_at_256["all/standard"], activations_at_256["every:2/standard"]);
  EXPECT_LT(activations_at_256["none/flash"], none);
  EXPECT_LT(activations_at_256["all/flash"], activations_at_256["all/standard"]);
  EXPECT_LT(activations_at_256["all/flash"], activations_at_256["none/flash"]);

  // A progress line per point, and the budget summaries.
  const size_t points = rows.size() + seq_rows.size();
  EXPECT_NE(run.output.find(absl::StrCat("[", points, "/", points, "]")), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("110 of 110 measured points equal their prediction"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("largest GPT-family model (vocab=256 seq_len=32 micro_batch=2) "
                            "within 2.00 MiB per rank"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("longest sequence of layers=2 d_model=32"), std::string::npos)
      << run.output;
  // gnuplot wrote real PNGs; the Markdown has the budget tables.
  for (const char* png :
       {"/memory_fp32.png", "/memory_bf16.png", "/memory_mixed.png", "/memory_seq_len.png"}) {
    const std::string bytes = ReadFile(out_dir + png);
    ASSERT_GT(bytes.size(), 1000u) << png;
    EXPECT_EQ(bytes.substr(1, 3), "PNG") << png;
  }
  const std::string md = ReadFile(out_dir + "/memory.md");
  EXPECT_NE(md.find("## Largest model within 2.00 MiB"), std::string::npos);
  EXPECT_NE(md.find("## Longest sequence within 2.00 MiB"), std::string::npos);
  EXPECT_NE(md.find("| full_shard | fp32 | all+flash |"), std::string::npos) << md;
}

// Every strategy under every activation mode on 2 ranks (hybrid_shard with
// groups of 1) in fp32 and in the bf16 layout with 4-byte and 2-byte
// gradients (bf16 and mixed): every point measured and equal
// to its prediction to the byte. (At rank counts that do not divide a
// unit, no_shard's AdamW moments cover the real elements and the plan the
// padded ones, a few bytes apart: docs/memory.md.)
TEST(MemoryReportSmallTest, EveryStrategyUnderEveryActivationModeIsExact) {
  const std::string out_dir = TmpDir() + "/modes";
  const ReportRun run = RunReport(absl::StrCat(
      "--preset=small --ranks=2 --precision=fp32,bf16,mixed "
      "--activation_checkpointing=every:2,all "
      "--attention=standard,flash --seq_lens=none --out_dir=",
      out_dir));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<CsvRow> rows = ReadCsv(out_dir + "/memory.csv");
  // 2 models x 5 strategies x 3 precisions x 4 modes.
  EXPECT_EQ(rows.size(), 120u);
  EXPECT_EQ(ExpectMeasuredRowsExact(rows), 120) << run.output;
  EXPECT_EQ(ReadFile(out_dir + "/memory_seq_len.csv"), "") << "--seq_lens=none skips the sweep";
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
  EXPECT_NE(shape.output.find("longest seq_len within 48.00 GiB for full_shard on 1 rank: none none "),
            std::string::npos)
      << shape.output;
  const ReportRun bad = RunReport("--predict_only --params=lots");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--params=lots"), std::string::npos) << bad.output;
}

}  // namespace
