// File: tests/fsdp/report/memory_estimate_test.cc
//
// The per-rank estimate against independent references: the ZeRO paper's
// per-device formulas (written out here from the paper, with Psi counted
// from the GPT shapes by hand), the paper's own 7.5e9-parameter numbers, and
// the runtime's allocations recomputed from the unit shapes.
#include "fsdp/report/memory_estimate.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace fsdp {
namespace report {
namespace {

// Psi of the GPT of fsdp/nn/gpt_spec.h, from its shapes (C = d_model, V =
// vocab, T = seq_len, L = layers): wte V C + wpe T C; per block 2C (ln1) +
// 3C^2 + 3C (qkv) + C^2 + C (proj) + 2C (ln2) + 4C^2 + 4C (fc) + 4C^2 + C
// (mlp proj); head 2C + V C.
int64_t HandCountedParams(const GptConfig& c) {
  const int64_t C = c.d_model, V = c.vocab, T = c.seq_len, L = c.layers;
  const int64_t block = 12 * C * C + 13 * C;
  return V * C + T * C + L * block + 2 * C + V * C;
}

struct ZeroCase {
  proto::ShardingStrategy strategy;
  // Bytes per device for mixed-precision Adam, K = 12 (paper Section 5.1):
  // baseline (2 + 2 + K) Psi; P_os 2 Psi + 2 Psi + K Psi / Nd;
  // P_os+g 2 Psi + (2 + K) Psi / Nd; P_os+g+p (2 + 2 + K) Psi / Nd.
  double Paper(double psi, double nd) const {
    switch (strategy) {
      case proto::NO_SHARD:
        return 16.0 * psi;
      case proto::SHARD_OPTIMIZER:
        return 4.0 * psi + 12.0 * psi / nd;
      case proto::SHARD_GRAD_OP:
        return 2.0 * psi + 14.0 * psi / nd;
      default:
        return 16.0 * psi / nd;
    }
  }
};

TEST(MemoryEstimateTest, MixedPrecisionModelStateIsTheZeroPapersFormulaAtManyDegrees) {
  const std::vector<GptConfig> configs = {{2, 64, 4, 256, 64}, {4, 96, 3, 1000, 128},
                                          {12, 768, 12, 50304, 1024}};
  const std::vector<int> degrees = {1, 2, 3, 4, 5, 7, 8, 16, 64, 100, 256, 1024, 4096, 16384};
  const std::vector<ZeroCase> cases = {{proto::NO_SHARD}, {proto::SHARD_OPTIMIZER},
                                       {proto::SHARD_GRAD_OP}, {proto::FULL_SHARD}};
  for (const GptConfig& config : configs) {
    const int64_t psi = HandCountedParams(config);
    const int64_t units = config.layers + 2;
    for (int nd : degrees) {
      for (const ZeroCase& zero : cases) {
        MemoryPoint point;
        point.config = config;
        point.strategy = zero.strategy;
        point.ranks = nd;
        point.precision = Precision::kMixed;
        absl::StatusOr<RankMemoryEstimate> e = EstimateRankMemory(point);
        ASSERT_TRUE(e.ok()) << e.status();
        EXPECT_EQ(e->num_params, psi);
        // Each unit pads by fewer than nd elements, each costing at most
        // 16 bytes on a rank; shards round up by less than one element per unit.
        const double slack = 16.0 * units * nd + 16.0 * units;
        EXPECT_NEAR(static_cast<double>(e->model_state_bytes()), zero.Paper(psi, nd), slack)
            << MemoryPointToString(point);
        if (nd == 1) {
          EXPECT_EQ(e->model_state_bytes(), 16 * psi) << MemoryPointToString(point);
        }
      }
    }
  }
}

TEST(MemoryEstimateTest, ZeroFormulaReproducesThePapersSevenPointFiveBillionExample) {
  // Rajbhandari et al. 2019, Figure 1: Psi = 7.5B, Nd = 64, K = 12.
  struct Row {
    proto::ShardingStrategy strategy;
    double paper_gb;
  };
  for (const Row& row : {Row{proto::NO_SHARD, 120.0}, Row{proto::SHARD_OPTIMIZER, 31.4},
                         Row{proto::SHARD_GRAD_OP, 16.6}, Row{proto::FULL_SHARD, 1.9}}) {
    absl::StatusOr<ModelStateBytes> bytes = ZeroModelStateBytes(
        7500000000, row.strategy, 64, 0, Precision::kMixed, plan::OptimizerKind::kAdam);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_NEAR(bytes->total_bytes() / 1e9, row.paper_gb, 0.05) << row.strategy;
  }
}

TEST(MemoryEstimateTest, ZeroFormulaFp32AndHybrid) {
  const int64_t psi = 1000003;  // prime: shards round up
  absl::StatusOr<ModelStateBytes> fp32 =
      ZeroModelStateBytes(psi, proto::NO_SHARD, 8, 0, Precision::kFp32, plan::OptimizerKind::kAdam);
  ASSERT_TRUE(fp32.ok());
  EXPECT_EQ(fp32->parameter_bytes, 4 * psi);
  EXPECT_EQ(fp32->gradient_bytes, 4 * psi);
  EXPECT_EQ(fp32->optimizer_state_bytes, 8 * psi);  // no master copy in fp32
  const int64_t shard = (psi + 3) / 4;
  absl::StatusOr<ModelStateBytes> hybrid = ZeroModelStateBytes(
      psi, proto::HYBRID_SHARD, 16, 4, Precision::kMixed, plan::OptimizerKind::kAdam);
  ASSERT_TRUE(hybrid.ok());
  EXPECT_EQ(hybrid->total_bytes(), 16 * shard);
  EXPECT_FALSE(ZeroModelStateBytes(psi, proto::HYBRID_SHARD, 16, 3, Precision::kMixed,
                                   plan::OptimizerKind::kAdam)
                   .ok());
  EXPECT_FALSE(ZeroModelStateBytes(0, proto::FULL_SHARD, 16, 0, Precision::kMixed,
                                   plan::OptimizerKind::kAdam)
                   .ok());
}

// What DataParallelTrainer allocates for no_shard, recomputed from the unit
// sizes: per unit a padded parameter and gradient buffer and a gradient
// shard staging buffer, AdamW's two moments over the real elements, one
// scalar; the model's activations and workspace from its formula.
TEST(MemoryEstimateTest, NoShardFp32MatchesTheRuntimesAllocationsTermByTerm) {
  const GptConfig config{3, 48, 4, 300, 40};
  for (int ranks : {1, 2, 3, 8}) {
    int64_t padded = 0, shards = 0, real = 0;
    for (const UnitSpec& unit : GptUnitSpecs(config)) {
      const int64_t shard = (unit.numel() + ranks - 1) / ranks;
      shards += shard;
      padded += shard * ranks;
      real += unit.numel();
    }
    MemoryPoint point;
    point.config = config;
    point.micro_batch = 3;
    point.ranks = ranks;
    absl::StatusOr<RankMemoryEstimate> e = EstimateRankMemory(point);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kParameters), 4 * padded);
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kGradients), 4 * padded);
    // The planner counts Adam state on the padded buffer; the runtime on the
    // real elements: at most units x (ranks - 1) elements apart.
    EXPECT_GE(e->tracker_bytes(MemoryCategory::kOptimizerState), 8 * real);
    EXPECT_LE(e->tracker_bytes(MemoryCategory::kOptimizerState), 8 * padded);
    // One gradient shard per unit + the loss/norm exchange, 16 bytes a rank.
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kCommBuffers), 4 * shards + 16 * ranks);
    const int64_t B = 3, T = 40, C = 48, H = 4, V = 300;
    const int64_t saved = 4 * (B * T * C + B * T) +
                          3 * 4 * (16 * B * T * C + 4 * B * T + B * H * T * T) +
                          4 * (B * T * C + 3 * B * T + B * T * V);
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kActivations), saved);
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kWorkspace), 4 * (10 * B * T * C + T * T));
    EXPECT_EQ(e->gathered_bytes, 0);
  }
}

