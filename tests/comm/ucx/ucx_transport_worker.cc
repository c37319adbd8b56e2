// File: tests/comm/ucx/ucx_transport_worker.cc
//
// One rank of a UCX transport test. Usage: ucx_transport_worker <scenario>.
// Prints "PASS" and exits 0 when the rank saw what the scenario expects;
// otherwise prints "FAIL: why" and exits 1. Scenarios:
//   exchange      every rank sends to every rank (itself included) several
//                 tags at once, sizes 0, 1, 4099 and 1 MiB+3, two messages on
//                 one tag (order), receives posted in reverse order; contents
//                 checked against a formula.
//   too_long      rank 0 sends 100 bytes and 1 MiB+3 bytes; rank 1 posts 10
//                 and 1 MiB: both receives fail naming the size; a normal
//                 message afterwards still works.
//   wait_for_peer rank 0 (and any rank but `victim`) posts a receive from
//                 the victim rank (env VICTIM, default 1), prints WAITING and
//                 expects kUnavailable naming the victim within WAIT_MS; the
//                 victim prints READY and sleeps (the test kills it), or with
//                 env VICTIM_LEAVES=1 destroys its transport and exits 0.
//   stranded_send 3 ranks. Rank 0 sends 8 MiB (a rendezvous) to rank 1,
//                 which never posts the receive, and prints WAITING; rank 2
//                 prints READY and sleeps (the test kills it). Rank 0's send
//                 must finish, with kUnavailable naming rank 2, within
//                 WAIT_MS; rank 0 then frees the buffer and keeps progressing
//                 (under ASan a transport still reading it is an error), and
//                 a new send to live rank 1 must be refused (fail-stop). Rank
//                 1 waits for a receive from rank 2 to fail naming it, prints
//                 HOLDING and stays (the test kills it once rank 0 ended): a
//                 rank 1 that left would release rank 0's send for that
//                 reason instead.
//   block         BlockUntilActivity wakes for Interrupt() from another thread,
//                 and (with 2+ ranks) for a message that arrives while blocked:
//                 rank 1 sends to rank 0 after 500 ms.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "comm/rendezvous/job_env.h"
#include "comm/transport.h"
#include "comm/ucx/ucx_transport.h"

namespace {

using comm::Completion;
using comm::Transport;

// The byte at `index` of the message `source` sends to `destination` with `tag`,
// `sequence`-th on that tag.
char Expected(int source, int destination, uint64_t tag, int sequence, size_t index) {
  return static_cast<char>((source * 131 + destination * 31 + tag * 7 + sequence * 3 +
                            index * 13 + index / 251) & 0xff);
}

std::vector<char> Pattern(int source, int destination, uint64_t tag, int sequence,
                          size_t size) {
  std::vector<char> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = Expected(source, destination, tag, sequence, i);
  return data;
}

// Drives the transport the way the progress engine does: spin while
// productive, otherwise block.
absl::Status WaitFor(Transport& transport, const std::vector<Completion*>& completions,
                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    bool all_done = true;
    for (Completion* completion : completions) all_done &= completion->done;
    if (all_done) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", transport.rank(), ": test wait timed out after ",
                       absl::FormatDuration(timeout)));
    }
    if (!transport.Progress()) {
      FSDP_RETURN_IF_ERROR(transport.BlockUntilActivity(absl::Milliseconds(50)));
    }
  }
}

struct Message {
  uint64_t tag;
  int sequence;
  size_t size;
};

// Two messages on tag 5 check the per-tag order.
const std::vector<Message> kMessages = {
    {1, 0, 0}, {2, 0, 1}, {3, 0, 4099}, {4, 0, (size_t{1} << 20) + 3}, {5, 0, 777}, {5, 1, 778},
    {comm::kMaxTransportTag, 0, 64}};

