// File: tests/fsdp/memory/memory_tracker_test.cc
#include "fsdp/memory/memory_tracker.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace fsdp {
namespace {

constexpr MemoryCategory kAct = MemoryCategory::kActivations;
constexpr MemoryCategory kParams = MemoryCategory::kParameters;

TEST(MemoryTrackerTest, CountsCurrentAndPeakPerCategoryAndTotal) {
  MemoryTracker tracker;
  {
    absl::StatusOr<FloatBuffer> a = tracker.Allocate<float>(kAct, 100, "a");
    ASSERT_TRUE(a.ok()) << a.status();
    absl::StatusOr<FloatBuffer> p = tracker.Allocate<float>(kParams, 10, "p");
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(a->size(), 100);
    for (float x : a->span()) EXPECT_EQ(x, 0.0f);  // zero-initialized
    MemorySnapshot s = tracker.Snapshot();
    EXPECT_EQ(s.current(kAct), 400);
    EXPECT_EQ(s.current(kParams), 40);
    EXPECT_EQ(s.current_total_bytes, 440);
    a->Reset();
    absl::StatusOr<TrackedBuffer<int32_t>> small = tracker.Allocate<int32_t>(kAct, 5, "s");
    ASSERT_TRUE(small.ok());
    s = tracker.Snapshot();
    EXPECT_EQ(s.current(kAct), 20);
    EXPECT_EQ(s.peak(kAct), 400);
    EXPECT_EQ(s.peak_total_bytes, 440);  // the peak of the sum
  }
  MemorySnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.current_total_bytes, 0);
  for (int c = 0; c < kNumMemoryCategories; ++c) EXPECT_EQ(s.current_bytes[c], 0);
  EXPECT_EQ(s.peak(kParams), 40);
  tracker.ResetPeaks();
  EXPECT_EQ(tracker.Snapshot().peak_total_bytes, 0);
}

TEST(MemoryTrackerTest, MoveTransfersOwnershipWithoutDoubleCounting) {
  MemoryTracker tracker;
  absl::StatusOr<FloatBuffer> a = tracker.Allocate<float>(kAct, 8, "a");
  ASSERT_TRUE(a.ok());
  FloatBuffer b = std::move(*a);
  absl::StatusOr<FloatBuffer> default_float = tracker.Allocate(kAct, 2, "float by default");
  ASSERT_TRUE(default_float.ok());
  default_float->Reset();
  EXPECT_EQ(a->size(), 0);
  EXPECT_EQ(b.size(), 8);
  FloatBuffer c;
  c = std::move(b);
  EXPECT_EQ(tracker.Snapshot().current(kAct), 32);
  c = FloatBuffer();
  EXPECT_EQ(tracker.Snapshot().current(kAct), 0);
}