// --exact (docs/exact.md): 8-byte gradients reduced in place, one unit's fp32
// workspace, and the maxima exchange (4 bytes per tensor and rank, the
// loss's too, and the loss's 8-byte sum), as exact_step_test measures them.
TEST(MemoryEstimateTest, ExactNoShardHoldsInt64GradientsTermByTerm) {
  const GptConfig config{3, 48, 4, 300, 40};
  const int64_t tensors = 2 + 3 * 12 + 3;  // wte, wpe; 12 per block; ln_f w, b, head
  for (int ranks : {1, 2, 3, 8}) {
    int64_t padded = 0, largest = 0;
    for (const UnitSpec& unit : GptUnitSpecs(config)) {
      const int64_t shard = (unit.numel() + ranks - 1) / ranks;
      padded += shard * ranks;
      largest = std::max(largest, shard * ranks);
    }
    MemoryPoint point;
    point.config = config;
    point.micro_batch = 3;
    point.ranks = ranks;
    point.exact = true;
    absl::StatusOr<RankMemoryEstimate> e = EstimateRankMemory(point);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kGradients), 8 * padded + 4 * largest);
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kCommBuffers),
              16 * ranks + 4 * ranks * (tensors + 1) + 8);
    point.exact = false;
    absl::StatusOr<RankMemoryEstimate> plain = EstimateRankMemory(point);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kActivations),
              plain->tracker_bytes(MemoryCategory::kActivations));
  }
}

