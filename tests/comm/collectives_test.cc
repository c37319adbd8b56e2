// File: tests/comm/collectives_test.cc
//
// Every collective, every algorithm, over the loopback transport with N ranks
// as threads, against independent references:
// - a grid of world sizes {1, 2, 3, 4, 8} x counts {0, 1, 7, 4096, 1 Mi + 3}
//   x {fp32, bf16} x {ring, latency}, with integer-valued inputs whose sums
//   are exact in any order, 4 KiB segments (so big counts stream hundreds of
//   segments) and receiver-copied (rendezvous-like) loopback messages;
// - determinism: random inputs whose sums do depend on order, checked bit for
//   bit against the documented reduction trees, and all-reduce chunk r ==
//   reduce-scatter output for each algorithm.
#include <string>
#include <tuple>
#include <vector>

#include "base/bfloat16.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/comm/loopback_ranks.h"
#include "tests/comm/test_values.h"

namespace comm {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(120);

CommunicatorOptions GridOptions() {
  CommunicatorOptions options;
  options.max_segment_bytes = 4096;
  return options;
}

LoopbackOptions GridLoopback() {
  LoopbackOptions options;
  options.eager_bytes = 1024;
  return options;
}

using GridParam = std::tuple<int, size_t, Dtype, Algorithm>;

class CollectiveGridTest : public ::testing::TestWithParam<GridParam> {
 protected:
  int world() const { return std::get<0>(GetParam()); }
  size_t count() const { return std::get<1>(GetParam()); }
  Dtype dtype() const { return std::get<2>(GetParam()); }
  Algorithm algorithm() const { return std::get<3>(GetParam()); }

  // Σ_r ExactValue(r, i), exact in float.
  std::vector<float> ExactSums() const {
    std::vector<float> sums(count(), 0.0f);
    for (int r = 0; r < world(); ++r) {
      for (size_t i = 0; i < count(); ++i) sums[i] += ExactValue(r, i);
    }
    return sums;
  }
  std::vector<std::byte> ExactInput(int rank) const {
    std::vector<std::byte> bytes = Bytes(count(), dtype());
    for (size_t i = 0; i < count(); ++i) SetElement(dtype(), bytes, i, ExactValue(rank, i));
    return bytes;
  }
  // The expected reduction of element i, encoded in the dtype.
  float Expected(const std::vector<float>& sums, size_t i, ReduceOp op) const {
    float value = op == ReduceOp::kSum ? sums[i] : sums[i] / static_cast<float>(world());
    return dtype() == Dtype::kFloat32 ? value : base::FromBf16Bits(base::ToBf16Bits(value));
  }
};

TEST_P(CollectiveGridTest, AllReduceSumThenAverage) {
  const std::vector<float> sums = ExactSums();
  RunOnRanks(world(), [&](int rank, Communicator& comm) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      std::vector<std::byte> buffer = ExactInput(rank);
      AllReduceOptions options;
      options.buffer = absl::MakeSpan(buffer);
      options.dtype = dtype();
      options.op = op;
      options.algorithm = algorithm();
      auto work = comm.AllReduce(options);
      ASSERT_TRUE(work.ok()) << work.status();
      ASSERT_TRUE((*work)->Wait(kTimeout).ok());
      size_t mismatches = 0;
      for (size_t i = 0; i < count(); ++i) {
        if (GetElement(dtype(), buffer, i) != Expected(sums, i, op) && mismatches++ < 3) {
          ADD_FAILURE() << "rank " << rank << " element " << i << ": got "
                        << GetElement(dtype(), buffer, i) << ", want " << Expected(sums, i, op);
        }
      }
      EXPECT_EQ(mismatches, 0u) << "rank " << rank;
    }
  }, GridOptions(), GridLoopback());
}

