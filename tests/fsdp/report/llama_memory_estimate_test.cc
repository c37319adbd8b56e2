// File: tests/fsdp/report/llama_memory_estimate_test.cc
//
// The estimate of a Llama point against references written here: its
// parameters counted by hand from the Llama's tensors, no_shard fp32's
// model state and communication buffers from the unit shapes, and its
// activations from the equations of fsdp/nn/llama_spec.h. What a Llama
// measures while it trains is tests/integration/report/llama_memory_test.
#include <algorithm>
#include <cstdint>
#include <string>

#include "fsdp/nn/llama_spec.h"
#include "fsdp/report/activation_mode.h"
#include "fsdp/report/memory_estimate.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace report {
namespace {

LlamaConfig SmallLlama() {
  LlamaConfig c;
  c.layers = 3;
  c.d_model = 48;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn_hidden = 128;
  c.vocab = 300;
  c.seq_len = 40;
  return c;
}

// Psi from the tensors (C = d_model, V = vocab, F = ffn_hidden, kv = the
// key/value width kv_heads x C / heads): embedding V C; per block two norms
// 2C, q and o 2C^2, k and v 2 kv C, gate, up and down 3 C F; head norm C and
// lm_head V C.
int64_t HandCountedParams(const LlamaConfig& c) {
  const int64_t C = c.d_model, V = c.vocab, F = c.ffn_hidden, L = c.layers;
  const int64_t kv = int64_t{c.kv_heads} * (C / c.heads);
  return V * C + L * (2 * C + 2 * C * C + 2 * kv * C + 3 * C * F) + C + V * C;
}

MemoryPoint LlamaPoint(const LlamaConfig& config) {
  MemoryPoint point;
  point.family = ModelFamily::kLlama;
  point.llama = config;
  point.micro_batch = 3;
  return point;
}

TEST(LlamaMemoryEstimateTest, NoShardFp32IsTheUnitShapesAndTheActivationEquations) {
  const LlamaConfig config = SmallLlama();
  for (int ranks : {1, 2, 3}) {
    int64_t padded = 0, shards = 0;
    for (const UnitSpec& unit : LlamaUnitSpecs(config)) {
      const int64_t shard = (unit.numel() + ranks - 1) / ranks;
      shards += shard;
      padded += shard * ranks;
    }
    MemoryPoint point = LlamaPoint(config);
    point.ranks = ranks;
    absl::StatusOr<RankMemoryEstimate> e = EstimateRankMemory(point);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->num_params, HandCountedParams(config));
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kParameters), 4 * padded);
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kGradients), 4 * padded);
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kCommBuffers), 4 * shards + 16 * ranks);
    // llama_spec.h's equations in fp32 (s = 4), standard attention.
    const int64_t B = 3, T = 40, n = B * T, C = 48, H = 4, F = 128, V = 300;
    const int64_t hs = C / H, W = (4 + 2 * 2) * hs, X = std::max(2 * F, 3 * C);
    const int64_t block =
        4 * (6 * n * C + n * F) + 4 * (2 * n * C + 2 * n + 2 * n * F) + 4 * B * H * T * T;
    const int64_t saved = 4 * (n * C + n) + 3 * block + 4 * n * C + 4 * (2 * n + n * V);
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kActivations), saved);
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kWorkspace),
              4 * (T * hs + 2 * n * C + n * F + n * X + n * W + T * T));
    // No working buffers under no_shard: the total is the sum of the parts.
    EXPECT_EQ(e->gathered_bytes, 0);
    EXPECT_EQ(e->total_bytes(), e->sum_of_parts_bytes());
  }
}

// The family is what the estimate reads: a Llama point ignores its GPT
// config, and the same sizes as a GPT give another model.
TEST(LlamaMemoryEstimateTest, TheFamilyChoosesTheModel) {
  MemoryPoint llama = LlamaPoint(SmallLlama());
  llama.config.layers = 0;  // not read for a Llama
  absl::StatusOr<RankMemoryEstimate> e = EstimateRankMemory(llama);
  ASSERT_TRUE(e.ok()) << e.status();
  MemoryPoint gpt = llama;
  gpt.family = ModelFamily::kGpt;
  gpt.config = {3, 48, 4, 300, 40};
  absl::StatusOr<RankMemoryEstimate> g = EstimateRankMemory(gpt);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NE(e->num_params, g->num_params);
  EXPECT_NE(MemoryPointToString(llama).find("llama layers=3 d_model=48 heads=4 kv_heads=2"),
            std::string::npos)
      << MemoryPointToString(llama);
}

// Under bf16 the Llama computes in bf16: its saved activations shrink, and
// its model state is 2-byte parameters with an fp32 master.
TEST(LlamaMemoryEstimateTest, Bf16ComputesInBf16) {
  MemoryPoint point = LlamaPoint(SmallLlama());
  absl::StatusOr<RankMemoryEstimate> fp32 = EstimateRankMemory(point);
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  point.precision = Precision::kBf16;
  absl::StatusOr<RankMemoryEstimate> bf16 = EstimateRankMemory(point);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  LlamaConfig config = SmallLlama();
  config.compute_dtype = comm::Dtype::kBFloat16;
  config.param_dtype = comm::Dtype::kBFloat16;
  EXPECT_EQ(bf16->activation_bytes, LlamaActivationBytesByUnit(config, 3).peak_bytes());
  EXPECT_LT(bf16->activation_bytes, fp32->activation_bytes);
  EXPECT_EQ(bf16->parameter_bytes * 2, fp32->parameter_bytes);
  EXPECT_EQ(bf16->master_parameter_bytes, fp32->parameter_bytes);
}

TEST(LlamaMemoryEstimateTest, ActivationModesApplyToTheLlama) {
  MemoryPoint point = LlamaPoint(SmallLlama());
  ASSERT_TRUE(ApplyActivationMode({1, true}, point).ok());
  EXPECT_EQ(point.llama.activation_checkpoint_every, 1);
  EXPECT_TRUE(point.llama.flash_attention);
  EXPECT_EQ(ActivationModeOf(point), (ActivationMode{1, true}));
  EXPECT_EQ(ActivationModesByCost(point).size(), 5u);
  const absl::Status too_sparse = ApplyActivationMode({4, false}, point);
  EXPECT_EQ(too_sparse.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_sparse.message().find("llama layers=3"), std::string::npos) << too_sparse;
  EXPECT_EQ(point.llama.activation_checkpoint_every, 1) << "unchanged on error";
}

TEST(LlamaMemoryEstimateTest, RefusesWhatTheLlamaCannotTrain) {
  MemoryPoint point = LlamaPoint(SmallLlama());
  point.exact = true;  // trainable since the Llama computes per sequence
  EXPECT_TRUE(EstimateRankMemory(point).ok());
  point.llama.tie_embeddings = true;  // but not with a tied head
  absl::Status status = EstimateRankMemory(point).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--exact"), std::string::npos) << status;
  point.exact = false;
  point.llama.tie_embeddings = false;
  point.llama.kv_heads = 3;  // does not divide 4 heads
  status = EstimateRankMemory(point).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("kv_heads"), std::string::npos) << status;
  EXPECT_EQ(ParseModelFamily("mlp").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseModelFamily("llama"), ModelFamily::kLlama);
}

}  // namespace
}  // namespace report
}  // namespace fsdp