TEST(MemoryEstimateTest, TrackerCategoriesAndPartsBothSumToTheTotal) {
  for (proto::ShardingStrategy strategy : {proto::NO_SHARD, proto::SHARD_OPTIMIZER,
                                           proto::SHARD_GRAD_OP, proto::FULL_SHARD,
                                           proto::HYBRID_SHARD}) {
    for (Precision precision : {Precision::kFp32, Precision::kMixed}) {
      MemoryPoint point;
      point.config = {4, 64, 4, 512, 64};
      point.strategy = strategy;
      point.ranks = 4;
      point.group_size = strategy == proto::HYBRID_SHARD ? 2 : 0;
      point.precision = precision;
      absl::StatusOr<RankMemoryEstimate> e = EstimateRankMemory(point);
      ASSERT_TRUE(e.ok()) << e.status();
      int64_t by_tracker = 0, by_parts = 0;
      for (int c = 0; c < kNumMemoryCategories; ++c) {
        by_tracker += e->tracker_bytes(static_cast<MemoryCategory>(c));
      }
      for (const NamedBytes& part : EstimateParts(*e)) by_parts += part.bytes;
      EXPECT_EQ(by_tracker, e->sum_of_parts_bytes()) << MemoryPointToString(point);
      EXPECT_EQ(by_parts, e->sum_of_parts_bytes()) << MemoryPointToString(point);
      // The total's peak is bounded by the sum of the category peaks, and
      // equal to it when nothing is gathered or unsharded during the step
      // (everything but the activations is held throughout).
      EXPECT_LE(e->total_bytes(), e->sum_of_parts_bytes()) << MemoryPointToString(point);
      if (e->gathered_bytes == 0) {
        EXPECT_EQ(e->total_bytes(), e->sum_of_parts_bytes()) << MemoryPointToString(point);
      } else {
        // Working buffers peak in backward, while activations are freed.
        EXPECT_LT(e->total_bytes(), e->sum_of_parts_bytes()) << MemoryPointToString(point);
        EXPECT_GE(e->total_bytes(), e->sum_of_parts_bytes() - e->gathered_bytes)
            << MemoryPointToString(point);
      }
      EXPECT_EQ(e->master_parameter_bytes > 0, precision == Precision::kMixed);
      // Full sharding gathers units to compute; the others keep them whole.
      const bool gathers = strategy == proto::FULL_SHARD || strategy == proto::HYBRID_SHARD;
      EXPECT_EQ(e->gathered_parameter_bytes > 0, gathers) << MemoryPointToString(point);
    }
  }
}

