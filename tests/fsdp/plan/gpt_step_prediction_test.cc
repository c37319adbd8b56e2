// File: tests/fsdp/plan/gpt_step_prediction_test.cc
// What a GptRun's software fields change in a prediction, against the same
// run without them, on a hand-made two-node GPU-like description.
#include "fsdp/plan/gpt_step_prediction.h"

#include "gtest/gtest.h"

namespace fsdp {
namespace plan {
namespace {

proto::HardwareDescription Gpus() {
  proto::HardwareDescription hw;
  hw.set_name("gpus");
  for (const char* dtype : {"fp32", "bf16"}) {
    proto::ProductRate* rate = hw.add_product_rates();
    rate->set_dtype(dtype);
    rate->set_min_dimension(0);
    rate->set_flops_per_s(1e14);
  }
  hw.set_memory_bandwidth_bytes_per_s(1e12);
  hw.set_ranks_per_node(8);
  hw.set_processors_per_node(8);
  hw.set_memory_bytes_per_processor(8e10);
  for (proto::LinkLevel* link : {hw.mutable_intra_node(), hw.mutable_inter_node()}) {
    link->set_latency_s(1e-5);
    link->set_bandwidth_bytes_per_s(2.5e10);
  }
  hw.set_network_rails_per_ring(1);
  hw.set_compute_time_cv(0);
  return hw;
}

GptRun SmallRun() {
  GptRun run;
  run.config = GptDimensions(4, 1024, 8, 32000, 2048);
  run.config.flash_attention = true;
  run.bf16 = true;
  run.ranks = 16;
  return run;
}

// fp32 reductions send twice the bf16 ones' bytes and the optimizer reads
// fp32 gradients; the products are the same.
TEST(GptStepPredictionTest, Fp32ReductionsMoveMoreBytes) {
  GptRun run = SmallRun();
  absl::StatusOr<GptStepPrediction> bf16 = PredictGptStep(run, Gpus());
  run.reduce_in_fp32 = true;
  absl::StatusOr<GptStepPrediction> fp32 = PredictGptStep(run, Gpus());
  ASSERT_TRUE(bf16.ok() && fp32.ok());
  EXPECT_GT(fp32->step.comm_s, bf16->step.comm_s);
  EXPECT_GT(fp32->step.optimizer_s, bf16->step.optimizer_s);
  EXPECT_DOUBLE_EQ(fp32->step.compute_s, bf16->step.compute_s);
}

// This runtime's kernels are the default; eager PyTorch's on the same GPT
// block add element-wise time and, with a launch cost, kernel time; the
// products (and so the hardware FLOPs per step) do not change.
TEST(GptStepPredictionTest, AFrameworksKernelsAddComputeTime) {
  proto::HardwareDescription hw = Gpus();
  GptRun run = SmallRun();
  absl::StatusOr<GptStepPrediction> own = PredictGptStep(run, hw);
  run.kernels = KernelSoftware::kThisRuntime;
  run.framework_block = GptBlockDimensions(1024, 8);
  absl::StatusOr<GptStepPrediction> same = PredictGptStep(run, hw);
  run.kernels = KernelSoftware::kPyTorchEager;
  absl::StatusOr<GptStepPrediction> eager = PredictGptStep(run, hw);
  hw.mutable_framework_overhead()->set_kernel_launch_s(1e-5);
  hw.mutable_framework_overhead()->set_collective_compute_share(0);
  absl::StatusOr<GptStepPrediction> launched = PredictGptStep(run, hw);
  ASSERT_TRUE(own.ok() && same.ok() && eager.ok() && launched.ok());
  EXPECT_EQ(same->step.step_s, own->step.step_s);
  EXPECT_GT(eager->step.compute_s, own->step.compute_s);
  EXPECT_GT(launched->step.compute_s, eager->step.compute_s);
  EXPECT_DOUBLE_EQ(eager->hardware_flops_per_s * eager->step.step_s,
                   own->hardware_flops_per_s * own->step.step_s);
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