TEST_P(CollectiveGridTest, ReduceScatterSumThenAverage) {
  const std::vector<float> sums = ExactSums();
  RunOnRanks(world(), [&](int rank, Communicator& comm) {
    size_t begin, end;
    ReferenceChunk(count(), world(), rank, &begin, &end);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      std::vector<std::byte> input = ExactInput(rank);
      std::vector<std::byte> output = Bytes(end - begin, dtype());
      ReduceScatterOptions options;
      options.input = absl::MakeConstSpan(input);
      options.output = absl::MakeSpan(output);
      options.dtype = dtype();
      options.op = op;
      options.algorithm = algorithm();
      auto work = comm.ReduceScatter(options);
      ASSERT_TRUE(work.ok()) << work.status();
      ASSERT_TRUE((*work)->Wait(kTimeout).ok());
      EXPECT_EQ(input, ExactInput(rank)) << "reduce-scatter modified its input";
      size_t mismatches = 0;
      for (size_t i = begin; i < end; ++i) {
        if (GetElement(dtype(), output, i - begin) != Expected(sums, i, op) &&
            mismatches++ < 3) {
          ADD_FAILURE() << "rank " << rank << " element " << i;
        }
      }
      EXPECT_EQ(mismatches, 0u) << "rank " << rank;
    }
  }, GridOptions(), GridLoopback());
}

TEST_P(CollectiveGridTest, AllGather) {
  const int n = world();
  const size_t per_rank = (count() + n - 1) / n;
  RunOnRanks(n, [&](int rank, Communicator& comm) {
    std::vector<std::byte> input = Bytes(per_rank, dtype());
    for (size_t i = 0; i < per_rank; ++i) SetElement(dtype(), input, i, ExactValue(rank, i));
    std::vector<std::byte> output = Bytes(per_rank * n, dtype());
    AllGatherOptions options;
    options.input = absl::MakeConstSpan(input);
    options.output = absl::MakeSpan(output);
    options.algorithm = algorithm();
    auto work = comm.AllGather(options);
    ASSERT_TRUE(work.ok()) << work.status();
    ASSERT_TRUE((*work)->Wait(kTimeout).ok());
    size_t mismatches = 0;
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < per_rank; ++i) {
        if (GetElement(dtype(), output, r * per_rank + i) != ExactValue(r, i)) ++mismatches;
      }
    }
    EXPECT_EQ(mismatches, 0u) << "rank " << rank;
  }, GridOptions(), GridLoopback());
}

TEST_P(CollectiveGridTest, BroadcastFromSomeRoot) {
  const int root = static_cast<int>(count() % world());
  RunOnRanks(world(), [&](int rank, Communicator& comm) {
    std::vector<std::byte> buffer = Bytes(count(), dtype());
    for (size_t i = 0; i < count(); ++i) {
      SetElement(dtype(), buffer, i, rank == root ? ExactValue(root, i) : 99.0f);
    }
    BroadcastOptions options;
    options.buffer = absl::MakeSpan(buffer);
    options.root = root;
    auto work = comm.Broadcast(options);
    ASSERT_TRUE(work.ok()) << work.status();
    ASSERT_TRUE((*work)->Wait(kTimeout).ok());
    size_t mismatches = 0;
    for (size_t i = 0; i < count(); ++i) {
      if (GetElement(dtype(), buffer, i) != ExactValue(root, i)) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0u) << "rank " << rank;
  }, GridOptions(), GridLoopback());
}

TEST_P(CollectiveGridTest, ShiftByOneAndByMinusTwo) {
  const int n = world();
  for (int distance : {1, -2}) {
    if (n > 1 && ((distance % n) + n) % n == 0) continue;  // refused: tested below
    RunOnRanks(
        n,
        [&](int rank, Communicator& comm) {
          std::vector<std::byte> input = ExactInput(rank);
          std::vector<std::byte> output = Bytes(count(), dtype());
          ShiftOptions options;
          options.input = absl::MakeConstSpan(input);
          options.output = absl::MakeSpan(output);
          options.distance = distance;
          auto work = comm.Shift(options);
          ASSERT_TRUE(work.ok()) << work.status();
          ASSERT_TRUE((*work)->Wait(kTimeout).ok());
          const int from = ((rank - distance) % n + n) % n;
          size_t mismatches = 0;
          for (size_t i = 0; i < count(); ++i) {
            if (GetElement(dtype(), output, i) != ExactValue(from, i)) ++mismatches;
          }
          EXPECT_EQ(mismatches, 0u) << "rank " << rank << " distance " << distance;
        },
        GridOptions(), GridLoopback());
  }
}