// full_shard with prefetch 1 on a 1-block GPT (units: embedding, block,
// head), peak of the total worked out by hand from the schedule: the
// backward of the head holds every unit's activations, the head and the
// block gathered, and the head's unsharded gradients; the forward of the
// block holds embedding + block activations and the block and head
// gathered; the larger wins.
TEST(MemoryEstimateTest, FullShardPeakFollowsTheSchedule) {
  const GptConfig config{1, 32, 2, 500, 16};
  MemoryPoint point;
  point.config = config;
  point.micro_batch = 2;
  point.strategy = proto::FULL_SHARD;
  point.ranks = 2;
  const RankMemoryEstimate e = *EstimateRankMemory(point);
  std::vector<int64_t> padded;
  for (const UnitSpec& unit : GptUnitSpecs(config)) padded.push_back((unit.numel() + 1) / 2 * 2);
  const GptActivationBreakdown a = GptActivationBytesByUnit(config, 2);
  const int64_t held = e.model_state_bytes() + e.comm_buffer_bytes + e.workspace_bytes;
  const int64_t head_backward =
      a.embedding_bytes + a.block_bytes + a.head_bytes + 4 * (padded[2] + padded[1]) + 4 * padded[2];
  const int64_t block_forward = a.embedding_bytes + a.block_bytes + 4 * (padded[1] + padded[2]);
  const int64_t block_backward = a.embedding_bytes + a.block_bytes +
                                 4 * (padded[1] + padded[0]) + 4 * (padded[1] + padded[2]);
  EXPECT_EQ(e.total_bytes(), held + std::max({head_backward, block_forward, block_backward}));
  EXPECT_EQ(e.comm_buffer_bytes, 16 * 2)
      << "gradient-sharding strategies stage nothing but the loss/norm exchange";
}

// The activation modes, the activations' peak from the saved tensors listed
// by hand (docs/model.md): a block saves 4 (16 BTC + 4 BT) bytes besides
// attention's B H T T probabilities (standard) or B H T log-sum-exps
// (flash); a checkpointed block keeps 4 BTC, its output, and holds the rest
// of a block on top while it runs. With every block checkpointed the
// largest moment is the last block's forward (every output, the embedding
// and the rest of a block) or the end of the forward (with the head).
TEST(MemoryEstimateTest, ActivationPeakPerModeFromTheTensorsByHand) {
  const int64_t B = 3, T = 40, C = 48, H = 4, V = 300, L = 3;
  const int64_t embedding = 4 * (B * T * C + B * T);
  const int64_t head = 4 * (B * T * C + 3 * B * T + B * T * V);
  const int64_t standard_block = 4 * (16 * B * T * C + 4 * B * T + B * H * T * T);
  const int64_t flash_block = 4 * (16 * B * T * C + 4 * B * T + B * H * T);
  const int64_t output = 4 * B * T * C;
  struct Mode {
    int every;
    bool flash;
    int64_t peak;
  };
  const int64_t all_standard =
      embedding + L * output + std::max(head, standard_block - output);
  const int64_t all_flash = embedding + L * output + std::max(head, flash_block - output);
  // every:2 checkpoints blocks 0 and 2: the forward of block 2 holds block
  // 0's output, block 1 whole, block 2 whole.
  const int64_t every2 = std::max(embedding + output + standard_block + head + output,
                                  embedding + output + standard_block + standard_block);
  for (const Mode& mode : {Mode{0, false, embedding + L * standard_block + head},
                           Mode{0, true, embedding + L * flash_block + head},
                           Mode{1, false, all_standard}, Mode{1, true, all_flash},
                           Mode{2, false, every2}}) {
    MemoryPoint point;
    point.config = {3, 48, 4, 300, 40};
    point.config.activation_checkpoint_every = mode.every;
    point.config.flash_attention = mode.flash;
    point.micro_batch = 3;
    point.ranks = 2;
    absl::StatusOr<RankMemoryEstimate> e = EstimateRankMemory(point);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->tracker_bytes(MemoryCategory::kActivations), mode.peak)
        << MemoryPointToString(point);
    // no_shard fp32 has no working buffers: everything else is held, so the
    // total's peak is the sum of the parts whatever the activations do.
    EXPECT_EQ(e->total_bytes(), e->sum_of_parts_bytes()) << MemoryPointToString(point);
  }
  EXPECT_LT(all_flash, all_standard);
  EXPECT_LT(all_standard, embedding + L * standard_block + head);
}

