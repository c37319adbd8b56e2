// File: tests/fsdp/plan/hardware_description_test.cc
#include "fsdp/plan/hardware_description.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace fsdp {
namespace plan {
namespace {

constexpr char kValid[] = R"pb(
  name: "test"
  product_rates { dtype: "fp32" min_dimension: 0 flops_per_s: 1e9 }
  product_rates { dtype: "fp32" min_dimension: 256 flops_per_s: 4e9 }
  product_rates { dtype: "bf16" min_dimension: 0 flops_per_s: 2e9 }
  memory_bandwidth_bytes_per_s: 1e10
  ranks_per_node: 8
  processors_per_node: 2
  memory_bytes_per_processor: 8e9
  intra_node { latency_s: 1e-6 bandwidth_bytes_per_s: 1e10 }
  inter_node { latency_s: 1e-5 bandwidth_bytes_per_s: 1e9 }
  compute_time_cv: 0.01
  network_rails_per_ring: 4
  peak_product_rates { dtype: "fp32" min_dimension: 0 flops_per_s: 8e9 }
  peak_product_rates { dtype: "bf16" min_dimension: 0 flops_per_s: 16e9 }
  checkpoint_cost {
    save_fixed_s: 0.5
    save_bytes_per_s: 1e8
    restart_fixed_s: 2
    restart_bytes_per_s: 5e7
  }
  framework_overhead { kernel_launch_s: 2e-6 collective_compute_share: 0.05 }
)pb";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<proto::HardwareDescription> hw = ParseHardwareDescription(text, "x.textproto");
  EXPECT_FALSE(hw.ok());
  if (hw.ok()) return "";
  EXPECT_EQ(hw.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(hw.status().message());
}

TEST(HardwareDescriptionTest, ParsesAndPicksTheShapeClass) {
  absl::StatusOr<proto::HardwareDescription> hw = ParseHardwareDescription(kValid, "x");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(ProductRateFor(*hw, ProductDtype::kFp32, 64), 1e9);
  EXPECT_EQ(ProductRateFor(*hw, ProductDtype::kFp32, 255), 1e9);
  EXPECT_EQ(ProductRateFor(*hw, ProductDtype::kFp32, 256), 4e9);
  EXPECT_EQ(ProductRateFor(*hw, ProductDtype::kBf16, 4096), 2e9);
  // MFU's denominator: the peaks when given, else the highest achieved rate.
  EXPECT_EQ(PeakProductRate(*hw, ProductDtype::kBf16), 16e9);
  proto::HardwareDescription without_peaks = *hw;
  without_peaks.clear_peak_product_rates();
  EXPECT_EQ(PeakProductRate(without_peaks, ProductDtype::kFp32), 4e9);
  // What a calibration writes reads back the same.
  absl::StatusOr<proto::HardwareDescription> again =
      ParseHardwareDescription(HardwareDescriptionToText(*hw), "again");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), hw->SerializeAsString());
}

// Entries with threads serve a rank with at least that many threads; a
// rank with more takes the most the description has, a dtype without
// threaded entries its one-thread rates, and MFU's peak stays one thread's.
TEST(HardwareDescriptionTest, ThreadedEntriesServeARankWithThatManyThreads) {
  const std::string text =
      Replace(kValid, "memory_bandwidth_bytes_per_s: 1e10",
              "product_rates { dtype: \"fp32\" min_dimension: 0 flops_per_s: 1.5e9 threads: 2 }\n"
              "  product_rates { dtype: \"fp32\" min_dimension: 256 flops_per_s: 7e9 threads: 2 }\n"
              "  memory_bandwidth_bytes_per_s: 1e10");
  absl::StatusOr<proto::HardwareDescription> hw = ParseHardwareDescription(text, "x");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(ProductRateFor(*hw, ProductDtype::kFp32, 256), 4e9);
  EXPECT_EQ(ProductRateFor(*hw, ProductDtype::kFp32, 256, 1), 4e9);
  EXPECT_EQ(ProductRateFor(*hw, ProductDtype::kFp32, 256, 2), 7e9);
  EXPECT_EQ(ProductRateFor(*hw, ProductDtype::kFp32, 64, 2), 1.5e9);
  EXPECT_EQ(ProductRateFor(*hw, ProductDtype::kFp32, 1024, 8), 7e9);
  EXPECT_EQ(ProductRateFor(*hw, ProductDtype::kBf16, 1024, 2), 2e9);
  proto::HardwareDescription without_peaks = *hw;
  without_peaks.clear_peak_product_rates();
  EXPECT_EQ(PeakProductRate(without_peaks, ProductDtype::kFp32), 4e9);
  // The same entry twice at different thread counts is no repeat.
  EXPECT_TRUE(ParseHardwareDescription(Replace(text, "min_dimension: 0 flops_per_s: 1.5e9",
                                               "min_dimension: 0 flops_per_s: 1.6e9"),
                                       "x")
                  .ok());
}