TEST(ShiftTest, BadBuffersAndDistancesAreRefused) {
  RunOnRanks(
      2,
      [&](int rank, Communicator& comm) {
        std::vector<std::byte> a(16), b(8);
        ShiftOptions sizes;
        sizes.input = absl::MakeConstSpan(a);
        sizes.output = absl::MakeSpan(b);
        auto refused = comm.Shift(sizes);
        ASSERT_FALSE(refused.ok());
        EXPECT_NE(refused.status().message().find("the same size"), std::string::npos);
        ShiftOptions self;
        self.input = absl::MakeConstSpan(a.data(), 8);
        self.output = absl::MakeSpan(b);
        self.distance = 2;
        refused = comm.Shift(self);
        ASSERT_FALSE(refused.ok());
        EXPECT_NE(refused.status().message().find("send to itself"), std::string::npos);
      },
      GridOptions(), GridLoopback());
}

std::string GridName(const ::testing::TestParamInfo<GridParam>& info) {
  return absl::StrCat("n", std::get<0>(info.param), "_count", std::get<1>(info.param), "_",
                      DtypeName(std::get<2>(info.param)), "_",
                      std::get<3>(info.param) == Algorithm::kRing     ? "ring"
                      : std::get<3>(info.param) == Algorithm::kDirect ? "direct"
                                                                      : "latency");
}

INSTANTIATE_TEST_SUITE_P(
    Grid, CollectiveGridTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                       ::testing::Values(size_t{0}, size_t{1}, size_t{7}, size_t{4096},
                                         size_t{(1 << 20) + 3}),
                       ::testing::Values(Dtype::kFloat32, Dtype::kBFloat16),
                       ::testing::Values(Algorithm::kRing, Algorithm::kLatency,
                                         Algorithm::kDirect)),
    GridName);

// ---- Determinism: order-sensitive inputs against the documented trees ----

// Ring reduce-scatter tree of chunk c: ((x[c+1] + x[c+2]) + ...) + x[c].
std::vector<float> RingTree(const std::vector<std::vector<std::byte>>& x, Dtype dtype,
                            size_t count, ReduceOp op) {
  const int n = static_cast<int>(x.size());
  const float divisor = op == ReduceOp::kAverage ? static_cast<float>(n) : 1.0f;
  std::vector<float> result(count);
  for (int c = 0; c < n; ++c) {
    size_t begin, end;
    ReferenceChunk(count, n, c, &begin, &end);
    for (size_t i = begin; i < end; ++i) {
      float acc = GetElement(dtype, x[(c + 1) % n], i);
      for (int j = 2; j <= n; ++j) {
        acc = ReferenceHop(dtype, acc, GetElement(dtype, x[(c + j) % n], i),
                           j == n ? divisor : 1.0f);
      }
      result[i] = acc;
    }
  }
  return result;
}

