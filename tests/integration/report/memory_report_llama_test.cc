// File: tests/integration/report/memory_report_llama_test.cc
//
// memory_report --predict_only for the Llama: Llama 3 8B, 70B and 405B by
// name print their published shapes (Dubey et al. 2024, Table 3) and
// parameter counts that round to the published 8.03B, 70.6B and 405.9B; the
// same shape given as --model=llama flags prints the same table; the
// printed total is EstimateRankMemory's; what cannot be predicted is
// refused with exit code 2 and a message naming the flag.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "fsdp/report/llama3_models.h"
#include "fsdp/report/memory_estimate.h"
#include "gtest/gtest.h"

namespace {

std::string BinaryPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "fsdp_cpp",
                      "/examples/memory_report");
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

// The count in the header's "(N parameters", or -1.
double PrintedParams(const std::string& output) {
  const size_t end = output.find(" parameters, ");
  const size_t start = output.rfind('(', end);
  double count = -1;
  if (end == std::string::npos || start == std::string::npos ||
      !absl::SimpleAtod(output.substr(start + 1, end - start - 1), &count)) {
    return -1;
  }
  return count;
}

struct Published {
  const char* name;
  const char* shape;  // Table 3, as LlamaConfigToString writes it, at seq_len 8192
  double params;      // as published, in units of `digit`
  double digit;       // the last published digit's place
};

TEST(MemoryReportLlamaTest, Llama3ByNameHasThePublishedShapeAndParameterCount) {
  const Published models[] = {
      {"llama3-8b",
       "layers=32 d_model=4096 heads=32 kv_heads=8 ffn_hidden=14336 vocab=128256 seq_len=8192",
       8.03e9, 0.01e9},
      {"llama3-70b",
       "layers=80 d_model=8192 heads=64 kv_heads=8 ffn_hidden=28672 vocab=128256 seq_len=8192",
       70.6e9, 0.1e9},
      {"llama3-405b",
       "layers=126 d_model=16384 heads=128 kv_heads=8 ffn_hidden=53248 vocab=128256 "
       "seq_len=8192",
       405.9e9, 0.1e9},
  };
  for (const Published& model : models) {
    SCOPED_TRACE(model.name);
    const ReportRun run = RunReport(absl::StrCat("--predict_only --model=", model.name,
                                                 " --ranks=64 --strategy=full_shard "
                                                 "--precision=mixed"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find(absl::StrCat("llama ", model.shape, " (")), std::string::npos)
        << run.output;
    const double params = PrintedParams(run.output);
    // Rounded to the published digit, the count is the published one.
    EXPECT_LE(std::fabs(params - model.params), model.digit / 2) << run.output;

    // The row is the estimate of the same point.
    fsdp::report::MemoryPoint point;
    point.family = fsdp::report::ModelFamily::kLlama;
    absl::StatusOr<fsdp::LlamaConfig> config = fsdp::report::Llama3Config(model.name);
    ASSERT_TRUE(config.ok()) << config.status();
    point.llama = *config;
    point.micro_batch = 1;
    point.strategy = fsdp::proto::FULL_SHARD;
    point.ranks = 64;
    point.precision = fsdp::report::Precision::kMixed;
    absl::StatusOr<fsdp::report::RankMemoryEstimate> e = fsdp::report::EstimateRankMemory(point);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->num_params, static_cast<int64_t>(params));
    EXPECT_NE(run.output.find(absl::StrCat(" ", e->total_bytes(), " ")), std::string::npos)
        << e->total_bytes() << "\n"
        << run.output;
  }
}

TEST(MemoryReportLlamaTest, TheShapeByFlagsPrintsWhatTheNamePrints) {
  const std::string rest =
      " --ranks=8,1024 --precision=fp32,mixed --activation_checkpointing=none,all "
      "--attention=standard,flash --seq_len=4096";
  const ReportRun named = RunReport("--predict_only --model=llama3-8b" + rest);
  ASSERT_EQ(named.exit_code, 0) << named.output;
  const ReportRun flags = RunReport(
      "--predict_only --model=llama --layers=32 --d_model=4096 --heads=32 --kv_heads=8 "
      "--ffn_hidden=14336 --vocab=128256" +
      rest);
  ASSERT_EQ(flags.exit_code, 0) << flags.output;
  EXPECT_EQ(named.output, flags.output);
  EXPECT_NE(named.output.find("seq_len=4096"), std::string::npos) << named.output;
  // Llama's SwiGLU rule when --ffn_hidden is not given: 8/3 x 4096 rounded up
  // to a multiple of 256 (Llama 2 7B's 11008).
  const ReportRun rule = RunReport(
      "--predict_only --model=llama --layers=2 --d_model=4096 --heads=32 --vocab=32000 "
      "--seq_len=128 --ranks=1 --strategy=no_shard --precision=fp32");
  ASSERT_EQ(rule.exit_code, 0) << rule.output;
  EXPECT_NE(rule.output.find("kv_heads=32 ffn_hidden=11008"), std::string::npos) << rule.output;
}

TEST(MemoryReportLlamaTest, WhatCannotBePredictedIsRefused) {
  struct Refusal {
    std::string flags;
    std::string says;
  };
  const std::vector<Refusal> refusals = {
      {"--model=llama3-8b", "is predicted only (add --predict_only)"},
      {"--predict_only --model=llama3-8b --layers=3", "drop --layers"},
      {"--predict_only --model=llama3-9b", "llama3-8b, llama3-70b, llama3-405b"},
      {"--predict_only --model=llama --layers=2",
       "--predict_only needs --params=COUNT, or a llama"},
      {"--predict_only --model=llama3-8b --params=8e9", "drop it"},
      {"--predict_only --layers=2 --d_model=64 --heads=4 --vocab=256 --seq_len=64 --kv_heads=2",
       "add --model=llama"},
  };
  for (const Refusal& refusal : refusals) {
    const ReportRun run = RunReport(refusal.flags);
    EXPECT_EQ(run.exit_code, 2) << refusal.flags << "\n" << run.output;
    EXPECT_NE(run.output.find(refusal.says), std::string::npos) << refusal.flags << "\n"
                                                                << run.output;
  }
}

}  // namespace