// Merged plan units (min_unit_numel) replay the activations of their model
// units in order: without working buffers the total's peak stays the sum
// of the parts (the activations' own peak on top of what is held), for
// every mode and every merge.
TEST(MemoryEstimateTest, MergedUnitsKeepTheActivationPeakForEveryMode) {
  const GptConfig base{4, 32, 2, 200, 24};
  int64_t total_numel = 0;
  for (const UnitSpec& unit : GptUnitSpecs(base)) total_numel += unit.numel();
  for (int64_t min_unit_numel : {int64_t{0}, total_numel / 3, total_numel}) {
    for (int every : {0, 1, 2, 3}) {
      for (bool flash : {false, true}) {
        for (proto::ShardingStrategy strategy : {proto::NO_SHARD, proto::SHARD_OPTIMIZER}) {
          MemoryPoint point;
          point.config = base;
          point.config.activation_checkpoint_every = every;
          point.config.flash_attention = flash;
          point.micro_batch = 2;
          point.ranks = 3;
          point.strategy = strategy;
          point.min_unit_numel = min_unit_numel;
          absl::StatusOr<RankMemoryEstimate> e = EstimateRankMemory(point);
          ASSERT_TRUE(e.ok()) << e.status();
          const GptActivationBreakdown a = GptActivationBytesByUnit(point.config, 2);
          EXPECT_EQ(e->activation_bytes, a.peak_bytes());
          EXPECT_EQ(e->total_bytes(), e->sum_of_parts_bytes())
              << MemoryPointToString(point) << " min_unit_numel=" << min_unit_numel;
        }
      }
    }
  }
}

// full_shard on a 1-block GPT with the block checkpointed, as in
// FullShardPeakFollowsTheSchedule: the block's forward and its backward now
// hold the whole block (its output saved, the rest recomputed) while the
// head's backward holds only the output.
TEST(MemoryEstimateTest, FullShardCheckpointedPeakFollowsTheSchedule) {
  GptConfig config{1, 32, 2, 500, 16};
  config.activation_checkpoint_every = 1;
  MemoryPoint point;
  point.config = config;
  point.micro_batch = 2;
  point.strategy = proto::FULL_SHARD;
  point.ranks = 2;
  const RankMemoryEstimate e = *EstimateRankMemory(point);
  std::vector<int64_t> padded;
  for (const UnitSpec& unit : GptUnitSpecs(config)) padded.push_back((unit.numel() + 1) / 2 * 2);
  const GptActivationBreakdown a = GptActivationBytesByUnit(config, 2);
  const int64_t B = 2, T = 16, C = 32;
  ASSERT_EQ(a.checkpointed_block_bytes, 4 * B * T * C);
  const int64_t held = e.model_state_bytes() + e.comm_buffer_bytes + e.workspace_bytes;
  const int64_t head_backward = a.embedding_bytes + 4 * B * T * C + a.head_bytes +
                                4 * (padded[2] + padded[1]) + 4 * padded[2];
  const int64_t block_forward = a.embedding_bytes + a.block_bytes + 4 * (padded[1] + padded[2]);
  const int64_t block_backward = a.embedding_bytes + a.block_bytes +
                                 4 * (padded[1] + padded[0]) + 4 * (padded[1] + padded[2]);
  EXPECT_EQ(e.total_bytes(), held + std::max({head_backward, block_forward, block_backward}));
  EXPECT_EQ(e.activation_bytes, std::max(a.embedding_bytes + a.block_bytes,
                                         a.embedding_bytes + 4 * B * T * C + a.head_bytes));
}

TEST(MemoryEstimateTest, BadPointsAreClearErrors) {
  MemoryPoint point;
  point.micro_batch = 0;
  EXPECT_NE(EstimateRankMemory(point).status().message().find("micro_batch"), std::string::npos);
  point.micro_batch = 1;
  point.config.heads = 5;  // does not divide 64
  EXPECT_EQ(EstimateRankMemory(point).status().code(), absl::StatusCode::kInvalidArgument);
  point.config.heads = 4;
  point.strategy = proto::HYBRID_SHARD;
  point.ranks = 6;
  point.group_size = 4;
  EXPECT_EQ(EstimateRankMemory(point).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParsePrecision("bfloat16").ok());
  EXPECT_NE(ParsePrecision("fp16").status().message().find("bf16 (the runtime's --precision=bf16"),
            std::string::npos);
  EXPECT_EQ(*ParsePrecision("mixed"), Precision::kMixed);
  EXPECT_EQ(*ParsePrecision("bf16"), Precision::kBf16);
  // The old runtime mode is named, with what replaced it.
  EXPECT_NE(ParsePrecision("bf16_wire").status().message().find("alias of --precision=bf16"),
            std::string::npos);
}

}  // namespace
}  // namespace report
}  // namespace fsdp