// Recursive doubling tree with the non-power-of-two fix-up.
std::vector<float> DoublingTree(const std::vector<std::vector<std::byte>>& x, Dtype dtype,
                                size_t count, ReduceOp op) {
  const int n = static_cast<int>(x.size());
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  const float divisor = op == ReduceOp::kAverage ? static_cast<float>(n) : 1.0f;
  std::vector<float> result(count);
  for (size_t i = 0; i < count; ++i) {
    std::vector<float> v(p);  // by renumbered rank
    for (int q = 0; q < p; ++q) {
      if (q < extra) {
        v[q] = ReferenceHop(dtype, GetElement(dtype, x[2 * q], i),
                            GetElement(dtype, x[2 * q + 1], i), 1.0f);
      } else {
        v[q] = GetElement(dtype, x[q + extra], i);
      }
    }
    for (int d = 1; d < p; d *= 2) {
      std::vector<float> next(p);
      for (int q = 0; q < p; ++q) {
        next[q] = ReferenceHop(dtype, v[q], v[q ^ d], d * 2 == p ? divisor : 1.0f);
      }
      v = next;
    }
    result[i] = v[0];
  }
  return result;
}

class DeterminismTest : public ::testing::TestWithParam<std::tuple<int, Dtype>> {};

TEST_P(DeterminismTest, ResultsFollowTheDocumentedTreesBitForBit) {
  const int n = std::get<0>(GetParam());
  const Dtype dtype = std::get<1>(GetParam());
  const size_t count = 1001;
  std::vector<std::vector<std::byte>> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(RandomBuffer(count, dtype, 1000 + r));
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    const std::vector<float> ring = RingTree(inputs, dtype, count, op);
    const std::vector<float> doubling = DoublingTree(inputs, dtype, count, op);
    CommunicatorOptions options;
    options.max_segment_bytes = 256;
    LoopbackOptions loopback;
    loopback.max_delay = absl::Microseconds(30);  // shuffle arrival timing
    RunOnRanks(n, [&](int rank, Communicator& comm) {
      size_t begin, end;
      ReferenceChunk(count, n, rank, &begin, &end);
      // The direct reduce-scatter promises the ring's tree exactly.
      for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kLatency, Algorithm::kDirect}) {
        const std::vector<float>& tree = algorithm == Algorithm::kLatency ? doubling : ring;
        const char* name = algorithm == Algorithm::kRing     ? "ring"
                           : algorithm == Algorithm::kDirect ? "direct"
                                                             : "latency";
        for (int repeat = 0; repeat < 2; ++repeat) {
          std::vector<std::byte> buffer = inputs[rank];
          AllReduceOptions all_reduce;
          all_reduce.buffer = absl::MakeSpan(buffer);
          all_reduce.dtype = dtype;
          all_reduce.op = op;
          all_reduce.algorithm = algorithm;
          std::vector<std::byte> scattered = Bytes(end - begin, dtype);
          ReduceScatterOptions reduce_scatter;
          reduce_scatter.input = absl::MakeConstSpan(inputs[rank]);
          reduce_scatter.output = absl::MakeSpan(scattered);
          reduce_scatter.dtype = dtype;
          reduce_scatter.op = op;
          reduce_scatter.algorithm = algorithm;
          auto w1 = comm.AllReduce(all_reduce);
          auto w2 = comm.ReduceScatter(reduce_scatter);
          ASSERT_TRUE(w1.ok() && w2.ok());
          ASSERT_TRUE((*w1)->Wait(kTimeout).ok());
          ASSERT_TRUE((*w2)->Wait(kTimeout).ok());
          size_t all_reduce_mismatches = 0, scatter_mismatches = 0;
          for (size_t i = 0; i < count; ++i) {
            if (GetElement(dtype, buffer, i) != tree[i]) ++all_reduce_mismatches;
          }
          for (size_t i = begin; i < end; ++i) {
            if (GetElement(dtype, scattered, i - begin) != tree[i]) ++scatter_mismatches;
          }
          EXPECT_EQ(all_reduce_mismatches, 0u) << name << " all-reduce, rank " << rank;
          EXPECT_EQ(scatter_mismatches, 0u) << name << " reduce-scatter, rank " << rank;
        }
      }
    }, options, loopback);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, DeterminismTest,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5, 6, 8),
                                            ::testing::Values(Dtype::kFloat32,
                                                              Dtype::kBFloat16)));

}  // namespace
}  // namespace comm

