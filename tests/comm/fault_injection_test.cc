// File: tests/comm/fault_injection_test.cc
// FSDP_FAULTS's spec, and the fault-injecting transport over the loopback
// fake: delays keep every message and its order (and a collective's bits),
// a lost send leaves its receiver waiting to its deadline, Abort gives held
// sends back. Kills and stops need real processes:
// tests/integration/train/train_gpt_faults_test.
#include "comm/fault_injection.h"

#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "comm/communicator.h"
#include "comm/loopback_transport.h"
#include "gtest/gtest.h"

namespace comm {
namespace {

FaultPlan Parse(const char* spec) {
  absl::StatusOr<FaultPlan> plan = ParseFaultPlan(spec);
  EXPECT_TRUE(plan.ok()) << spec << ": " << plan.status();
  return plan.ok() ? *plan : FaultPlan{};
}

TEST(FaultPlanTest, ParsesEveryKey) {
  const FaultPlan plan = Parse(
      "seed=9,delay=0.25:2-30ms,drop=0.01,drop_rank=1,kill=any@random:10-20,stop=2@7,"
      "attempt=any");
  EXPECT_EQ(plan.seed, 9u);
  EXPECT_EQ(plan.delay_probability, 0.25);
  EXPECT_EQ(plan.min_delay, absl::Milliseconds(2));
  EXPECT_EQ(plan.max_delay, absl::Milliseconds(30));
  EXPECT_EQ(plan.drop_probability, 0.01);
  EXPECT_EQ(plan.drop_rank, 1);
  ASSERT_EQ(plan.rank_faults.size(), 2u);
  EXPECT_EQ(plan.rank_faults[0].action, RankFaultAction::kKill);
  EXPECT_EQ(plan.rank_faults[0].rank, -1);
  EXPECT_EQ(plan.rank_faults[0].first_op, 10);
  EXPECT_EQ(plan.rank_faults[0].last_op, 20);
  EXPECT_EQ(plan.rank_faults[1].action, RankFaultAction::kStop);
  EXPECT_EQ(plan.rank_faults[1].rank, 2);
  EXPECT_EQ(plan.rank_faults[1].first_op, 7);
  EXPECT_EQ(plan.rank_faults[1].last_op, 7);
  EXPECT_EQ(plan.attempt, -1);
  EXPECT_TRUE(FaultsApply(plan, 3));
  EXPECT_FALSE(FaultsApply(Parse("seed=1"), 1));  // default: the first attempt only
  EXPECT_TRUE(FaultsApply(Parse("seed=1"), 0));
}

TEST(FaultPlanTest, BadSpecsNameThePartAndWhatIsExpected) {
  struct Case {
    const char* spec;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"", "leave the variable unset"},
           {"seed", "'seed': expected key=value"},
           {"speed=3", "'speed=3': unknown key"},
           {"drop=1.5", "probability from 0 to 1"},
           {"delay=0.1:5-2ms", "A <= B"},
           {"delay=0.1:5-20", "delay=P:A-Bms"},
           {"kill=1", "RANK@OPERATION"},
           {"kill=x@3", "RANK@OPERATION"},
           {"stop=1@0", "counted from 1"},
           {"kill=1@random:9-3", "A <= B"},
           {"attempt=-2", "'any'"},
       }) {
    absl::StatusOr<FaultPlan> plan = ParseFaultPlan(c.spec);
    ASSERT_FALSE(plan.ok()) << c.spec;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(plan.status().message(), c.says))
        << c.spec << ": " << plan.status();
    EXPECT_TRUE(absl::StrContains(plan.status().message(), kFaultsEnv)) << plan.status();
  }
}