TEST(HardwareDescriptionTest, NamesTheMissingField) {
  EXPECT_EQ(ErrorOf(Replace(kValid, "memory_bandwidth_bytes_per_s: 1e10", "")),
            "x.textproto: field memory_bandwidth_bytes_per_s is missing");
  EXPECT_EQ(ErrorOf(Replace(kValid, "latency_s: 1e-5 ", "")),
            "x.textproto: field inter_node.latency_s is missing");
  EXPECT_EQ(ErrorOf(Replace(kValid, "processors_per_node: 2", "")),
            "x.textproto: field processors_per_node is missing");
  EXPECT_EQ(ErrorOf(Replace(kValid, "memory_bytes_per_processor: 8e9", "")),
            "x.textproto: field memory_bytes_per_processor is missing");
  EXPECT_EQ(ErrorOf(Replace(kValid, "min_dimension: 256 ", "")),
            "x.textproto: field product_rates[1].min_dimension is missing");
  EXPECT_EQ(ErrorOf(Replace(kValid, "network_rails_per_ring: 4", "")),
            "x.textproto: field network_rails_per_ring is missing");
  // framework_overhead is optional, but a given one is whole.
  EXPECT_EQ(ErrorOf(Replace(kValid, "kernel_launch_s: 2e-6 ", "")),
            "x.textproto: field framework_overhead.kernel_launch_s is missing");
  EXPECT_EQ(ErrorOf(Replace(kValid, " collective_compute_share: 0.05", "")),
            "x.textproto: field framework_overhead.collective_compute_share is missing");
}

TEST(HardwareDescriptionTest, FrameworkOverheadIsOptional) {
  absl::StatusOr<proto::HardwareDescription> hw = ParseHardwareDescription(
      Replace(kValid, "framework_overhead { kernel_launch_s: 2e-6 collective_compute_share: 0.05 }",
              ""),
      "x");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_FALSE(hw->has_framework_overhead());
  // Absent, both costs read as 0 (what the step model takes).
  EXPECT_EQ(hw->framework_overhead().kernel_launch_s(), 0);
  EXPECT_EQ(hw->framework_overhead().collective_compute_share(), 0);
}

