// File: tests/examples/speed_goals_test.cc
//
// speed_bench's goal report (examples/speed_goals.h): the PyTorch reference's
// last line is read (a stand-in "python" prints it), a missing or failing
// reference is said, not taken for a figure, and each goal gets the verdict
// its numbers give.
#include "examples/speed_goals.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace speed_goals {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// An executable shell script standing in for python: `body` runs for the
// reference; `-c` (the torch probe) exits with `probe_status`.
std::string FakePython(const std::string& name, const std::string& body, int probe_status = 0) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream out(path);
  out << "#!/bin/sh\nif [ \"$1\" = -c ]; then exit " << probe_status << "; fi\n" << body << "\n";
  out.close();
  chmod(path.c_str(), 0755);
  return path;
}

PyTorchOptions Options(const std::string& python) {
  PyTorchOptions o;
  o.python = python;
  o.script = TempDir() + "/gpt_ddp.py";
  std::ofstream(o.script) << "# stand-in\n";
  return o;
}

TEST(SpeedGoalsTest, ReadsTheReferencesLastLine) {
  // The stand-in fails unless it was given the model's flags.
  const std::string python = FakePython(
      "python_ok",
      "case \"$*\" in *'--layers=3 --steps=2'*) ;; *) exit 9;; esac\n"
      "echo 'step 6/6 loss 9.1759 3737 ms'\n"
      "echo 'pytorch 1.13.0a0 DDP gloo, fp32, 2 ranks x 1 thread, 33739776 parameters: 431 "
      "tok/s; peak RSS per rank 1.64, 1.71 GiB'");
  PyTorchOptions options = Options(python);
  options.args = {"--layers=3", "--steps=2"};
  const PyTorchResult r = RunPyTorchReference(options, /*bf16=*/false);
  ASSERT_TRUE(r.ran) << r.why_not;
  EXPECT_EQ(r.tokens_per_s, 431);
  EXPECT_EQ(r.rss, "1.64, 1.71 GiB");
}

// A reference that printed its figures and then hung until the timeout (or
// failed at exit): the figures count, and how it ended is said.
TEST(SpeedGoalsTest, KeepsFiguresPrintedBeforeABadExit) {
  const std::string python = FakePython(
      "python_hangs_at_exit",
      "echo 'pytorch 1.13.0a0 DDP gloo, bf16 autocast, 2 ranks x 1 thread, 33739776 "
      "parameters: 851 tok/s; peak RSS per rank 1.40, 1.40 GiB'\n"
      "exit 124");
  const PyTorchResult r = RunPyTorchReference(Options(python), /*bf16=*/true);
  ASSERT_TRUE(r.ran) << r.why_not;
  EXPECT_EQ(r.tokens_per_s, 851);
  EXPECT_NE(r.exit_note.find("exit status 124: the 15-minute timeout"), std::string::npos)
      << r.exit_note;

  testing::internal::CaptureStdout();
  PrintSpeedGoals({{"bf16", "no_shard", 3027}}, r, r, /*amx=*/false);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("851 tok/s at its best, 2 ranks x 1 thread (DDP over gloo), peak RSS per "
                     "rank 1.40, 1.40 GiB (its figures were printed"),
            std::string::npos)
      << out;
}

