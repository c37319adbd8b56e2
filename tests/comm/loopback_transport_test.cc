// File: tests/comm/loopback_transport_test.cc
// The fake honours the Transport contract the collectives rely on.
#include "comm/loopback_transport.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace comm {
namespace {

void DriveUntilDone(Transport& t, std::vector<Completion*> completions) {
  absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up) {
    bool all = true;
    for (Completion* c : completions) all = all && c->done;
    if (all) return;
    if (!t.Progress()) {
      ASSERT_TRUE(t.BlockUntilActivity(absl::Milliseconds(1)).ok());
    }
  }
  FAIL() << "completions did not finish in 10 s";
}

TEST(LoopbackTransportTest, MatchesByPeerAndTagInPostingOrder) {
  LoopbackOptions options;
  options.eager_bytes = 4;  // mix eager and receiver-copied messages
  options.max_delay = absl::Microseconds(200);
  LoopbackHub hub(3, options);
  auto t0 = hub.CreateTransport(0), t1 = hub.CreateTransport(1), t2 = hub.CreateTransport(2);
  std::vector<int> a = {1, 2, 3}, b = {4, 5, 6, 7}, c = {8};
  Completion s1, s2, s3, s4;
  // Rank 1 sends two messages with tag 5 and one with tag 6; rank 2 one with tag 5.
  ASSERT_TRUE(t1->PostSend(0, 5, a.data(), 12, &s1).ok());
  ASSERT_TRUE(t1->PostSend(0, 6, c.data(), 4, &s2).ok());
  ASSERT_TRUE(t1->PostSend(0, 5, b.data(), 16, &s3).ok());
  ASSERT_TRUE(t2->PostSend(0, 5, c.data(), 4, &s4).ok());
  std::vector<int> r_first(4, -1), r_second(4, -1), r_tag6(1, -1), r_rank2(1, -1);
  Completion c1, c2, c3, c4;
  ASSERT_TRUE(t0->PostRecv(2, 5, r_rank2.data(), 4, &c4).ok());
  ASSERT_TRUE(t0->PostRecv(1, 5, r_first.data(), 16, &c1).ok());
  ASSERT_TRUE(t0->PostRecv(1, 5, r_second.data(), 16, &c2).ok());
  ASSERT_TRUE(t0->PostRecv(1, 6, r_tag6.data(), 4, &c3).ok());
  std::thread sender1([&] { DriveUntilDone(*t1, {&s1, &s2, &s3}); });
  std::thread sender2([&] { DriveUntilDone(*t2, {&s4}); });
  DriveUntilDone(*t0, {&c1, &c2, &c3, &c4});
  sender1.join();
  sender2.join();
  EXPECT_TRUE(c1.status.ok() && c2.status.ok() && c3.status.ok() && c4.status.ok());
  EXPECT_EQ(c1.received_bytes, 12u);
  EXPECT_EQ(std::vector<int>(r_first.begin(), r_first.begin() + 3), a);
  EXPECT_EQ(r_second, b);
  EXPECT_EQ(r_tag6[0], 8);
  EXPECT_EQ(r_rank2[0], 8);
}

TEST(LoopbackTransportTest, TooLongMessageFailsTheReceive) {
  LoopbackHub hub(2);
  auto t0 = hub.CreateTransport(0), t1 = hub.CreateTransport(1);
  std::vector<char> big(100), small(10);
  Completion sent, received;
  ASSERT_TRUE(t1->PostSend(0, 1, big.data(), big.size(), &sent).ok());
  ASSERT_TRUE(t0->PostRecv(1, 1, small.data(), small.size(), &received).ok());
  DriveUntilDone(*t0, {&received});
  EXPECT_EQ(received.status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(received.status.message().find("longer than the posted receive"),
            std::string::npos);
}

TEST(LoopbackTransportTest, RejectsBadPeerAndTag) {
  LoopbackHub hub(2);
  auto t0 = hub.CreateTransport(0);
  Completion c;
  char byte = 0;
  EXPECT_EQ(t0->PostSend(2, 1, &byte, 1, &c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t0->PostRecv(1, kMaxTransportTag + 1, &byte, 1, &c).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LoopbackTransportTest, InterruptWakesABlockedCaller) {
  LoopbackHub hub(2);
  auto t0 = hub.CreateTransport(0);
  absl::Time start = absl::Now();
  std::thread waker([&] {
    absl::SleepFor(absl::Milliseconds(20));
    t0->Interrupt();
  });
  ASSERT_TRUE(t0->BlockUntilActivity(absl::Seconds(20)).ok());
  waker.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  // Sticky: an Interrupt before the block makes it return at once.
  t0->Interrupt();
  start = absl::Now();
  ASSERT_TRUE(t0->BlockUntilActivity(absl::Seconds(20)).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(LoopbackTransportTest, KilledPeerFailsPendingOperationsAndHealth) {
  LoopbackHub hub(2);
  auto t0 = hub.CreateTransport(0);
  char byte = 0;
  Completion received;
  ASSERT_TRUE(t0->PostRecv(1, 1, &byte, 1, &received).ok());
  EXPECT_TRUE(t0->health().ok());
  hub.KillRank(1);
  DriveUntilDone(*t0, {&received});
  EXPECT_EQ(received.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(t0->health().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(t0->health().message().find("rank 1"), std::string::npos);
  Completion sent;
  EXPECT_EQ(t0->PostSend(1, 1, &byte, 1, &sent).code(), absl::StatusCode::kUnavailable);
}

// Abort: a pending rendezvous send to a live peer finishes at once with the
// reason, the peer never reads the (freed) buffer, and later posts fail.
TEST(LoopbackTransportTest, AbortWithdrawsPendingSendsAndStopsTheTransport) {
  LoopbackHub hub(2);
  auto t0 = hub.CreateTransport(0), t1 = hub.CreateTransport(1);
  auto sent_data = std::make_unique<std::vector<char>>(1 << 20, 'x');
  Completion sent, own_recv;
  ASSERT_TRUE(t0->PostSend(1, 3, sent_data->data(), sent_data->size(), &sent).ok());
  std::vector<char> unused(16);
  ASSERT_TRUE(t0->PostRecv(1, 4, unused.data(), unused.size(), &own_recv).ok());
  t0->Abort(absl::UnavailableError("rank 7 died"));
  EXPECT_TRUE(sent.done);
  EXPECT_TRUE(own_recv.done);
  EXPECT_TRUE(absl::IsUnavailable(sent.status)) << sent.status;
  EXPECT_EQ(sent.status.message(), "rank 7 died");
  EXPECT_EQ(t0->health().message(), "rank 7 died");
  sent_data.reset();  // the caller may free it now

  std::vector<char> received(1 << 20, 'o');
  Completion recv;
  ASSERT_TRUE(t1->PostRecv(0, 3, received.data(), received.size(), &recv).ok());
  DriveUntilDone(*t1, {&recv});
  EXPECT_TRUE(absl::IsUnavailable(recv.status)) << recv.status;
  EXPECT_NE(recv.status.message().find("withdrew"), std::string::npos) << recv.status;
  EXPECT_EQ(received[0], 'o');

  char byte = 0;
  Completion refused;
  absl::Status post = t0->PostSend(1, 5, &byte, 1, &refused);
  EXPECT_TRUE(absl::IsUnavailable(post)) << post;
  EXPECT_NE(post.message().find("the transport has stopped: rank 7 died"), std::string::npos)
      << post;
}

}  // namespace
}  // namespace comm
