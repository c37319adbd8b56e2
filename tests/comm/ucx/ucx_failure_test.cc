// File: tests/comm/ucx/ucx_failure_test.cc
//
// The classification of failed UCX calls (comm/ucx/ucx_failure.h), with the
// statuses and messages that //tests/integration/comm:kill_rank_test's
// survivors actually got when a peer was SIGKILLed: a send completing with
// "Shared memory error" after UCX failed to shmat the dead peer's segment,
// and a send failing at post time with "Endpoint timeout". Before the fix
// both were reported as kInternal, not as the peer's death.
#include "comm/ucx/ucx_failure.h"

#include <ucs/type/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace comm {
namespace {

const char kRank2Died[] =
    "rank 2 died: its connection to the rendezvous store on rank 0 dropped without a "
    "goodbye (reported to rank 0)";

KnownFailures Dead(const std::string& health_message) {
  KnownFailures known;
  known.health = absl::UnavailableError(health_message);
  known.waited = absl::Milliseconds(7);
  return known;
}

KnownFailures NothingKnown() {
  KnownFailures known;
  known.waited = absl::Seconds(2);
  return known;
}

TEST(UcxFailure, SharedMemoryErrorAtCompletionIsTheDeadPeersDeath) {
  absl::Status status = ClassifyUcxFailure("send of 1048576 bytes to rank 2 tag 7 on rank 0",
                                           2, UCS_ERR_SHMEM_SEGMENT, "", Dead(kRank2Died));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "send of 1048576 bytes to rank 2")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), kRank2Died)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "Shared memory error")) << status;
}

TEST(UcxFailure, EndpointTimeoutAtPostTimeIsTheDeadPeersDeath) {
  absl::Status status = ClassifyUcxFailure(
      "posting a send of 1048576 bytes to rank 1 tag 268439552 on rank 0", 1,
      UCS_ERR_ENDPOINT_TIMEOUT, "",
      Dead("rank 1 died: its connection to the rendezvous store on rank 0 dropped"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "rank 1 died")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "Endpoint timeout")) << status;
}

// The peer of the failed operation exited because another rank died first:
// the message names the first one.
TEST(UcxFailure, NamesTheRankThatFailedFirstNotThePeer) {
  absl::Status status = ClassifyUcxFailure("receive of 64 bytes from rank 1 tag 3 on rank 0", 1,
                                           UCS_ERR_IO_ERROR, "process_vm_readv(pid=77) returned -1",
                                           Dead(kRank2Died));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), kRank2Died)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "process_vm_readv(pid=77)")) << status;
}

// Whatever UCX status surfaced the death, at whatever point.
TEST(UcxFailure, AnyStatusWithAKnownDeathIsUnavailable) {
  for (int code = UCS_ERR_NO_MESSAGE; code >= UCS_ERR_LAST; --code) {
    const auto ucx = static_cast<ucs_status_t>(code);
    for (const char* operation : {"posting a send of 8 bytes to rank 2 tag 1 on rank 1",
                                  "receive of 8 bytes from rank 2 tag 1 on rank 1",
                                  "ucp_ep_create to rank 2 on rank 1"}) {
      absl::Status status = ClassifyUcxFailure(operation, 2, ucx, "", Dead(kRank2Died));
      EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << code << ": " << status;
      EXPECT_TRUE(absl::StrContains(status.message(), "rank 2 died")) << code << ": " << status;
      EXPECT_TRUE(absl::StrContains(status.message(), ucs_status_string(ucx)))
          << code << ": " << status;
    }
  }
}

// A hung rank (declared by the heartbeat detector) counts like a dead one.
TEST(UcxFailure, AHungRankIsNamedLikeADeadOne) {
  absl::Status status =
      ClassifyUcxFailure("send of 4 bytes to rank 3 tag 9 on rank 1", 3, UCS_ERR_NO_RESOURCE, "",
                         Dead("rank 3 is hung: no heartbeat reached the rendezvous store"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "rank 3 is hung")) << status;
}

TEST(UcxFailure, WorkerWideFailureWithAKnownDeathIsUnavailable) {
  absl::Status status = ClassifyUcxFailure("arming the UCX worker on rank 0", -1,
                                           UCS_ERR_IO_ERROR, "", Dead(kRank2Died));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), kRank2Died)) << status;
}

TEST(UcxFailure, PeerThatSaidGoodbyeIsNamedAsGone) {
  KnownFailures known = NothingKnown();
  known.peer_left = true;
  absl::Status status = ClassifyUcxFailure("send of 4 bytes to rank 1 tag 2 on rank 0", 1,
                                           UCS_ERR_SHMEM_SEGMENT, "", known);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "rank 1 shut down")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "Shared memory error")) << status;
}

TEST(UcxFailure, UnreachableStatusWithoutConfirmationStillNamesThePeer) {
  for (ucs_status_t ucx : {UCS_ERR_IO_ERROR, UCS_ERR_CONNECTION_RESET, UCS_ERR_UNREACHABLE,
                           UCS_ERR_ENDPOINT_TIMEOUT}) {
    absl::Status status = ClassifyUcxFailure(
        "posting a receive of 4 bytes from rank 3 tag 2 on rank 0", 3, ucx, "", NothingKnown());
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "rank 3 died or exited")) << status;
  }
}

TEST(UcxFailure, OtherFailuresWithNoKnownDeathAreInternal) {
  for (ucs_status_t ucx : {UCS_ERR_SHMEM_SEGMENT, UCS_ERR_NO_MEMORY, UCS_ERR_INVALID_PARAM,
                           UCS_ERR_NO_RESOURCE, UCS_ERR_CANCELED}) {
    absl::Status status = ClassifyUcxFailure("send of 4 bytes to rank 1 tag 2 on rank 0", 1, ucx,
                                             "", NothingKnown());
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), ucs_status_string(ucx))) << status;
    // It says that it looked for a dead peer, and for how long.
    EXPECT_TRUE(absl::StrContains(status.message(), "no rank is known to have died")) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "2s")) << status;
  }
}

TEST(UcxFailure, UnreachableStatusesAreExactlyThePeerLossOnes) {
  EXPECT_TRUE(SaysPeerUnreachable(UCS_ERR_IO_ERROR));
  EXPECT_TRUE(SaysPeerUnreachable(UCS_ERR_CONNECTION_RESET));
  EXPECT_TRUE(SaysPeerUnreachable(UCS_ERR_UNREACHABLE));
  EXPECT_TRUE(SaysPeerUnreachable(UCS_ERR_ENDPOINT_TIMEOUT));
  EXPECT_TRUE(SaysPeerUnreachable(UCS_ERR_FIRST_LINK_FAILURE));
  EXPECT_TRUE(SaysPeerUnreachable(UCS_ERR_LAST_ENDPOINT_FAILURE));
  EXPECT_FALSE(SaysPeerUnreachable(UCS_ERR_SHMEM_SEGMENT));
  EXPECT_FALSE(SaysPeerUnreachable(UCS_ERR_NO_MEMORY));
  EXPECT_FALSE(SaysPeerUnreachable(UCS_ERR_CANCELED));
}

}  // namespace
}  // namespace comm