// PyTorch at its best: the same global batch in each layout, nproc ranks x 1
// thread and 1 process x nproc threads, and the faster is the reference.
TEST(SpeedGoalsTest, KeepsTheFasterLayoutOfTheSameBatch) {
  const std::string python = FakePython(
      "python_layouts",
      "case \"$*\" in\n"
      "  *'--nproc=2 --threads=1 --micro_batch=4'*) rate=431;;\n"
      "  *'--nproc=1 --threads=2 --micro_batch=8'*) rate=902;;\n"
      "  *) exit 9;;\n"
      "esac\n"
      "echo 'loaded: torch 1.13 (stand-in)'\n"
      "echo \"pytorch 1.13.0a0 bf16 autocast, some layout, 33739776 parameters: $rate tok/s; "
      "peak RSS per rank 1.45 GiB\"");
  PyTorchOptions options = Options(python);
  options.nproc = 2;
  options.micro_batch = 4;
  const PyTorchResult r = RunPyTorchReference(options, /*bf16=*/true);
  ASSERT_TRUE(r.ran) << r.why_not;
  EXPECT_EQ(r.tokens_per_s, 902);
  EXPECT_EQ(r.layout, "1 process x 2 threads");
  EXPECT_EQ(r.loaded, "torch 1.13 (stand-in)");
  ASSERT_EQ(r.others.size(), 1u);
  EXPECT_EQ(r.others[0], "2 ranks x 1 thread (DDP over gloo): 431 tok/s");
}

TEST(SpeedGoalsTest, SaysWhyTheReferenceDidNotRun) {
  const PyTorchResult missing =
      RunPyTorchReference(Options(TempDir() + "/no_such_python"), false);
  EXPECT_FALSE(missing.ran);
  EXPECT_NE(missing.why_not.find("not found"), std::string::npos) << missing.why_not;

  const PyTorchResult no_torch =
      RunPyTorchReference(Options(FakePython("python_no_torch", "exit 0", 1)), false);
  EXPECT_FALSE(no_torch.ran);
  EXPECT_NE(no_torch.why_not.find("python3-torch"), std::string::npos) << no_torch.why_not;

  const PyTorchResult failed = RunPyTorchReference(
      Options(FakePython("python_fails", "echo 'Traceback: boom'; exit 3")), true);
  EXPECT_FALSE(failed.ran);
  EXPECT_NE(failed.why_not.find("exit status 3"), std::string::npos) << failed.why_not;
}

TEST(SpeedGoalsTest, JudgesEachGoalOnItsNumbers) {
  const std::vector<Measured> measured = {{"fp32", "no_shard", 1533},
                                          {"fp32", "full_shard", 1516},
                                          {"bf16", "no_shard", 2705},
                                          {"bf16", "full_shard", 2400}};
  PyTorchResult fp32, bf16;
  fp32.ran = bf16.ran = true;
  fp32.tokens_per_s = 431;
  bf16.tokens_per_s = 1200;

  testing::internal::CaptureStdout();
  PrintSpeedGoals(measured, fp32, bf16, /*amx=*/true);
  const std::string amx = testing::internal::GetCapturedStdout();
  EXPECT_NE(amx.find("fp32 no_shard >= 1.3x PyTorch's fp32"), std::string::npos) << amx;
  EXPECT_NE(amx.find("met: 3.56x"), std::string::npos) << amx;
  EXPECT_NE(amx.find("NOT met: 2.25x"), std::string::npos) << amx;  // bf16 no_shard on AMX
  EXPECT_NE(amx.find("NOT met: 1.13x"), std::string::npos) << amx;  // bf16 full_shard step
  EXPECT_NE(amx.find("met: 1.01x"), std::string::npos) << amx;      // fp32 full_shard step

  testing::internal::CaptureStdout();
  PrintSpeedGoals(measured, fp32, bf16, /*amx=*/false);
  const std::string no_amx = testing::internal::GetCapturedStdout();
  EXPECT_NE(no_amx.find("n/a: the goal is for a CPU with AMX and this one has none; here 2.25x"),
            std::string::npos)
      << no_amx;

  PyTorchResult not_run;
  not_run.why_not = "no torch";
  testing::internal::CaptureStdout();
  PrintSpeedGoals(measured, not_run, not_run, true);
  const std::string none = testing::internal::GetCapturedStdout();
  EXPECT_NE(none.find("n/a: PyTorch not run (no torch)"), std::string::npos) << none;
  EXPECT_EQ(none.find("NOT met: 2.25x"), std::string::npos) << none;
}

}  // namespace
}  // namespace speed_goals
