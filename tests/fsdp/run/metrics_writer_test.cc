// File: tests/fsdp/run/metrics_writer_test.cc
#include "fsdp/run/metrics_writer.h"

#include <unistd.h>

#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace fsdp {
namespace {

TEST(MetricsWriterTest, StepLineHasEveryFieldAndRoundTripsTheLoss) {
  StepMetrics m;
  m.step = 3;
  m.loss = 2.718281828f;
  m.lr = 1e-3;
  m.tokens_per_s = 1234.5;
  m.peak_bytes = 987654321;
  m.comm_wait_s = 0.25;
  const std::string line = StepMetricsJson(m);
  EXPECT_EQ(line.front(), '{');
  EXPECT_EQ(line.back(), '}');
  for (const char* key : {"\"step\":3", "\"lr\":0.001", "\"tokens_per_s\":1234.5",
                          "\"peak_bytes\":987654321", "\"comm_wait_s\":0.25"}) {
    EXPECT_NE(line.find(key), std::string::npos) << key << " in " << line;
  }
  const size_t at = line.find("\"loss\":");
  ASSERT_NE(at, std::string::npos);
  // 9 significant digits bring the float back exactly.
  EXPECT_EQ(static_cast<float>(std::strtod(line.c_str() + at + 7, nullptr)),
            static_cast<float>(m.loss));
}

TEST(MetricsWriterTest, FinalLineIsMarkedAndCarriesTheDigest) {
  FinalMetrics f;
  f.steps = 20;
  f.param_sha256 = std::string(64, 'a');
  f.world_size = 4;
  f.strategy = "no_shard";
  f.optimizer_share = 0.125;
  f.compute_threads = 3;
  const std::string line = FinalMetricsJson(f);
  EXPECT_EQ(line.rfind("{\"final\":true", 0), 0u) << line;
  EXPECT_NE(line.find("\"optimizer_share\":0.125,\"compute_threads\":3,"), std::string::npos)
      << line;
  EXPECT_NE(line.find("\"param_sha256\":\"" + std::string(64, 'a') + "\""), std::string::npos);
  EXPECT_NE(line.find("\"world_size\":4"), std::string::npos);
}

TEST(MetricsWriterTest, WritesOneLinePerCall) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR")
                                                                  : "/tmp") +
                           "/metrics_writer_test.jsonl";
  {
    auto writer = MetricsWriter::Open(path, MetricsWriter::Mode::kNewRun);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->WriteLine("{\"a\":1}").ok());
    ASSERT_TRUE((*writer)->WriteLine("{\"b\":2}").ok());
  }
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), "{\"a\":1}\n{\"b\":2}\n");
}

TEST(MetricsWriterTest, UnwritablePathIsAClearError) {
  auto writer = MetricsWriter::Open("/nonexistent-dir/m.jsonl", MetricsWriter::Mode::kNewRun);
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(writer.status().message().find("/nonexistent-dir/m.jsonl"), std::string::npos);
}

std::string TmpPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// A new run starts the file anew; a resumed or restarted one appends to it.
TEST(MetricsWriterTest, ANewRunTruncatesAContinuedRunAppends) {
  const std::string path = TmpPath("modes.jsonl");
  for (MetricsWriter::Mode mode :
       {MetricsWriter::Mode::kNewRun, MetricsWriter::Mode::kContinue}) {
    auto writer = MetricsWriter::Open(path, mode);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->WriteLine("{\"step\":1}").ok());
  }
  EXPECT_EQ(Contents(path), "{\"step\":1}\n{\"step\":1}\n");
  {
    auto writer = MetricsWriter::Open(path, MetricsWriter::Mode::kNewRun);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->WriteLine(ResumedMetricsJson(7)).ok());
  }
  EXPECT_EQ(Contents(path), "{\"step\":7,\"resumed\":true}\n");
}

// A symbolic link planted where the metrics go is not followed: its target
// keeps its bytes.
TEST(MetricsWriterTest, ASymbolicLinkIsNotFollowed) {
  const std::string target = TmpPath("victim.txt");
  const std::string link = TmpPath("link.jsonl");
  { std::ofstream(target) << "precious\n"; }
  std::remove(link.c_str());
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  for (MetricsWriter::Mode mode :
       {MetricsWriter::Mode::kNewRun, MetricsWriter::Mode::kContinue}) {
    auto writer = MetricsWriter::Open(link, mode);
    ASSERT_FALSE(writer.ok());
    EXPECT_NE(writer.status().message().find("symbolic link"), std::string::npos)
        << writer.status();
  }
  EXPECT_EQ(Contents(target), "precious\n");
}

}  // namespace
}  // namespace fsdp
