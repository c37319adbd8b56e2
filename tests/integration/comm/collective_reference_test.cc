// File: tests/integration/comm/collective_reference_test.cc
//
// The reference of the integration tests, checked against a simulation of
// each collective done the obvious way on the inputs of all ranks (what a
// correct communicator must produce), and shown to reject corrupted output.
#include "base/bfloat16.h"
#include "tests/integration/comm/collective_reference.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace comm_test {
namespace {

using comm::Dtype;
using comm::ReduceOp;

float ReadAt(Dtype dtype, const std::vector<std::byte>& bytes, size_t i) {
  if (dtype == Dtype::kFloat32) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  uint16_t b;
  std::memcpy(&b, bytes.data() + 2 * i, 2);
  return base::FromBf16Bits(b);
}

void WriteAt(Dtype dtype, float v, std::vector<std::byte>& bytes, size_t i) {
  if (dtype == Dtype::kFloat32) {
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  } else {
    uint16_t b = base::ToBf16Bits(v);
    std::memcpy(bytes.data() + 2 * i, &b, 2);
  }
}

// Reduction as a correct implementation does it: accumulate the dtype's
// values in fp32 in rank order, divide for the average, round once.
std::vector<std::byte> SimulateReduce(Dtype dtype, ReduceOp op, ValueMode mode,
                                      const std::vector<int>& sources, size_t count,
                                      uint64_t salt) {
  std::vector<std::vector<std::byte>> inputs;
  for (int s : sources) inputs.push_back(MakeInput(dtype, mode, s, count, salt));
  std::vector<std::byte> out(count * comm::DtypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    float acc = 0;
    for (auto& in : inputs) acc += ReadAt(dtype, in, i);
    if (op == ReduceOp::kAverage) acc /= sources.size();
    WriteAt(dtype, acc, out, i);
  }
  return out;
}

class ReferenceTest : public testing::TestWithParam<std::tuple<Dtype, ValueMode, int>> {};

TEST_P(ReferenceTest, SimulatedCollectivesPassAndCorruptionFails) {
  const auto [dtype, mode, n] = GetParam();
  std::vector<int> sources;
  for (int r = 0; r < n; ++r) sources.push_back(r);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}}) {
    const uint64_t salt = count + 11;
    // All-gather.
    std::vector<std::byte> gathered;
    for (int s : sources) {
      std::vector<std::byte> in = MakeInput(dtype, ValueMode::kSmallIntegers, s, count, salt);
      gathered.insert(gathered.end(), in.begin(), in.end());
    }
    EXPECT_EQ(CheckAllGather(dtype, ValueMode::kSmallIntegers, sources, count, salt,
                             gathered), "");
    if (count > 0) {
      WriteAt(dtype, 1000.0f, gathered, gathered.size() / comm::DtypeSize(dtype) - 1);
      EXPECT_NE(CheckAllGather(dtype, ValueMode::kSmallIntegers, sources, count, salt,
                               gathered), "");
    }
    // Reductions, whole buffer and each reduce-scatter chunk.
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      std::vector<std::byte> reduced = SimulateReduce(dtype, op, mode, sources, count, salt);
      EXPECT_EQ(CheckReduced(dtype, op, mode, sources, 0, count, salt, reduced), "");
      const size_t element = comm::DtypeSize(dtype);
      for (int r = 0; r < n; ++r) {
        size_t begin = ChunkBegin(count, n, r), size = ChunkSize(count, n, r);
        std::vector<std::byte> chunk(reduced.begin() + begin * element,
                                     reduced.begin() + (begin + size) * element);
        EXPECT_EQ(CheckReduced(dtype, op, mode, sources, begin, size, salt, chunk), "");
      }
      if (count > 0) {
        float wrong = ReadAt(dtype, reduced, 0) + 1.0f;
        WriteAt(dtype, wrong, reduced, 0);
        EXPECT_NE(CheckReduced(dtype, op, mode, sources, 0, count, salt, reduced), "");
      }
    }
    // Broadcast, and an output never written (NaN).
    std::vector<std::byte> root = MakeInput(dtype, ValueMode::kSmallIntegers, n - 1, count, salt);
    EXPECT_EQ(CheckBroadcast(dtype, ValueMode::kSmallIntegers, n - 1, count, salt, root), "");
    std::vector<std::byte> unwritten = MakeOutputWithGuard(count * comm::DtypeSize(dtype));
    if (count > 0) {
      EXPECT_NE(CheckBroadcast(dtype, ValueMode::kSmallIntegers, n - 1, count, salt,
                               unwritten), "");
    }
    EXPECT_EQ(CheckGuard(unwritten, count * comm::DtypeSize(dtype)), "");
    unwritten[count * comm::DtypeSize(dtype)] = std::byte{0};
    EXPECT_NE(CheckGuard(unwritten, count * comm::DtypeSize(dtype)), "");
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, ReferenceTest,
    testing::Combine(testing::Values(Dtype::kFloat32, Dtype::kBFloat16),
                     testing::Values(ValueMode::kSmallIntegers, ValueMode::kBf16Fractions),
                     testing::Values(1, 2, 3, 8)));

// Rounding once matters: summing bf16 fractions with a rounding after every
// addition gives a different answer for some elements, and the check sees it.
TEST(ReferenceTest, RoundingEveryHopIsDetected) {
  const std::vector<int> sources = {0, 1, 2, 3};
  const size_t count = 4096;
  std::vector<std::vector<std::byte>> inputs;
  for (int s : sources) {
    inputs.push_back(MakeInput(Dtype::kBFloat16, ValueMode::kBf16Fractions, s, count, 5));
  }
  std::vector<std::byte> out(count * 2);
  for (size_t i = 0; i < count; ++i) {
    float acc = 0;
    for (auto& in : inputs) {
      acc = base::FromBf16Bits(base::ToBf16Bits(acc + ReadAt(Dtype::kBFloat16, in, i)));
    }
    WriteAt(Dtype::kBFloat16, acc, out, i);
  }
  EXPECT_NE(CheckReduced(Dtype::kBFloat16, ReduceOp::kSum, ValueMode::kBf16Fractions, sources,
                         0, count, 5, out, Bf16Rounding::kOnce),
            "");
  // ... and is within the per-hop tolerance, while a lost contribution is not.
  EXPECT_EQ(CheckReduced(Dtype::kBFloat16, ReduceOp::kSum, ValueMode::kBf16Fractions, sources,
                         0, count, 5, out, Bf16Rounding::kPerHop),
            "");
  WriteAt(Dtype::kBFloat16, ReadAt(Dtype::kBFloat16, out, 9) - 1.0f, out, 9);
  EXPECT_NE(CheckReduced(Dtype::kBFloat16, ReduceOp::kSum, ValueMode::kBf16Fractions, sources,
                         0, count, 5, out, Bf16Rounding::kPerHop),
            "");
}

TEST(ChunkTest, CeilChunksLastOnesShorterOrEmpty) {
  EXPECT_EQ(ChunkSize(10, 4, 0), 3u);
  EXPECT_EQ(ChunkSize(10, 4, 3), 1u);
  EXPECT_EQ(ChunkBegin(10, 4, 3), 9u);
  EXPECT_EQ(ChunkSize(1, 8, 0), 1u);
  EXPECT_EQ(ChunkSize(1, 8, 5), 0u);
  EXPECT_EQ(ChunkBegin(1, 8, 5), 1u);
  EXPECT_EQ(ChunkSize(0, 3, 0), 0u);
}

}  // namespace
}  // namespace comm_test
