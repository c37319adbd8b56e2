// File: tests/integration/train/batch_report_test.cc
//
// //examples:batch_report end to end on a tiny model and the fortunes text:
// two batch sizes, scaled learning rate; the table names every run with its
// split, the loss it reached and (for the 2-rank run) a measured noise
// scale, and a bad --batches value is refused naming it.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

std::string Command(const std::string& dir, const std::string& batches) {
  const std::string prefix = TokenizedFortunes(256);
  return absl::StrCat(ExamplePath("batch_report"), " --out_dir=", dir, " --batches=", batches,
                      " --modes=scaled --tokens=12000 --seq_len=32 --reference_batch=8",
                      " --val_points=4 -- --layers=1 --d_model=32 --heads=2 --vocab=256",
                      " --threads=1 --data=", prefix, "_train.bin --val_data=", prefix,
                      "_val.bin");
}

TEST(BatchReportTest, TablesEveryRun) {
  const std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/report");
  std::string output;
  ASSERT_EQ(RunCommand(Command(dir, "4,8"), &output), 0) << output;
  const std::string csv = ReadWholeFile(dir + "/batch_report.csv");
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << csv;
  EXPECT_EQ(lines[0].rfind("batch,mode,ranks,accum,steps,tokens,peak_lr,final_val_loss", 0), 0u);
  // batch 4: one rank, no accumulation, no noise scale; batch 8: 2 ranks.
  EXPECT_EQ(lines[1].rfind("4,scaled,1,1,94,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("8,scaled,2,1,47,", 0), 0u) << lines[2];
  std::vector<std::string> eight = absl::StrSplit(lines[2], ',');
  ASSERT_EQ(eight.size(), 13u);
  EXPECT_NE(eight[11], "-") << "the 2-rank run measured no noise scale: " << lines[2];
  std::vector<std::string> four = absl::StrSplit(lines[1], ',');
  ASSERT_EQ(four.size(), 13u);
  EXPECT_EQ(four[11], "-") << lines[1];
  EXPECT_NE(output.find("target validation loss"), std::string::npos) << output;
  EXPECT_FALSE(ReadWholeFile(dir + "/runs/b8_scaled.jsonl").empty());
}

TEST(BatchReportTest, RefusesABadBatchList) {
  std::string output;
  EXPECT_EQ(RunCommand(Command(absl::StrCat(getenv("TEST_TMPDIR"), "/bad"), "4,x"), &output), 1);
  EXPECT_NE(output.find("--batches: 'x' is not a positive number of sequences"),
            std::string::npos)
      << output;
  output.clear();
  EXPECT_EQ(RunCommand(Command(absl::StrCat(getenv("TEST_TMPDIR"), "/bad2"), "6"), &output), 1);
  EXPECT_NE(output.find("not a positive multiple of the micro-batch"), std::string::npos)
      << output;
}

}  // namespace
}  // namespace fsdp_test
