// File: tests/comm/loopback_ranks.h
//
// Runs a test body on N ranks as threads over the loopback transport, each
// with its own Communicator (CreateOverTransport). gtest EXPECT_* are
// thread-safe, so bodies check their own results.
//
//   RunOnRanks(4, [](int rank, Communicator& comm) { ... });
#ifndef TESTS_COMM_LOOPBACK_RANKS_H_
#define TESTS_COMM_LOOPBACK_RANKS_H_

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/loopback_transport.h"
#include "gtest/gtest.h"

namespace comm {

inline void RunOnRanks(int world_size, const std::function<void(int, Communicator&)>& body,
                       const CommunicatorOptions& options = {},
                       const LoopbackOptions& loopback = {}, LoopbackHub* hub_out = nullptr) {
  LoopbackHub local_hub(world_size, loopback);
  LoopbackHub& hub = hub_out != nullptr ? *hub_out : local_hub;
  std::vector<std::unique_ptr<Transport>> transports;
  for (int r = 0; r < world_size; ++r) transports.push_back(hub.CreateTransport(r));
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          Communicator::CreateOverTransport(transports[r].get(), options);
      ASSERT_TRUE(comm.ok()) << comm.status();
      ASSERT_EQ((*comm)->rank(), r);
      ASSERT_EQ((*comm)->size(), world_size);
      body(r, **comm);
    });
  }
  for (auto& thread : threads) thread.join();
}

}  // namespace comm

#endif  // TESTS_COMM_LOOPBACK_RANKS_H_