TEST(MemoryTrackerTest, BudgetRejectsWithAMessageNamingEverything) {
  MemoryTracker tracker(/*budget_bytes=*/1000);
  absl::StatusOr<FloatBuffer> p = tracker.Allocate<float>(kParams, 200, "weights");
  ASSERT_TRUE(p.ok());
  absl::StatusOr<FloatBuffer> too_big = tracker.Allocate<float>(kAct, 51, "block0 qkv");
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(too_big.status().message());
  EXPECT_NE(message.find("activations"), std::string::npos) << message;
  EXPECT_NE(message.find("block0 qkv"), std::string::npos) << message;
  EXPECT_NE(message.find("204 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("1000 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("parameters 800 B"), std::string::npos) << message;
  // A failed allocation changes nothing; one that fits exactly succeeds.
  EXPECT_EQ(tracker.Snapshot().current_total_bytes, 800);
  EXPECT_TRUE(tracker.Allocate<float>(kAct, 50, "fits").ok());
}

TEST(MemoryTrackerTest, ReserveAndReleaseCountForeignBytes) {
  MemoryTracker tracker(100);
  EXPECT_TRUE(tracker.Reserve(MemoryCategory::kCommBuffers, 60, "ucx").ok());
  EXPECT_EQ(tracker.Reserve(MemoryCategory::kCommBuffers, 60, "ucx2").code(),
            absl::StatusCode::kResourceExhausted);
  tracker.Release(MemoryCategory::kCommBuffers, 60);
  EXPECT_EQ(tracker.Snapshot().current_total_bytes, 0);
  EXPECT_EQ(tracker.Reserve(kAct, -1, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tracker.Allocate<float>(kAct, -1, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MemoryTrackerTest, ConcurrentAllocateAndFreeBalance) {
  MemoryTracker tracker;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tracker, t] {
      for (int i = 0; i < 500; ++i) {
        absl::StatusOr<FloatBuffer> b =
            tracker.Allocate<float>(static_cast<MemoryCategory>(t % 6), 16 + i % 7, "t");
        ASSERT_TRUE(b.ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const MemorySnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.current_total_bytes, 0);
  EXPECT_GT(s.peak_total_bytes, 0);
  EXPECT_LE(s.peak_total_bytes, 4 * 22 * 4);
}

TEST(MemoryTrackerTest, PeakRssGrowsWhenMemoryIsTouched) {
  absl::StatusOr<int64_t> before = PeakRssBytes();
  ASSERT_TRUE(before.ok()) << before.status();
  MemoryTracker tracker;
  constexpr int64_t kNumel = int64_t{16} << 20;  // 64 MiB of floats, zeroed (touched)
  absl::StatusOr<FloatBuffer> big = tracker.Allocate<float>(kAct, kNumel, "big");
  ASSERT_TRUE(big.ok());
  for (int64_t i = 0; i < kNumel; i += 1024) (*big)[i] = 1.0f;
  absl::StatusOr<int64_t> current = CurrentRssBytes();  // read before the peak:
  absl::StatusOr<int64_t> after = PeakRssBytes();       // RSS only grows meanwhile
  ASSERT_TRUE(current.ok()) << current.status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(*after, *current);
  EXPECT_GE(*after, *before + kNumel * 4 * 9 / 10);
}

TEST(MemoryTrackerTest, SnapshotToStringListsEveryCategory) {
  MemoryTracker tracker(1 << 20);
  const std::string text = tracker.Snapshot().ToString();
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    EXPECT_NE(text.find(MemoryCategoryName(static_cast<MemoryCategory>(c))), std::string::npos);
  }
  EXPECT_NE(text.find("budget 1.00 MiB"), std::string::npos) << text;
}

}  // namespace
}  // namespace fsdp

namespace fsdp {
namespace {

TEST(MemoryTrackerCache, FreedBlockIsReusedForTheSameSizeAndZeroed) {
  MemoryTracker tracker;
  void* first = nullptr;
  {
    absl::StatusOr<FloatBuffer> a = tracker.Allocate(MemoryCategory::kActivations, 1000, "a");
    ASSERT_TRUE(a.ok());
    first = a->data();
    for (int i = 0; i < 1000; ++i) (*a)[i] = 1.0f + i;
  }
  MemorySnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.current_total_bytes, 0);
  EXPECT_EQ(s.cached_bytes, 4032);  // 4000 rounded up to 64 bytes
  absl::StatusOr<FloatBuffer> b = tracker.Allocate(MemoryCategory::kActivations, 1000, "b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data(), first);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ((*b)[i], 0.0f) << i;
  s = tracker.Snapshot();
  EXPECT_EQ(s.cached_bytes, 0);
  EXPECT_EQ(s.fresh_allocations, 1);
  EXPECT_EQ(s.current(MemoryCategory::kActivations), 4000);
}

TEST(MemoryTrackerCache, TransferMemoryAndOrdinaryMemoryAreNotMixed) {
  MemoryTracker tracker;
  absl::StatusOr<FloatBuffer> act = tracker.Allocate(MemoryCategory::kActivations, 4096, "act");
  absl::StatusOr<FloatBuffer> keep = tracker.Allocate(MemoryCategory::kActivations, 4096, "keep");
  absl::StatusOr<FloatBuffer> grad = tracker.Allocate(MemoryCategory::kGradients, 4096, "grad");
  ASSERT_TRUE(act.ok() && keep.ok() && grad.ok());
  const void* act_block = act->data();
  const void* grad_block = grad->data();
  act->Reset();
  grad->Reset();
  // Gradients are transfer memory: the request takes the freed gradient's
  // block, not the activation's, although both have the same size.
  absl::StatusOr<FloatBuffer> grad2 = tracker.Allocate(MemoryCategory::kGradients, 4096, "g2");
  ASSERT_TRUE(grad2.ok());
  EXPECT_EQ(grad2->data(), grad_block);
  absl::StatusOr<FloatBuffer> act2 = tracker.Allocate(MemoryCategory::kWorkspace, 4096, "a2");
  ASSERT_TRUE(act2.ok());
  EXPECT_EQ(act2->data(), act_block);
  EXPECT_EQ(tracker.Snapshot().fresh_allocations, 3);
}

// In-use plus cached bytes never exceed the highest in-use total so far.
TEST(MemoryTrackerCache, CacheIsTrimmedToTheHighWaterMark) {
  MemoryTracker tracker;
  { ASSERT_TRUE(tracker.Allocate(MemoryCategory::kActivations, 1 << 20, "big").ok()); }
  EXPECT_EQ(tracker.Snapshot().cached_bytes, 4 << 20);
  // A different size misses the cache; holding both would exceed the peak.
  absl::StatusOr<FloatBuffer> other =
      tracker.Allocate(MemoryCategory::kActivations, (1 << 20) - 1024, "other");
  ASSERT_TRUE(other.ok());
  const MemorySnapshot s = tracker.Snapshot();
  EXPECT_LE(s.current_total_bytes + s.cached_bytes, int64_t{4} << 20);
  EXPECT_EQ(s.cached_bytes, 0);
}

// The budget counts bytes in use only, so cached blocks never refuse work.
TEST(MemoryTrackerCache, CachedBytesDoNotCountAgainstTheBudget) {
  MemoryTracker tracker(/*budget_bytes=*/8192);
  { ASSERT_TRUE(tracker.Allocate(MemoryCategory::kActivations, 2048, "a").ok()); }
  EXPECT_TRUE(tracker.Allocate(MemoryCategory::kWorkspace, 1024, "b").ok());
}

// One step as full_shard's backward has it: two blocks of one size are in use
// together, freed, then three of another size; the sizes peak at different
// moments, so keeping both in the cache takes more than the in-use peak.
void RunPhasedStep(MemoryTracker& tracker) {
  {
    absl::StatusOr<FloatBuffer> a = tracker.Allocate(kAct, 1 << 18, "activation a");
    absl::StatusOr<FloatBuffer> b = tracker.Allocate(kAct, 1 << 18, "activation b");
    ASSERT_TRUE(a.ok() && b.ok());
  }
  std::vector<FloatBuffer> grads;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<FloatBuffer> g = tracker.Allocate(kAct, 3 << 16, "gradient");
    ASSERT_TRUE(g.ok());
    grads.push_back(*std::move(g));
  }
}

TEST(MemoryTrackerCache, MarkedStepsReuseEverySizeTheyNeed) {
  MemoryTracker tracker;
  for (int step = 0; step < 3; ++step) {
    tracker.BeginStep();
    const int64_t fresh_before = tracker.Snapshot().fresh_allocations;
    RunPhasedStep(tracker);
    const MemorySnapshot s = tracker.Snapshot();
    EXPECT_EQ(s.fresh_allocations - fresh_before, step == 0 ? 5 : 0) << "step " << step;
    // Both sizes stay cached: 2 x 1 MiB + 3 x 0.75 MiB, above the 2.25 MiB peak.
    EXPECT_EQ(s.cached_bytes, (2 << 20) + 3 * (3 << 18)) << "step " << step;
    EXPECT_EQ(s.peak_total_bytes, 3 * (3 << 18));
  }
}

// Without marked steps the cache stays within the in-use peak, so the same
// step misses every time: what BeginStep exists to avoid.
TEST(MemoryTrackerCache, UnmarkedStepsKeepNoMoreThanThePeak) {
  MemoryTracker tracker;
  RunPhasedStep(tracker);
  const int64_t fresh_before = tracker.Snapshot().fresh_allocations;
  RunPhasedStep(tracker);
  const MemorySnapshot s = tracker.Snapshot();
  EXPECT_GT(s.fresh_allocations - fresh_before, 0);
  EXPECT_LE(s.current_total_bytes + s.cached_bytes, s.peak_total_bytes);
}

// A size no longer used is freed two step marks later (the step that used it
// and the one after keep it).
TEST(MemoryTrackerCache, ASizeTheLastTwoStepsDidNotUseIsFreed) {
  MemoryTracker tracker;
  tracker.BeginStep();
  { ASSERT_TRUE(tracker.Allocate(kAct, 1000, "once").ok()); }
  EXPECT_EQ(tracker.Snapshot().cached_bytes, 4032);
  tracker.BeginStep();
  EXPECT_EQ(tracker.Snapshot().cached_bytes, 4032);
  tracker.BeginStep();
  EXPECT_EQ(tracker.Snapshot().cached_bytes, 0);
  // A block still in use when a step begins is not the cache's to free, and
  // is kept once returned.
  absl::StatusOr<FloatBuffer> held = tracker.Allocate(kAct, 1000, "held");
  ASSERT_TRUE(held.ok());
  tracker.BeginStep();
  tracker.BeginStep();
  held->Reset();
  EXPECT_EQ(tracker.Snapshot().cached_bytes, 4032);
}

}  // namespace
}  // namespace fsdp