absl::Status Exchange(Transport& transport) {
  const int me = transport.rank();
  const int n = transport.world_size();
  struct Recv {
    int peer;
    Message message;
    std::vector<char> buffer;
    Completion completion;
  };
  struct Send {
    std::vector<char> data;
    Completion completion;
  };
  std::vector<std::unique_ptr<Recv>> recvs;
  std::vector<std::unique_ptr<Send>> sends;
  std::vector<Completion*> all;
  // Receives first, in reverse order of tags (but in order within a tag),
  // from every peer; each buffer is 5 bytes larger than the message.
  for (int peer = 0; peer < n; ++peer) {
    for (int i = static_cast<int>(kMessages.size()) - 1; i >= 0; --i) {
      const Message& message = kMessages[i];
      if (message.tag == 5 && message.sequence == 1) continue;  // posted below
      auto recv = std::make_unique<Recv>();
      recv->peer = peer;
      recv->message = message;
      recv->buffer.assign(message.size + 5, 0);
      FSDP_RETURN_IF_ERROR(transport.PostRecv(peer, message.tag, recv->buffer.data(),
                                              recv->buffer.size(), &recv->completion));
      all.push_back(&recv->completion);
      recvs.push_back(std::move(recv));
      if (message.tag == 5) {
        auto second = std::make_unique<Recv>();
        second->peer = peer;
        second->message = kMessages[i + 1];
        second->buffer.assign(second->message.size + 5, 0);
        FSDP_RETURN_IF_ERROR(transport.PostRecv(peer, 5, second->buffer.data(),
                                                second->buffer.size(), &second->completion));
        all.push_back(&second->completion);
        recvs.push_back(std::move(second));
      }
    }
  }
  for (int k = 0; k < n; ++k) {
    const int peer = (me + k) % n;  // self first, then the others
    for (const Message& message : kMessages) {
      auto send = std::make_unique<Send>();
      send->data = Pattern(me, peer, message.tag, message.sequence, message.size);
      FSDP_RETURN_IF_ERROR(transport.PostSend(peer, message.tag, send->data.data(),
                                              send->data.size(), &send->completion));
      all.push_back(&send->completion);
      sends.push_back(std::move(send));
    }
  }
  FSDP_RETURN_IF_ERROR(WaitFor(transport, all, absl::Seconds(60)));
  for (const auto& send : sends) FSDP_RETURN_IF_ERROR(send->completion.status);
  for (const auto& recv : recvs) {
    const Message& message = recv->message;
    const std::string what = absl::StrCat("message from rank ", recv->peer, " tag ",
                                          message.tag, " #", message.sequence);
    FSDP_RETURN_IF_ERROR(recv->completion.status);
    if (recv->completion.received_bytes != message.size) {
      return absl::InternalError(absl::StrCat(what, ": got ", recv->completion.received_bytes,
                                              " bytes, expected ", message.size));
    }
    std::vector<char> expected =
        Pattern(recv->peer, me, message.tag, message.sequence, message.size);
    // (Zero-byte messages have no buffer: memcmp on null pointers is
    // undefined even for zero bytes, which UBSan reports.)
    if (message.size > 0 &&
        std::memcmp(recv->buffer.data(), expected.data(), message.size) != 0) {
      return absl::InternalError(absl::StrCat(what, ": wrong contents"));
    }
  }
  FSDP_RETURN_IF_ERROR(transport.health());
  return absl::OkStatus();
}

absl::Status ExpectTooLong(Transport& transport, size_t posted, uint64_t tag) {
  std::vector<char> buffer(posted);
  Completion completion;
  FSDP_RETURN_IF_ERROR(transport.PostRecv(0, tag, buffer.data(), posted, &completion));
  FSDP_RETURN_IF_ERROR(WaitFor(transport, {&completion}, absl::Seconds(30)));
  if (completion.status.ok()) {
    return absl::InternalError(absl::StrCat("receive of ", posted,
                                            " bytes got a longer message without error"));
  }
  const std::string message(completion.status.message());
  if (message.find("longer than the posted receive of " + std::to_string(posted)) ==
      std::string::npos) {
    return absl::InternalError("unexpected error: " + completion.status.ToString());
  }
  std::printf("too long (%zu): %s\n", posted, message.c_str());
  return absl::OkStatus();
}

