// File: tests/comm/communicator_test.cc
//
// Communicator behaviour beyond single collectives: several in flight,
// sub-communicators (parity, node blocks, reversed keys, nested), timeouts
// naming the awaited peer, dead peers, argument errors, world size 1.
#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "comm/communicator.h"
#include "comm/direct_reduce_scatter.h"
#include "comm/loopback_transport.h"
#include "gtest/gtest.h"
#include "tests/comm/loopback_ranks.h"
#include "tests/comm/test_values.h"

namespace comm {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(60);

std::vector<float> Floats(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = ExactValue(rank, i);
  return v;
}

float SumOver(const std::vector<int>& ranks, size_t i) {
  float sum = 0;
  for (int r : ranks) sum += ExactValue(r, i);
  return sum;
}

absl::Status AllReduceFloats(Communicator& comm, std::vector<float>& values,
                             Algorithm algorithm = Algorithm::kAuto) {
  AllReduceOptions options;
  options.buffer = AsBytes(absl::MakeSpan(values));
  options.algorithm = algorithm;
  auto work = comm.AllReduce(options);
  if (!work.ok()) return work.status();
  return (*work)->Wait(kTimeout);
}

TEST(CommunicatorTest, SeveralCollectivesInFlightWithShuffledTiming) {
  const int n = 4;
  const size_t count = 10007;
  CommunicatorOptions options;
  options.max_segment_bytes = 2048;
  options.small_message_bytes = 1024;
  LoopbackOptions loopback;
  loopback.max_delay = absl::Microseconds(100);
  loopback.eager_bytes = 512;
  std::vector<int> everyone = {0, 1, 2, 3};
  RunOnRanks(n, [&](int rank, Communicator& comm) {
    std::vector<float> ring = Floats(rank, count), latency = Floats(rank, 33);
    std::vector<float> gathered(4 * 100), scattered((count + n - 1) / n);
    std::vector<float> shard = Floats(rank, 100), input = Floats(rank, count);
    std::vector<float> broadcast = rank == 2 ? Floats(2, 5000) : std::vector<float>(5000, -1);
    std::vector<WorkHandle> works;
    auto post = [&](absl::StatusOr<WorkHandle> work) {
      ASSERT_TRUE(work.ok()) << work.status();
      works.push_back(*work);
    };
    AllReduceOptions ar;
    ar.buffer = AsBytes(absl::MakeSpan(ring));
    post(comm.AllReduce(ar));  // kAuto: ring (40 KB > 1 KB)
    AllGatherOptions ag;
    ag.input = AsConstBytes(absl::MakeConstSpan(shard));
    ag.output = AsBytes(absl::MakeSpan(gathered));
    ag.algorithm = Algorithm::kLatency;
    post(comm.AllGather(ag));
    ReduceScatterOptions rs;
    rs.input = AsConstBytes(absl::MakeConstSpan(input));
    rs.output = AsBytes(absl::MakeSpan(scattered));
    post(comm.ReduceScatter(rs));
    BroadcastOptions bc;
    bc.buffer = AsBytes(absl::MakeSpan(broadcast));
    bc.root = 2;
    post(comm.Broadcast(bc));
    post(comm.Barrier());
    AllReduceOptions small;
    small.buffer = AsBytes(absl::MakeSpan(latency));
    post(comm.AllReduce(small));  // kAuto: recursive doubling
    // Wait in reverse order; poll one of them with Test().
    for (size_t i = works.size(); i-- > 1;) {
      ASSERT_TRUE(works[i]->Wait(kTimeout).ok()) << "work " << i;
    }
    absl::Time give_up = absl::Now() + kTimeout;
    while (!works[0]->Test()) ASSERT_LT(absl::Now(), give_up);
    ASSERT_TRUE(works[0]->Wait(absl::ZeroDuration()).ok());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(ring[i], SumOver(everyone, i)) << i;
    for (size_t i = 0; i < 33; ++i) ASSERT_EQ(latency[i], SumOver(everyone, i)) << i;
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < 100; ++i) ASSERT_EQ(gathered[r * 100 + i], ExactValue(r, i));
    }
    size_t per = (count + n - 1) / n;
    for (size_t i = rank * per; i < std::min(count, (rank + 1) * per); ++i) {
      ASSERT_EQ(scattered[i - rank * per], SumOver(everyone, i)) << i;
    }
    EXPECT_EQ(broadcast, Floats(2, 5000));
  }, options, loopback);
}

