// File: tests/comm/wire_bytes_test.cc
//
// What a reduce-scatter puts on the wire, counted at the transport: every
// byte a rank posts for sending while the collective runs. An int64
// reduce-scatter (the exact sums of issue 36) moves exactly twice the bytes
// of an fp32 one of the same element count, for every algorithm and world
// size; the counts are printed (docs/exact.md quotes them).
#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/loopback_transport.h"
#include "comm/transport.h"
#include "gtest/gtest.h"

namespace comm {
namespace {

// Forwards everything to `inner`, counting the bytes of every send.
class CountingTransport : public Transport {
 public:
  explicit CountingTransport(std::unique_ptr<Transport> inner) : inner_(std::move(inner)) {}
  size_t sent_bytes() const { return sent_bytes_.load(); }

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  int HostIndex(int rank) const override { return inner_->HostIndex(rank); }
  absl::Status PostSend(int peer, uint64_t tag, const void* data, size_t num_bytes,
                        Completion* completion) override {
    sent_bytes_ += num_bytes;
    return inner_->PostSend(peer, tag, data, num_bytes, completion);
  }
  absl::Status PostRecv(int peer, uint64_t tag, void* data, size_t num_bytes,
                        Completion* completion) override {
    return inner_->PostRecv(peer, tag, data, num_bytes, completion);
  }
  bool Progress() override { return inner_->Progress(); }
  absl::Status BlockUntilActivity(absl::Duration timeout) override {
    return inner_->BlockUntilActivity(timeout);
  }
  void Interrupt() override { inner_->Interrupt(); }
  absl::Status health() const override { return inner_->health(); }
  void Abort(const absl::Status& why) override { inner_->Abort(why); }
  CallerLiveness* caller_liveness() override { return inner_->caller_liveness(); }

 private:
  std::unique_ptr<Transport> inner_;
  std::atomic<size_t> sent_bytes_{0};
};

// Bytes all ranks sent during one reduce-scatter of `count` elements.
size_t ReduceScatterWireBytes(int world_size, size_t count, Dtype dtype, Algorithm algorithm) {
  LoopbackHub hub(world_size, LoopbackOptions{});
  std::vector<std::unique_ptr<CountingTransport>> transports;
  for (int r = 0; r < world_size; ++r) {
    transports.push_back(std::make_unique<CountingTransport>(hub.CreateTransport(r)));
  }
  std::vector<size_t> sent(world_size, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          Communicator::CreateOverTransport(transports[r].get(), CommunicatorOptions{});
      ASSERT_TRUE(comm.ok()) << comm.status();
      std::vector<std::byte> input(count * DtypeSize(dtype), std::byte{0});
      std::vector<std::byte> output(input.size(), std::byte{0});
      ReduceScatterOptions options;
      options.input = absl::MakeConstSpan(input);
      options.output = absl::MakeSpan(output);
      options.dtype = dtype;
      options.algorithm = algorithm;
      const size_t before = transports[r]->sent_bytes();
      auto work = (*comm)->ReduceScatter(options);
      ASSERT_TRUE(work.ok()) << work.status();
      ASSERT_TRUE((*work)->Wait(absl::Seconds(120)).ok());
      sent[r] = transports[r]->sent_bytes() - before;
      // Every rank is done sending before any communicator goes away.
      auto barrier = (*comm)->Barrier();
      ASSERT_TRUE(barrier.ok());
      ASSERT_TRUE((*barrier)->Wait(absl::Seconds(120)).ok());
    });
  }
  for (auto& t : threads) t.join();
  size_t total = 0;
  for (size_t s : sent) total += s;
  return total;
}

class WireBytesTest : public ::testing::TestWithParam<std::tuple<int, Algorithm>> {};

TEST_P(WireBytesTest, Int64MovesTwiceTheBytesOfFp32) {
  const int n = std::get<0>(GetParam());
  const Algorithm algorithm = std::get<1>(GetParam());
  const size_t count = (size_t{1} << 20) + 3;
  const size_t fp32 = ReduceScatterWireBytes(n, count, Dtype::kFloat32, algorithm);
  const size_t int64 = ReduceScatterWireBytes(n, count, Dtype::kInt64, algorithm);
  std::printf("reduce-scatter of %zu elements, %d ranks, %s: fp32 %zu bytes, "
              "int64 %zu bytes (%.3fx)\n",
              count, n, algorithm == Algorithm::kRing ? "ring" : "direct", fp32, int64,
              static_cast<double>(int64) / static_cast<double>(fp32));
  EXPECT_GT(fp32, 0u);
  EXPECT_EQ(int64, 2 * fp32);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, WireBytesTest,
    ::testing::Combine(::testing::Values(2, 3, 4, 8),
                       ::testing::Values(Algorithm::kRing, Algorithm::kDirect)));

}  // namespace
}  // namespace comm
