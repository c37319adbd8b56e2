// File: tests/fsdp/report/llama_measured_memory_test.cc
//
// The Llama trains and its memory is measured as the memory report measures
// a GPT point (MeasureTrainingMemory: RunTraining with the run's
// MemoryTracker, the ranks here as threads); every rank's peak of every
// tracker category, and of the total, equals EstimateRankMemory's
// prediction for the same point to the byte. Points: fp32, bf16 with bf16
// gradients (mixed) and with fp32 gradients (bf16); no_shard and
// full_shard; 1 and 2 ranks; without and with activation checkpointing;
// and flash attention. The point is built from the shape below, not from
// the options, so the options' mapping to the model is checked too.
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/activation_checkpointing.h"
#include "fsdp/report/measure_training.h"
#include "fsdp/report/memory_estimate.h"
#include "fsdp/run/train_options.h"
#include "gtest/gtest.h"
#include "tests/fsdp/train/thread_communicator.h"

namespace fsdp {
namespace report {
namespace {

// Every unit's numel is even, so 2 ranks pad nothing (at a rank count that
// does not divide a unit, no_shard's Adam moments cover the real elements
// and the plan the padded ones: docs/memory.md).
constexpr int kLayers = 2, kDModel = 32, kHeads = 4, kKvHeads = 2, kFfnHidden = 96;
constexpr int kVocab = 64, kSeqLen = 16, kMicroBatch = 2;

struct Point {
  Precision precision;
  proto::ShardingStrategy strategy;
  int ranks;
  const char* checkpointing;  // --activation_checkpointing
  bool flash;
  bool tied = false;  // --tie_embeddings
  bool exact = false;  // --exact
};

std::string Name(const Point& p) {
  return absl::StrCat(PrecisionName(p.precision), " ",
                      p.strategy == proto::NO_SHARD ? "no_shard" : "full_shard", " ranks=", p.ranks,
                      " checkpointing=", p.checkpointing, p.flash ? " flash" : "",
                      p.tied ? " tied" : "", p.exact ? " exact" : "");
}

MemoryPoint PredictedPoint(const Point& p) {
  MemoryPoint point;
  point.family = ModelFamily::kLlama;
  point.llama.layers = kLayers;
  point.llama.d_model = kDModel;
  point.llama.heads = kHeads;
  point.llama.kv_heads = kKvHeads;
  point.llama.ffn_hidden = kFfnHidden;
  point.llama.vocab = kVocab;
  point.llama.seq_len = kSeqLen;
  point.llama.activation_checkpoint_every = std::string(p.checkpointing) == "all"    ? 1
                                            : std::string(p.checkpointing) == "none" ? 0
                                                                                     : 2;
  point.llama.flash_attention = p.flash;
  point.llama.tie_embeddings = p.tied;
  point.exact = p.exact;
  point.micro_batch = kMicroBatch;
  point.strategy = p.strategy;
  point.ranks = p.ranks;
  point.precision = p.precision;
  return point;
}

TrainOptions TrainingOptions(const Point& p) {
  TrainOptions o;
  o.model = "llama";
  o.nproc = p.ranks;
  o.layers = kLayers;
  o.d_model = kDModel;
  o.heads = kHeads;
  o.kv_heads = kKvHeads;
  o.ffn_hidden = kFfnHidden;
  o.vocab = kVocab;
  o.seq_len = kSeqLen;
  o.micro_batch = kMicroBatch;
  o.steps = 3;
  o.warmup_steps = 1;
  o.threads = 1;
  o.comm_timeout = absl::Seconds(60);
  o.sharding.strategy = p.strategy == proto::NO_SHARD ? Strategy::kNoShard : Strategy::kFullShard;
  o.sharding.precision = PrecisionPolicyOf(p.precision);
  absl::StatusOr<ActivationCheckpointing> checkpointing =
      ParseActivationCheckpointing(p.checkpointing, kLayers);
  EXPECT_TRUE(checkpointing.ok()) << checkpointing.status();
  if (checkpointing.ok()) o.activation_checkpointing = *checkpointing;
  o.attention = p.flash ? Attention::kFlash : Attention::kStandard;
  o.tie_embeddings = p.tied;
  if (p.exact) {  // as --exact sets it
    o.sharding.precision.reduction = ReductionKind::kExact;
    o.sharding.precision.reduce_dtype = comm::Dtype::kInt64;
  }
  return o;
}

// Each rank's measurement, ranks as threads.
std::vector<RankMeasurement> MeasureRanks(const TrainOptions& options) {
  auto comms = fsdp_test::MakeThreadCommunicators(options.nproc);
  std::vector<RankMeasurement> measurements(options.nproc);
  std::vector<std::thread> threads;
  for (int r = 0; r < options.nproc; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<RankMeasurement> m = MeasureTrainingMemory(options, *comms[r]);
      ASSERT_TRUE(m.ok()) << "rank " << r << ": " << m.status();
      measurements[r] = *m;
    });
  }
  for (std::thread& t : threads) t.join();
  return measurements;
}

TEST(LlamaMeasuredMemoryTest, EveryCategoryEqualsItsPredictionToTheByte) {
  std::vector<Point> points;
  for (Precision precision : {Precision::kFp32, Precision::kMixed, Precision::kBf16}) {
    for (proto::ShardingStrategy strategy : {proto::NO_SHARD, proto::FULL_SHARD}) {
      for (int ranks : {1, 2}) {
        for (const char* checkpointing : {"none", "all"}) {
          points.push_back({precision, strategy, ranks, checkpointing, false});
        }
      }
    }
  }
  points.push_back({Precision::kFp32, proto::FULL_SHARD, 2, "every:2", true});
  points.push_back({Precision::kMixed, proto::FULL_SHARD, 2, "all", true});
  // The tied head's copies of the embedding's weight and gradient.
  points.push_back({Precision::kFp32, proto::FULL_SHARD, 2, "none", false, true});
  points.push_back({Precision::kBf16, proto::NO_SHARD, 1, "all", false, true});
  // The exact mode's int64 gradient sums and fp32 scratch.
  points.push_back({Precision::kFp32, proto::FULL_SHARD, 2, "none", false, false, true});
  points.push_back({Precision::kMixed, proto::NO_SHARD, 1, "all", true, false, true});

  int exact = 0;
  for (const Point& p : points) {
    SCOPED_TRACE(Name(p));
    absl::StatusOr<RankMemoryEstimate> predicted = EstimateRankMemory(PredictedPoint(p));
    ASSERT_TRUE(predicted.ok()) << predicted.status();
    const std::vector<RankMeasurement> ranks = MeasureRanks(TrainingOptions(p));
    bool all_equal = true;
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
      for (int c = 0; c < kNumMemoryCategories; ++c) {
        const MemoryCategory category = static_cast<MemoryCategory>(c);
        EXPECT_EQ(ranks[r].peak(category), predicted->tracker_bytes(category))
            << "rank " << r << " " << MemoryCategoryName(category);
        all_equal = all_equal && ranks[r].peak(category) == predicted->tracker_bytes(category);
      }
      EXPECT_EQ(ranks[r].peak_total_bytes, predicted->total_bytes()) << "rank " << r;
      all_equal = all_equal && ranks[r].peak_total_bytes == predicted->total_bytes();
    }
    exact += all_equal ? 1 : 0;
  }
  // The count the closing note quotes.
  std::printf(
      "llama: %d of %zu measured points equal their prediction to the byte, in the "
      "total and every category\n",
      exact, points.size());
}

}  // namespace
}  // namespace report
}  // namespace fsdp