// A seeded random mix of collectives (same sequence on every rank), up to 4
// in flight, random sizes, dtypes and algorithms, messages held back at
// random: shakes out ordering and matching bugs.
TEST(CommunicatorTest, RandomMixOfCollectivesUnderPerturbation) {
  for (int n : {3, 5}) {
    CommunicatorOptions options;
    options.max_segment_bytes = 1000;  // odd size: segments cut mid-chunk
    options.small_message_bytes = 3000;
    LoopbackOptions loopback;
    loopback.max_delay = absl::Microseconds(50);
    loopback.eager_bytes = 700;
    RunOnRanks(n, [&](int rank, Communicator& comm) {
      std::mt19937 plan(42);  // identical on every rank
      struct Pending {
        WorkHandle work;
        std::function<void()> check;
      };
      std::deque<Pending> pending;
      std::vector<int> everyone(n);
      for (int r = 0; r < n; ++r) everyone[r] = r;
      for (int i = 0; i < 60; ++i) {
        const int kind = plan() % 4;
        const size_t count = plan() % 3000;
        const Dtype dtype = plan() % 2 ? Dtype::kFloat32 : Dtype::kBFloat16;
        const Algorithm algorithm =
            std::array<Algorithm, 4>{Algorithm::kAuto, Algorithm::kRing, Algorithm::kLatency,
                                     Algorithm::kDirect}[plan() % 4];
        const int root = static_cast<int>(plan() % n);
        auto input = std::make_shared<std::vector<std::byte>>(Bytes(count, dtype));
        for (size_t j = 0; j < count; ++j) SetElement(dtype, *input, j, ExactValue(rank + i, j));
        auto expect_sum = [=](size_t j) {
          float sum = 0;
          for (int r = 0; r < n; ++r) sum += ExactValue(r + i, j);
          return sum;
        };
        absl::StatusOr<WorkHandle> work;
        std::function<void()> check;
        if (kind == 0) {
          AllReduceOptions o;
          o.buffer = absl::MakeSpan(*input);
          o.dtype = dtype;
          o.algorithm = algorithm;
          work = comm.AllReduce(o);
          check = [=] {
            for (size_t j = 0; j < count; ++j) {
              ASSERT_EQ(GetElement(dtype, *input, j), expect_sum(j)) << "op " << i << " j " << j;
            }
          };
        } else if (kind == 1) {
          size_t begin, end;
          ReferenceChunk(count, n, rank, &begin, &end);
          auto output = std::make_shared<std::vector<std::byte>>(Bytes(end - begin, dtype));
          ReduceScatterOptions o;
          o.input = absl::MakeConstSpan(*input);
          o.output = absl::MakeSpan(*output);
          o.dtype = dtype;
          o.algorithm = algorithm;
          work = comm.ReduceScatter(o);
          check = [=] {
            for (size_t j = begin; j < end; ++j) {
              ASSERT_EQ(GetElement(dtype, *output, j - begin), expect_sum(j)) << "op " << i;
            }
            (void)input;  // keeps the input alive while the collective runs
          };
        } else if (kind == 2) {
          auto output = std::make_shared<std::vector<std::byte>>(Bytes(count * n, dtype));
          AllGatherOptions o;
          o.input = absl::MakeConstSpan(*input);
          o.output = absl::MakeSpan(*output);
          o.algorithm = algorithm;
          work = comm.AllGather(o);
          check = [=] {
            for (int r = 0; r < n; ++r) {
              for (size_t j = 0; j < count; ++j) {
                ASSERT_EQ(GetElement(dtype, *output, r * count + j), ExactValue(r + i, j))
                    << "op " << i;
              }
            }
            (void)input;  // keeps the input alive while the collective runs
          };
        } else {
          if (rank != root) {
            for (size_t j = 0; j < count; ++j) SetElement(dtype, *input, j, 99.0f);
          }
          BroadcastOptions o;
          o.buffer = absl::MakeSpan(*input);
          o.root = root;
          work = comm.Broadcast(o);
          check = [=] {
            for (size_t j = 0; j < count; ++j) {
              ASSERT_EQ(GetElement(dtype, *input, j), ExactValue(root + i, j)) << "op " << i;
            }
          };
        }
        ASSERT_TRUE(work.ok()) << work.status();
        pending.push_back({*work, check});
        while (pending.size() > (plan() % 5)) {
          ASSERT_TRUE(pending.front().work->Wait(kTimeout).ok());
          pending.front().check();
          pending.pop_front();
        }
      }
      for (Pending& p : pending) {
        ASSERT_TRUE(p.work->Wait(kTimeout).ok());
        p.check();
      }
    }, options, loopback);
  }
}