TEST(HardwareDescriptionTest, NamesTheFieldOutOfRange) {
  EXPECT_EQ(ErrorOf(Replace(kValid, "bandwidth_bytes_per_s: 1e9", "bandwidth_bytes_per_s: -5")),
            "x.textproto: field inter_node.bandwidth_bytes_per_s is -5; it must be a positive "
            "number");
  EXPECT_EQ(ErrorOf(Replace(kValid, "ranks_per_node: 8", "ranks_per_node: 0")),
            "x.textproto: field ranks_per_node is 0; it must be at least 1");
  EXPECT_EQ(ErrorOf(Replace(kValid, "dtype: \"bf16\"", "dtype: \"fp8\"")),
            "x.textproto: field product_rates[2].dtype is \"fp8\"; it must be \"fp32\" or "
            "\"bf16\"");
  EXPECT_EQ(ErrorOf(Replace(kValid, "dtype: \"bf16\" min_dimension: 0",
                            "dtype: \"bf16\" min_dimension: 8")),
            "x.textproto: field product_rates has no entry with min_dimension 0 for bf16: every "
            "product needs a rate");
  EXPECT_EQ(ErrorOf(Replace(kValid, "min_dimension: 256", "min_dimension: 0")),
            "x.textproto: field product_rates[1] repeats dtype fp32 with min_dimension 0 at 1 "
            "thread(s)");
  const std::string threaded =
      Replace(kValid, "memory_bandwidth_bytes_per_s: 1e10",
              "product_rates { dtype: \"fp32\" min_dimension: 64 flops_per_s: 3e9 threads: 2 }\n"
              "  memory_bandwidth_bytes_per_s: 1e10");
  EXPECT_EQ(ErrorOf(threaded),
            "x.textproto: field product_rates has no entry with min_dimension 0 for fp32 at 2 "
            "threads: every product of a rank with that many threads needs a rate");
  EXPECT_EQ(ErrorOf(Replace(threaded, "threads: 2", "threads: 0")),
            "x.textproto: field product_rates[3].threads is 0; it must be at least 1 (or "
            "absent)");
  EXPECT_EQ(ErrorOf(Replace(kValid, "network_rails_per_ring: 4", "network_rails_per_ring: 0")),
            "x.textproto: field network_rails_per_ring is 0; it must be at least 1");
  EXPECT_EQ(ErrorOf(Replace(kValid, "save_bytes_per_s: 1e8", "save_bytes_per_s: -1e8")),
            "x.textproto: field checkpoint_cost.save_bytes_per_s is -1e+08; it must be a "
            "positive number");
  EXPECT_EQ(ErrorOf(Replace(kValid, "restart_fixed_s: 2", "")),
            "x.textproto: field checkpoint_cost.restart_fixed_s is missing");
  EXPECT_EQ(ErrorOf(Replace(kValid, "flops_per_s: 16e9", "flops_per_s: -16e9")),
            "x.textproto: field peak_product_rates[1].flops_per_s is -1.6e+10; it must be a "
            "positive number");
  EXPECT_EQ(ErrorOf(Replace(kValid, "kernel_launch_s: 2e-6", "kernel_launch_s: -2e-6")),
            "x.textproto: field framework_overhead.kernel_launch_s is -2e-06; it must be zero "
            "or more");
  EXPECT_EQ(ErrorOf(Replace(kValid, "collective_compute_share: 0.05",
                            "collective_compute_share: -0.05")),
            "x.textproto: field framework_overhead.collective_compute_share is -0.05; it must "
            "be zero or more");
  EXPECT_EQ(ErrorOf(Replace(kValid, "collective_compute_share: 0.05",
                            "collective_compute_share: 1")),
            "x.textproto: field framework_overhead.collective_compute_share is 1; it must be "
            "below 1 (a share of the processor)");
}

TEST(HardwareDescriptionTest, SyntaxErrorsHaveTheirPosition) {
  const std::string error = ErrorOf(Replace(kValid, "compute_time_cv", "compute_time_cvv"));
  EXPECT_NE(error.find("x.textproto: not a HardwareDescription in text format"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("line 12"), std::string::npos) << error;
  EXPECT_NE(error.find("compute_time_cvv"), std::string::npos) << error;
}

// Every shipped description is valid.
TEST(HardwareDescriptionTest, ShippedDescriptionsAreValid) {
  for (const char* name : {"a100_ib200", "h100_nvlink_ib400", "v100_dgx2_ib800", "this_machine"}) {
    const std::string path = std::string("fsdp/plan/clusters/") + name + ".textproto";
    std::ifstream in(path);
    ASSERT_TRUE(in.good()) << path;
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<proto::HardwareDescription> hw = ParseHardwareDescription(text.str(), path);
    EXPECT_TRUE(hw.ok()) << hw.status();
  }
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
