// File: tests/base/gnuplot_test.cc
//
// A plot is published whole or not at all: gnuplot's failure leaves the kept
// script (for a person to rerun) and neither a PNG nor a temporary file.
// (A successful plot is checked pixel-header deep in
// tests/fsdp/run/metrics_plot_test.cc.)
#include "base/gnuplot.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/posix_file.h"
#include "gtest/gtest.h"
#include "tests/base/scratch_dir.h"

namespace base {
namespace {

using base_test::ListDir;

std::string TestDir() { return base_test::FreshTestDir(); }

std::string Script(const std::string& output) {
  return absl::StrCat("set terminal pngcairo size 200,100\nset output '", output,
                      "'\nplot x\nset output\n");
}

TEST(GnuplotTest, DrawsAPngAndKeepsTheScriptNamingIt) {
  const std::string dir = TestDir();
  GnuplotPlot plot;
  plot.png_path = dir + "/x.png";
  plot.script_path = dir + "/x.gp";
  plot.script_output = "x.png";
  plot.timeout = absl::Seconds(120);
  const absl::Status drawn = DrawWithGnuplot(plot, Script);
  ASSERT_TRUE(drawn.ok()) << drawn << " (tools/setup.sh installs gnuplot-nox)";
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"x.gp", "x.png"}));
  EXPECT_EQ(ReadWholeFile(dir + "/x.png")->substr(1, 3), "PNG");
  EXPECT_EQ(*ReadWholeFile(dir + "/x.gp"), Script("x.png"));
}

TEST(GnuplotTest, AFailingScriptLeavesNoPngAndNoTemporary) {
  const std::string dir = TestDir();
  GnuplotPlot plot;
  plot.png_path = dir + "/bad.png";
  plot.script_path = dir + "/bad.png.gp";
  plot.timeout = absl::Seconds(120);
  const absl::Status status = DrawWithGnuplot(
      plot, [](const std::string& output) { return Script(output) + "this is not gnuplot\n"; });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("gnuplot failed on " + plot.script_path), std::string::npos)
      << status;
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"bad.png.gp"});
}

TEST(GnuplotTest, TextIsQuotedAndControlCharactersAreRefused) {
  EXPECT_EQ(GnuplotQuoted("a'b"), "'a''b'");
  EXPECT_TRUE(CheckGnuplotText("run 1 (full_shard) / 'x'", "label").ok());
  for (const std::string& bad : {std::string("a\nb"), std::string("a\rb"), std::string("a\x7f"),
                                std::string("a\0b", 3)}) {
    const absl::Status status = CheckGnuplotText(bad, "the label");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("the label"), std::string::npos) << status;
  }
}

TEST(GnuplotTest, APathWithANewlineIsRefusedBeforeAnythingIsWritten) {
  const std::string dir = TestDir();
  GnuplotPlot plot;
  plot.png_path = dir + "/a\nb.png";
  plot.script_path = dir + "/plot.gp";
  const absl::Status status = DrawWithGnuplot(plot, Script);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(ListDir(dir).empty());
}

}  // namespace
}  // namespace base