TEST(CommunicatorTest, SplitByParity) {
  RunOnRanks(8, [&](int rank, Communicator& world) {
    auto half = world.Split(rank % 2, rank);
    ASSERT_TRUE(half.ok()) << half.status();
    EXPECT_EQ((*half)->size(), 4);
    EXPECT_EQ((*half)->rank(), rank / 2);
    std::vector<int> members;
    for (int r = rank % 2; r < 8; r += 2) members.push_back(r);
    for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kLatency, Algorithm::kDirect}) {
      std::vector<float> values = Floats(rank, 1000);
      ASSERT_TRUE(AllReduceFloats(**half, values, algorithm).ok());
      for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], SumOver(members, i));
    }
    // The parent still works after the split.
    std::vector<float> values = Floats(rank, 10);
    ASSERT_TRUE(AllReduceFloats(world, values).ok());
    EXPECT_EQ(values[3], SumOver({0, 1, 2, 3, 4, 5, 6, 7}, 3));
  });
}

// Hybrid layout: shard within a "node" of 4 ranks, replicate across nodes;
// collectives on both children in flight at the same time.
TEST(CommunicatorTest, SplitByBlocksForHybridLayouts) {
  RunOnRanks(8, [&](int rank, Communicator& world) {
    auto node = world.Split(rank / 4, rank);
    ASSERT_TRUE(node.ok()) << node.status();
    auto replicas = world.Split(rank % 4, rank);
    ASSERT_TRUE(replicas.ok()) << replicas.status();
    EXPECT_EQ((*node)->rank(), rank % 4);
    EXPECT_EQ((*replicas)->rank(), rank / 4);
    EXPECT_EQ((*replicas)->size(), 2);
    std::vector<float> shard = Floats(rank, 64), full(4 * 64);
    AllGatherOptions ag;
    ag.input = AsConstBytes(absl::MakeConstSpan(shard));
    ag.output = AsBytes(absl::MakeSpan(full));
    ag.algorithm = Algorithm::kRing;
    auto gathered = (*node)->AllGather(ag);
    std::vector<float> grads = Floats(rank, 3000);
    AllReduceOptions ar;
    ar.buffer = AsBytes(absl::MakeSpan(grads));
    auto reduced = (*replicas)->AllReduce(ar);
    ASSERT_TRUE(gathered.ok() && reduced.ok());
    ASSERT_TRUE((*reduced)->Wait(kTimeout).ok());
    ASSERT_TRUE((*gathered)->Wait(kTimeout).ok());
    const int node_base = rank / 4 * 4;
    for (int r = 0; r < 4; ++r) {
      for (size_t i = 0; i < 64; ++i) ASSERT_EQ(full[r * 64 + i], ExactValue(node_base + r, i));
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      ASSERT_EQ(grads[i], SumOver({rank % 4, rank % 4 + 4}, i));
    }
  });
}