absl::Status TooLong(Transport& transport) {
  const size_t big = (size_t{1} << 20) + 3;
  if (transport.rank() == 0) {
    std::vector<char> small(100, 'a'), large(big, 'b'), after(9, 'c');
    Completion c1, c2, c3;
    FSDP_RETURN_IF_ERROR(transport.PostSend(1, 9, small.data(), small.size(), &c1));
    FSDP_RETURN_IF_ERROR(transport.PostSend(1, 10, large.data(), large.size(), &c2));
    FSDP_RETURN_IF_ERROR(transport.PostSend(1, 11, after.data(), after.size(), &c3));
    FSDP_RETURN_IF_ERROR(WaitFor(transport, {&c1, &c2, &c3}, absl::Seconds(30)));
    // The sender's view of a truncated message is UCX's business; the sends
    // must finish, and the later message must go through.
    FSDP_RETURN_IF_ERROR(c3.status);
    Completion done;
    char byte = 0;
    FSDP_RETURN_IF_ERROR(transport.PostRecv(1, 12, &byte, 1, &done));
    FSDP_RETURN_IF_ERROR(WaitFor(transport, {&done}, absl::Seconds(30)));
    return done.status;
  }
  if (transport.rank() == 1) {
    FSDP_RETURN_IF_ERROR(ExpectTooLong(transport, 10, 9));
    FSDP_RETURN_IF_ERROR(ExpectTooLong(transport, size_t{1} << 20, 10));
    std::vector<char> after(9);
    Completion got;
    FSDP_RETURN_IF_ERROR(transport.PostRecv(0, 11, after.data(), after.size(), &got));
    FSDP_RETURN_IF_ERROR(WaitFor(transport, {&got}, absl::Seconds(30)));
    FSDP_RETURN_IF_ERROR(got.status);
    if (got.received_bytes != 9 || after[8] != 'c') {
      return absl::InternalError(absl::StrCat(
          "the message after the truncated ones is wrong: ", got.received_bytes,
          " bytes, last byte ", static_cast<int>(after[8])));
    }
    char byte = 1;
    Completion sent;
    FSDP_RETURN_IF_ERROR(transport.PostSend(0, 12, &byte, 1, &sent));
    FSDP_RETURN_IF_ERROR(WaitFor(transport, {&sent}, absl::Seconds(30)));
    return sent.status;
  }
  return absl::OkStatus();
}

absl::Status WaitForPeer(Transport& transport, int victim) {
  if (transport.rank() == victim) {
    std::printf("READY\n");
    std::fflush(stdout);
    if (std::getenv("VICTIM_LEAVES") != nullptr) return absl::OkStatus();
    absl::SleepFor(absl::Seconds(60));
    return absl::InternalError("the victim was not killed");
  }
  const char* wait_ms = std::getenv("WAIT_MS");
  const absl::Duration wait = absl::Milliseconds(wait_ms ? std::atoi(wait_ms) : 20000);
  std::vector<char> buffer(1024);
  Completion completion;
  FSDP_RETURN_IF_ERROR(transport.PostRecv(victim, 42, buffer.data(), buffer.size(), &completion));
  std::printf("WAITING\n");
  std::fflush(stdout);
  absl::Status waited = WaitFor(transport, {&completion}, wait);
  if (!waited.ok()) return waited;  // a hang: the failure detector did not fire
  std::printf("completion: %s\nhealth: %s\n", completion.status.ToString().c_str(),
              transport.health().ToString().c_str());
  if (!absl::IsUnavailable(completion.status)) {
    return absl::InternalError("expected kUnavailable, got " + completion.status.ToString());
  }
  const std::string named = absl::StrCat("rank ", victim, " ");
  if (std::string(completion.status.message()).find(named) == std::string::npos) {
    return absl::InternalError("the error does not name the peer: " +
                               completion.status.ToString());
  }
  char byte = 0;
  Completion refused;
  absl::Status post = transport.PostSend(victim, 43, &byte, 1, &refused);
  std::printf("post after: %s\n", post.ToString().c_str());
  if (post.ok()) return absl::InternalError("a send to the gone peer was accepted");
  return absl::OkStatus();
}

absl::Status StrandedSend(Transport& transport) {
  if (transport.world_size() != 3) return absl::InvalidArgumentError("needs 3 ranks");
  const char* wait_ms = std::getenv("WAIT_MS");
  const absl::Duration wait = absl::Milliseconds(wait_ms ? std::atoi(wait_ms) : 20000);
  if (transport.rank() == 2) {
    std::printf("READY\n");
    std::fflush(stdout);
    absl::SleepFor(absl::Seconds(60));
    return absl::InternalError("the victim was not killed");
  }
  if (transport.rank() == 1) {
    char byte = 0;
    Completion completion;
    FSDP_RETURN_IF_ERROR(transport.PostRecv(2, 7, &byte, 1, &completion));
    std::printf("WAITING\n");
    std::fflush(stdout);
    FSDP_RETURN_IF_ERROR(WaitFor(transport, {&completion}, wait));
    std::printf("receive from rank 2: %s\n", completion.status.ToString().c_str());
    if (!absl::IsUnavailable(completion.status)) {
      return absl::InternalError("expected kUnavailable, got " + completion.status.ToString());
    }
    std::printf("HOLDING\n");
    std::fflush(stdout);
    absl::SleepFor(absl::Seconds(60));
    return absl::InternalError("rank 1 was not killed");
  }
  auto buffer = std::make_unique<std::vector<char>>(size_t{8} << 20, 'x');
  Completion sent;
  FSDP_RETURN_IF_ERROR(transport.PostSend(1, 9, buffer->data(), buffer->size(), &sent));
  std::printf("WAITING\n");
  std::fflush(stdout);
  absl::Status waited = WaitFor(transport, {&sent}, wait);
  if (!waited.ok()) {
    return absl::InternalError(absl::StrCat(
        "the send to live rank 1 was still held by the transport after rank 2 died: ",
        waited.message()));
  }
  std::printf("send to rank 1: %s\n", sent.status.ToString().c_str());
  if (!absl::IsUnavailable(sent.status) ||
      std::string(sent.status.message()).find("rank 2 died") == std::string::npos) {
    return absl::InternalError("expected kUnavailable naming rank 2, got " +
                               sent.status.ToString());
  }
  // The completion said the transport is done with the buffer: free it and
  // keep the transport busy for a while.
  buffer.reset();
  const absl::Time until = absl::Now() + absl::Milliseconds(500);
  while (absl::Now() < until) {
    if (!transport.Progress()) {
      FSDP_RETURN_IF_ERROR(transport.BlockUntilActivity(absl::Milliseconds(10)));
    }
  }
  char byte = 0;
  Completion refused;
  absl::Status post = transport.PostSend(1, 10, &byte, 1, &refused);
  std::printf("post after: %s\n", post.ToString().c_str());
  if (post.ok()) return absl::InternalError("a send after the job failed was accepted");
  return absl::OkStatus();
}

