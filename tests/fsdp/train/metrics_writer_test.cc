// File: tests/fsdp/train/metrics_writer_test.cc
#include "fsdp/train/metrics_writer.h"

#include <cstdlib>
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
  const std::string line = FinalMetricsJson(f);
  EXPECT_EQ(line.rfind("{\"final\":true", 0), 0u) << line;
  EXPECT_NE(line.find("\"param_sha256\":\"" + std::string(64, 'a') + "\""), std::string::npos);
  EXPECT_NE(line.find("\"world_size\":4"), std::string::npos);
}

TEST(MetricsWriterTest, WritesOneLinePerCall) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR")
                                                                  : "/tmp") +
                           "/metrics_writer_test.jsonl";
  {
    auto writer = MetricsWriter::Open(path);
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
  auto writer = MetricsWriter::Open("/nonexistent-dir/m.jsonl");
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(writer.status().message().find("/nonexistent-dir/m.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace fsdp