// Two "hosts" of two ranks (LoopbackOptions::host_of_rank): the world spans
// both, a split by host lies on one, a split across them does not; and the
// reduce-scatter is right either way (kAuto takes the ring across hosts,
// the direct one within a host: comm/algorithm_choice.h).
TEST(CommunicatorTest, OnOneHostFollowsTheTransportsHosts) {
  LoopbackOptions two_hosts;
  two_hosts.host_of_rank = {0, 0, 1, 1};
  RunOnRanks(
      4,
      [&](int rank, Communicator& world) {
        EXPECT_FALSE(world.on_one_host());
        auto host = world.Split(rank / 2, rank);
        ASSERT_TRUE(host.ok()) << host.status();
        EXPECT_TRUE((*host)->on_one_host());
        auto across = world.Split(rank % 2, rank);
        ASSERT_TRUE(across.ok()) << across.status();
        EXPECT_FALSE((*across)->on_one_host());
        for (Communicator* group : {&world, host->get(), across->get()}) {
          const int n = group->size();
          std::vector<float> input = Floats(rank, n * 40000), output(40000);
          ReduceScatterOptions rs;
          rs.input = AsConstBytes(absl::MakeConstSpan(input));
          rs.output = AsBytes(absl::MakeSpan(output));
          auto work = group->ReduceScatter(rs);
          ASSERT_TRUE(work.ok()) << work.status();
          ASSERT_TRUE((*work)->Wait(kTimeout).ok());
          std::vector<int> members;
          for (int r = 0; r < 4; ++r) {
            if ((group == host->get() && r / 2 == rank / 2) ||
                (group == across->get() && r % 2 == rank % 2) || group == &world) {
              members.push_back(r);
            }
          }
          for (size_t i = 0; i < output.size(); ++i) {
            ASSERT_EQ(output[i], SumOver(members, group->rank() * 40000 + i));
          }
        }
      },
      {}, two_hosts);
  RunOnRanks(3, [&](int, Communicator& world) { EXPECT_TRUE(world.on_one_host()); });
}

TEST(CommunicatorTest, SplitOrdersByKeyAndNests) {
  RunOnRanks(6, [&](int rank, Communicator& world) {
    auto reversed = world.Split(0, -rank);
    ASSERT_TRUE(reversed.ok());
    EXPECT_EQ((*reversed)->rank(), 5 - rank);
    // Broadcast from child rank 0, which is global rank 5.
    std::vector<float> values = rank == 5 ? Floats(5, 100) : std::vector<float>(100, 0);
    BroadcastOptions bc;
    bc.buffer = AsBytes(absl::MakeSpan(values));
    auto work = (*reversed)->Broadcast(bc);
    ASSERT_TRUE(work.ok());
    ASSERT_TRUE((*work)->Wait(kTimeout).ok());
    EXPECT_EQ(values, Floats(5, 100));
    // A split of the split: pairs {5,4}, {3,2}, {1,0} in child numbering.
    auto pairs = (*reversed)->Split((*reversed)->rank() / 2, 0);
    ASSERT_TRUE(pairs.ok());
    EXPECT_EQ((*pairs)->size(), 2);
    std::vector<float> sums = Floats(rank, 50);
    ASSERT_TRUE(AllReduceFloats(**pairs, sums).ok());
    int partner = rank ^ 1;
    for (size_t i = 0; i < 50; ++i) ASSERT_EQ(sums[i], SumOver({rank, partner}, i));
    ASSERT_TRUE((*(*pairs)->Barrier())->Wait(kTimeout).ok());
  });
}

TEST(CommunicatorTest, TimeoutNamesTheAwaitedPeerAndTheCollectiveStaysInFlight) {
  absl::Notification timed_out;
  RunOnRanks(2, [&](int rank, Communicator& comm) {
    std::vector<float> values = Floats(rank, 100);
    AllReduceOptions options;
    options.buffer = AsBytes(absl::MakeSpan(values));
    if (rank == 1) timed_out.WaitForNotification();  // rank 1 posts late
    auto work = comm.AllReduce(options);
    ASSERT_TRUE(work.ok());
    if (rank == 0) {
      absl::Status status = (*work)->Wait(absl::Milliseconds(100));
      EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
      EXPECT_NE(status.message().find("rank 0: all_reduce #0"), std::string::npos) << status;
      EXPECT_NE(status.message().find("waited 1"), std::string::npos) << status;
      EXPECT_NE(status.message().find("for rank 1 ("), std::string::npos) << status;
      timed_out.Notify();
    }
    ASSERT_TRUE((*work)->Wait(kTimeout).ok());
    for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], SumOver({0, 1}, i));
  });
}