TEST(FaultPlanTest, DrawnVictimsAreTheSameOnEveryRankAndWithinTheirRanges) {
  const FaultPlan plan = Parse("seed=5,kill=any@random:100-200,stop=any@random:1-1000");
  const std::vector<ResolvedRankFault> first = ResolveRankFaults(plan, 4);
  ASSERT_EQ(first.size(), 2u);
  for (int again = 0; again < 3; ++again) {
    const std::vector<ResolvedRankFault> next = ResolveRankFaults(plan, 4);
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(next[i].rank, first[i].rank);
      EXPECT_EQ(next[i].op, first[i].op);
    }
  }
  EXPECT_GE(first[0].op, 100);
  EXPECT_LE(first[0].op, 200);
  for (const ResolvedRankFault& fault : first) {
    EXPECT_GE(fault.rank, 0);
    EXPECT_LT(fault.rank, 4);
  }
  // Other seeds draw other victims somewhere.
  bool differs = false;
  for (uint64_t seed = 6; seed < 16 && !differs; ++seed) {
    FaultPlan other = plan;
    other.seed = seed;
    differs = ResolveRankFaults(other, 4)[0].op != first[0].op;
  }
  EXPECT_TRUE(differs);
}

TEST(FaultPlanTest, RefusesARankTheJobDoesNotHave) {
  LoopbackHub hub(2);
  absl::StatusOr<std::unique_ptr<Transport>> wrapped =
      WithInjectedFaults(hub.CreateTransport(0), Parse("kill=2@5"));
  ASSERT_FALSE(wrapped.ok());
  EXPECT_TRUE(absl::StrContains(wrapped.status().message(), "names rank 2, but the job has 2"))
      << wrapped.status();
}

std::unique_ptr<Transport> Wrapped(LoopbackHub& hub, int rank, const char* spec) {
  absl::StatusOr<std::unique_ptr<Transport>> wrapped =
      WithInjectedFaults(hub.CreateTransport(rank), Parse(spec));
  EXPECT_TRUE(wrapped.ok()) << wrapped.status();
  return wrapped.ok() ? std::move(*wrapped) : nullptr;
}

// Drives `t` until every completion is done or `limit` passes; whether all are.
bool Drive(Transport& t, const std::vector<Completion*>& completions, absl::Duration limit) {
  const absl::Time give_up = absl::Now() + limit;
  while (absl::Now() < give_up) {
    bool all = true;
    for (const Completion* c : completions) all = all && c->done;
    if (all) return true;
    if (!t.Progress()) (void)t.BlockUntilActivity(absl::Milliseconds(5));
  }
  return false;
}

TEST(FaultInjectingTransportTest, DelayedSendsArriveWholeAndInOrder) {
  LoopbackHub hub(2);
  std::unique_ptr<Transport> sender = Wrapped(hub, 0, "seed=3,delay=0.5:0-8ms");
  std::unique_ptr<Transport> receiver = Wrapped(hub, 1, "seed=3,delay=0.5:0-8ms");
  constexpr int kMessages = 40;
  std::vector<std::vector<int>> out(kMessages), in(kMessages, std::vector<int>(16, -1));
  std::vector<Completion> sent(kMessages), received(kMessages);
  std::vector<Completion*> sends, receives;
  for (int i = 0; i < kMessages; ++i) {
    out[i].assign(16, i);
    // Two tags interleaved: order must hold within each.
    ASSERT_TRUE(sender->PostSend(1, 7 + i % 2, out[i].data(), 64, &sent[i]).ok());
    sends.push_back(&sent[i]);
  }
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(receiver->PostRecv(0, 7 + i % 2, in[i].data(), 64, &received[i]).ok());
    receives.push_back(&received[i]);
  }
  bool sends_done = false;
  std::thread drive_sender([&] { sends_done = Drive(*sender, sends, absl::Seconds(20)); });
  ASSERT_TRUE(Drive(*receiver, receives, absl::Seconds(20)));
  drive_sender.join();
  ASSERT_TRUE(sends_done);
  for (int i = 0; i < kMessages; ++i) {
    EXPECT_TRUE(received[i].status.ok()) << received[i].status;
    EXPECT_EQ(in[i], out[i]) << "message " << i;
  }
}