namespace comm {
namespace {

// ---- int64: exact sums at every world size ----

int64_t WideValue(int rank, size_t i) {
  uint64_t z = (static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>(z ^ (z >> 29));  // full width: sums wrap
}

// The sum of every rank's contributions, the same for every world size,
// algorithm and segment size: each "rank" r of a job of n holds the sum of
// contributions j = r, r + n, r + 2n, ... of 8 fixed ones, so the global sum
// is the same at n = 1..8 while the per-rank inputs differ.
class Int64SumTest : public ::testing::TestWithParam<std::tuple<int, Algorithm>> {};

TEST_P(Int64SumTest, TheSumOfAPartitionIsTheSameAtEveryWorldSize) {
  const int n = std::get<0>(GetParam());
  const Algorithm algorithm = std::get<1>(GetParam());
  constexpr int kContributions = 8;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{(1 << 18) + 3}}) {
    std::vector<int64_t> expected(count, 0);
    for (size_t i = 0; i < count; ++i) {
      uint64_t s = 0;
      for (int j = 0; j < kContributions; ++j) s += static_cast<uint64_t>(WideValue(j, i));
      expected[i] = static_cast<int64_t>(s);
    }
    auto input_of = [&](int rank) {
      std::vector<int64_t> v(count, 0);
      for (int j = rank; j < kContributions; j += n) {
        for (size_t i = 0; i < count; ++i) {
          v[i] = static_cast<int64_t>(static_cast<uint64_t>(v[i]) +
                                      static_cast<uint64_t>(WideValue(j, i)));
        }
      }
      return v;
    };
    RunOnRanks(n, [&](int rank, Communicator& comm) {
      size_t begin, end;
      ReferenceChunk(count, n, rank, &begin, &end);
      std::vector<int64_t> input = input_of(rank);
      std::vector<int64_t> output(end - begin, -1);
      ReduceScatterOptions rs;
      rs.input = AsConstBytes(absl::MakeConstSpan(input));
      rs.output = AsBytes(absl::MakeSpan(output));
      rs.dtype = Dtype::kInt64;
      rs.algorithm = algorithm;
      auto work = comm.ReduceScatter(rs);
      ASSERT_TRUE(work.ok()) << work.status();
      ASSERT_TRUE((*work)->Wait(kTimeout).ok());
      for (size_t i = begin; i < end; ++i) {
        ASSERT_EQ(output[i - begin], expected[i]) << "rank " << rank << " element " << i;
      }
      AllReduceOptions ar;
      ar.buffer = AsBytes(absl::MakeSpan(input));
      ar.dtype = Dtype::kInt64;
      ar.algorithm = algorithm;
      work = comm.AllReduce(ar);
      ASSERT_TRUE(work.ok()) << work.status();
      ASSERT_TRUE((*work)->Wait(kTimeout).ok());
      ASSERT_EQ(input, expected) << "rank " << rank;
      ar.op = ReduceOp::kAverage;
      EXPECT_EQ(comm.AllReduce(ar).status().code(), absl::StatusCode::kInvalidArgument);
      rs.op = ReduceOp::kAverage;
      EXPECT_EQ(comm.ReduceScatter(rs).status().code(), absl::StatusCode::kInvalidArgument);
    }, GridOptions(), GridLoopback());
  }
}

INSTANTIATE_TEST_SUITE_P(
    WorldSizes, Int64SumTest,
    ::testing::Combine(::testing::Range(1, 9),
                       ::testing::Values(Algorithm::kRing, Algorithm::kLatency,
                                         Algorithm::kDirect)),
    [](const ::testing::TestParamInfo<std::tuple<int, Algorithm>>& info) {
      const Algorithm a = std::get<1>(info.param);
      return absl::StrCat("n", std::get<0>(info.param), "_",
                          a == Algorithm::kRing     ? "ring"
                          : a == Algorithm::kDirect ? "direct"
                                                    : "latency");
    });

}  // namespace
}  // namespace comm