TEST(CommunicatorTest, DeadPeerFailsCollectivesWithUnavailableNamingIt) {
  for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kDirect}) {
    LoopbackHub hub(3);
    RunOnRanks(3, [&](int rank, Communicator& comm) {
      if (rank == 2) {
        hub.KillRank(2);
        return;
      }
      std::vector<float> values = Floats(rank, 5000);
      AllReduceOptions options;
      options.buffer = AsBytes(absl::MakeSpan(values));
      options.algorithm = algorithm;
      auto work = comm.AllReduce(options);
      ASSERT_TRUE(work.ok());
      absl::Status status = (*work)->Wait(kTimeout);
      EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
      EXPECT_NE(status.message().find("rank 2"), std::string::npos) << status;
    }, {}, {}, &hub);
  }
}

// An out-of-place fp32 output of at least kStreamOutputMinBytes is written
// with non-temporal stores; the result must not change (3 ranks: uneven
// ceil-split chunks, one short).
TEST(CommunicatorTest, LargeDirectReduceScatterWithStreamedOutput) {
  const size_t count = 3 * (size_t{3} << 20) / 2 + 5;  // ~6 MiB chunks
  RunOnRanks(3, [&](int rank, Communicator& comm) {
    const size_t chunk = (count + 2) / 3;
    const size_t begin = rank * chunk;
    const size_t mine = std::min(count, begin + chunk) - begin;
    ASSERT_GE(mine * sizeof(float), kStreamOutputMinBytes);
    std::vector<float> input = Floats(rank, count);
    std::vector<float> output(mine);
    ReduceScatterOptions options;
    options.input = AsConstBytes(absl::MakeConstSpan(input));
    options.output = AsBytes(absl::MakeSpan(output));
    options.algorithm = Algorithm::kDirect;
    options.op = ReduceOp::kAverage;
    auto work = comm.ReduceScatter(options);
    ASSERT_TRUE(work.ok());
    ASSERT_TRUE((*work)->Wait(kTimeout).ok());
    size_t wrong = 0;
    for (size_t i = 0; i < mine; ++i) {
      // The ring's tree for chunk `rank`, average on the last hop.
      const float a = ExactValue((rank + 1) % 3, begin + i);
      const float b = ExactValue((rank + 2) % 3, begin + i);
      const float own = ExactValue(rank, begin + i);
      wrong += output[i] != ((a + b) + own) / 3.0f;
    }
    EXPECT_EQ(wrong, 0u) << "rank " << rank;
  });
}

// The direct reduce-scatter waits on several peers at once: a timeout names
// the one that has not sent, and the segment.
TEST(CommunicatorTest, DirectReduceScatterTimeoutNamesTheLatePeer) {
  absl::Notification timed_out;
  RunOnRanks(3, [&](int rank, Communicator& comm) {
    std::vector<float> input = Floats(rank, 3000);
    std::vector<float> output(1000);
    ReduceScatterOptions options;
    options.input = AsConstBytes(absl::MakeConstSpan(input));
    options.output = AsBytes(absl::MakeSpan(output));
    options.algorithm = Algorithm::kDirect;
    if (rank == 2) timed_out.WaitForNotification();  // rank 2 posts late
    auto work = comm.ReduceScatter(options);
    ASSERT_TRUE(work.ok());
    if (rank == 0) {
      absl::Status status = (*work)->Wait(absl::Milliseconds(500));
      EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
      EXPECT_NE(status.message().find("for rank 2 (recv of segment 0 of chunk 0 from rank 2)"),
                std::string::npos)
          << status;
      timed_out.Notify();
    }
    ASSERT_TRUE((*work)->Wait(kTimeout).ok());
    for (size_t i = 0; i < output.size(); ++i) {
      ASSERT_EQ(output[i], SumOver({0, 1, 2}, rank * 1000 + i));
    }
  });
}