// A 4-rank all-reduce of floats with half the sends held back gives the
// bits of one without: timing is not data.
std::vector<std::vector<float>> AllReduceOnRanks(const char* spec) {
  constexpr int kRanks = 4;
  LoopbackHub hub(kRanks);
  std::vector<std::vector<float>> values(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    std::mt19937 rng(r + 1);
    std::uniform_real_distribution<float> draw(-1, 1);
    for (int i = 0; i < 4099; ++i) values[r].push_back(draw(rng));
  }
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Transport> transport =
          spec == nullptr ? hub.CreateTransport(r) : Wrapped(hub, r, spec);
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          Communicator::CreateOverTransport(transport.get());
      ASSERT_TRUE(comm.ok()) << comm.status();
      for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kLatency}) {
        AllReduceOptions options;
        options.buffer = AsBytes(absl::MakeSpan(values[r]));
        options.algorithm = algorithm;
        absl::StatusOr<WorkHandle> work = (*comm)->AllReduce(options);
        ASSERT_TRUE(work.ok()) << work.status();
        ASSERT_TRUE((*work)->Wait(absl::Seconds(60)).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return values;
}

TEST(FaultInjectingTransportTest, DelaysDoNotChangeACollectivesBits) {
  const std::vector<std::vector<float>> clean = AllReduceOnRanks(nullptr);
  const std::vector<std::vector<float>> delayed = AllReduceOnRanks("seed=11,delay=0.5:0-3ms");
  ASSERT_EQ(clean.size(), delayed.size());
  for (size_t r = 0; r < clean.size(); ++r) {
    ASSERT_EQ(clean[r].size(), delayed[r].size());
    EXPECT_EQ(std::memcmp(clean[r].data(), delayed[r].data(), clean[r].size() * sizeof(float)), 0)
        << "rank " << r;
  }
}

TEST(FaultInjectingTransportTest, ALostSendCompletesForItsSenderAndNeverArrives) {
  LoopbackHub hub(2);
  std::unique_ptr<Transport> sender = Wrapped(hub, 0, "drop=1,drop_rank=0");
  std::unique_ptr<Transport> receiver = Wrapped(hub, 1, "drop=1,drop_rank=0");
  int out = 42, in = -1;
  Completion sent, received;
  ASSERT_TRUE(sender->PostSend(1, 3, &out, sizeof(out), &sent).ok());
  ASSERT_TRUE(receiver->PostRecv(0, 3, &in, sizeof(in), &received).ok());
  ASSERT_TRUE(Drive(*sender, {&sent}, absl::Seconds(5)));
  EXPECT_TRUE(sent.status.ok());
  EXPECT_FALSE(Drive(*receiver, {&received}, absl::Milliseconds(200)));
  EXPECT_EQ(in, -1);
  // Rank 1's own sends are not dropped (drop_rank=0).
  Completion back_sent, back_received;
  ASSERT_TRUE(receiver->PostSend(0, 4, &out, sizeof(out), &back_sent).ok());
  ASSERT_TRUE(sender->PostRecv(1, 4, &in, sizeof(in), &back_received).ok());
  std::thread drive([&] { Drive(*receiver, {&back_sent}, absl::Seconds(5)); });
  EXPECT_TRUE(Drive(*sender, {&back_received}, absl::Seconds(5)));
  drive.join();
  EXPECT_EQ(in, 42);
}

TEST(FaultInjectingTransportTest, AbortGivesHeldSendsBackWithItsStatus) {
  LoopbackHub hub(2);
  std::unique_ptr<Transport> sender = Wrapped(hub, 0, "delay=1:10000-10000ms");
  int out = 1;
  Completion sent;
  ASSERT_TRUE(sender->PostSend(1, 3, &out, sizeof(out), &sent).ok());
  EXPECT_FALSE(sent.done);
  sender->Abort(absl::UnavailableError("rank 1 died"));
  EXPECT_TRUE(sent.done);
  EXPECT_EQ(sent.status.code(), absl::StatusCode::kUnavailable);
  Completion later;
  EXPECT_FALSE(sender->PostSend(1, 3, &out, sizeof(out), &later).ok());
}

}  // namespace
}  // namespace comm