// Blocks with a long timeout until `completion` is done or a wake-up comes;
// returns how long one BlockUntilActivity call took.
absl::Status Block(Transport& transport, const char* what, absl::Duration* took) {
  const absl::Time start = absl::Now();
  FSDP_RETURN_IF_ERROR(transport.BlockUntilActivity(absl::Seconds(30)));
  *took = absl::Now() - start;
  std::printf("%s woke after %s\n", what, absl::FormatDuration(*took).c_str());
  if (*took > absl::Seconds(10)) {
    return absl::InternalError(absl::StrCat(what, ": BlockUntilActivity did not wake"));
  }
  return absl::OkStatus();
}

absl::Status BlockScenario(Transport& transport) {
  // Interrupt from another thread.
  while (transport.Progress()) {
  }
  std::thread interrupter([&transport] {
    absl::SleepFor(absl::Milliseconds(300));
    transport.Interrupt();
  });
  absl::Duration took;
  absl::Status blocked = Block(transport, "interrupt", &took);
  interrupter.join();
  FSDP_RETURN_IF_ERROR(blocked);
  if (transport.world_size() < 2 || transport.rank() > 1) return absl::OkStatus();

  char byte = 7;
  Completion completion;
  if (transport.rank() == 1) {
    absl::SleepFor(absl::Milliseconds(500));
    FSDP_RETURN_IF_ERROR(transport.PostSend(0, 3, &byte, 1, &completion));
    return WaitFor(transport, {&completion}, absl::Seconds(30));
  }
  FSDP_RETURN_IF_ERROR(transport.PostRecv(1, 3, &byte, 1, &completion));
  const absl::Time start = absl::Now();
  int blocks = 0;
  while (!completion.done) {
    if (transport.Progress()) continue;
    FSDP_RETURN_IF_ERROR(transport.BlockUntilActivity(absl::Seconds(30)));
    ++blocks;
  }
  const absl::Duration waited = absl::Now() - start;
  std::printf("message woke the receiver after %s (%d blocking calls)\n",
              absl::FormatDuration(waited).c_str(), blocks);
  FSDP_RETURN_IF_ERROR(completion.status);
  if (waited > absl::Seconds(10)) {
    return absl::InternalError("an arriving message did not wake BlockUntilActivity");
  }
  return absl::OkStatus();
}

absl::Status Run(const std::string& scenario) {
  FSDP_ASSIGN_OR_RETURN(comm::JobEnv env, comm::JobEnvFromEnvironment());
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport,
                        comm::CreateUcxTransport(env, absl::Seconds(20)));
  if (scenario == "exchange") return Exchange(*transport);
  if (scenario == "too_long") return TooLong(*transport);
  if (scenario == "block") return BlockScenario(*transport);
  if (scenario == "stranded_send") return StrandedSend(*transport);
  if (scenario == "wait_for_peer") {
    const char* victim = std::getenv("VICTIM");
    return WaitForPeer(*transport, victim ? std::atoi(victim) : 1);
  }
  return absl::InvalidArgumentError("unknown scenario " + scenario);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s exchange|too_long|wait_for_peer|block|stranded_send\n", argv[0]);
    return 2;
  }
  absl::Status status = Run(argv[1]);
  if (!status.ok()) {
    std::printf("FAIL: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