TEST(CommunicatorTest, ArgumentErrorsSayWhatIsWrong) {
  RunOnRanks(2, [&](int rank, Communicator& comm) {
    std::vector<float> small(3), big(10);
    AllGatherOptions ag;
    ag.input = AsConstBytes(absl::MakeConstSpan(small));
    ag.output = AsBytes(absl::MakeSpan(big));
    auto bad_gather = comm.AllGather(ag);
    EXPECT_EQ(bad_gather.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad_gather.status().message().find("output has 40 bytes"), std::string::npos)
        << bad_gather.status();

    std::vector<float> gathered(6);
    ag.input = AsConstBytes(absl::MakeConstSpan(gathered.data() + 1, 3));
    ag.output = AsBytes(absl::MakeSpan(gathered));
    EXPECT_EQ(comm.AllGather(ag).status().code(), absl::StatusCode::kInvalidArgument);

    ReduceScatterOptions rs;
    rs.input = AsConstBytes(absl::MakeConstSpan(big));
    rs.output = AsBytes(absl::MakeSpan(small));  // chunk is 5 elements
    auto bad_scatter = comm.ReduceScatter(rs);
    EXPECT_EQ(bad_scatter.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad_scatter.status().message().find("this rank's chunk is 5"), std::string::npos)
        << bad_scatter.status();

    std::vector<std::byte> odd(7);
    AllReduceOptions ar;
    ar.buffer = absl::MakeSpan(odd);
    ar.dtype = Dtype::kBFloat16;
    EXPECT_EQ(comm.AllReduce(ar).status().code(), absl::StatusCode::kInvalidArgument);

    BroadcastOptions bc;
    bc.buffer = AsBytes(absl::MakeSpan(big));
    bc.root = 2;
    auto bad_root = comm.Broadcast(bc);
    EXPECT_EQ(bad_root.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad_root.status().message().find("root 2"), std::string::npos);

    // Errors consume no sequence number: the ranks still agree afterwards.
    std::vector<float> values = Floats(rank, 20);
    ASSERT_TRUE(AllReduceFloats(comm, values).ok());
    EXPECT_EQ(values[7], SumOver({0, 1}, 7));
  });
}

TEST(CommunicatorTest, CreateOverTransportRejectsNull) {
  EXPECT_EQ(Communicator::CreateOverTransport(nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CommunicatorTest, WorldSizeOneNeedsNoMessages) {
  RunOnRanks(1, [&](int, Communicator& comm) {
    std::vector<float> values = {1.5f, -2.0f};
    AllReduceOptions ar;
    ar.buffer = AsBytes(absl::MakeSpan(values));
    ar.op = ReduceOp::kAverage;
    ASSERT_TRUE((*comm.AllReduce(ar))->Wait(absl::ZeroDuration()).ok());
    EXPECT_EQ(values, (std::vector<float>{1.5f, -2.0f}));
    std::vector<float> out(2);
    AllGatherOptions ag;
    ag.input = AsConstBytes(absl::MakeConstSpan(values));
    ag.output = AsBytes(absl::MakeSpan(out));
    ASSERT_TRUE((*comm.AllGather(ag))->Wait(absl::ZeroDuration()).ok());
    EXPECT_EQ(out, values);
    std::vector<float> scattered(2);
    ReduceScatterOptions rs;
    rs.input = AsConstBytes(absl::MakeConstSpan(values));
    rs.output = AsBytes(absl::MakeSpan(scattered));
    ASSERT_TRUE((*comm.ReduceScatter(rs))->Wait(absl::ZeroDuration()).ok());
    EXPECT_EQ(scattered, values);
    ASSERT_TRUE((*comm.Barrier())->Wait(absl::ZeroDuration()).ok());
    auto self = comm.Split(7, 0);
    ASSERT_TRUE(self.ok());
    EXPECT_EQ((*self)->size(), 1);
  });
}

TEST(CommunicatorTest, ManySmallAllReducesBackToBack) {
  // Exercises the engine's spin-then-block path on oversubscribed cores.
  RunOnRanks(4, [&](int rank, Communicator& comm) {
    for (int iteration = 0; iteration < 300; ++iteration) {
      std::vector<float> values = Floats(rank + iteration, 16);
      ASSERT_TRUE(AllReduceFloats(comm, values).ok());
      ASSERT_EQ(values[5], SumOver({iteration, iteration + 1, iteration + 2, iteration + 3}, 5));
    }
  });
}

}  // namespace
}  // namespace comm
