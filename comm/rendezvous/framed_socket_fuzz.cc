// File: comm/rendezvous/framed_socket_fuzz.cc
//
// libFuzzer target for the store's framed protocol (framed_socket.h): the
// input's first byte picks a frame limit (up to 255 * 64 bytes), the rest is
// what a client sends, written into one end of a socket pair and read by
// FramedSocket::ReadAvailable on the other, as the store reads it. Checked
// against an independent split of the same bytes: the frames returned are the
// input's complete frames in order; an oversized announcement is an error,
// never a buffered frame; every frame is then parsed as a ClientMessage (the
// store's next step), which must not crash whatever it holds.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/rendezvous/framed_socket.h"
#include "proto/rendezvous.pb.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 60000) return 0;  // one socket buffer, no blocking
  const size_t limit = size_t{data[0]} * 64;
  const std::string wire(reinterpret_cast<const char*>(data) + 1, size - 1);

  // The reference: complete frames until the first over the limit.
  std::vector<std::string> expected;
  bool expect_error = false;
  size_t at = 0;
  while (wire.size() - at >= 4) {
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) {
      length |= static_cast<uint32_t>(static_cast<unsigned char>(wire[at + i])) << (8 * i);
    }
    if (length > limit) {
      expect_error = true;
      break;
    }
    if (wire.size() - at - 4 < length) break;
    expected.push_back(wire.substr(at + 4, length));
    at += 4 + length;
  }

  int fds[2];
  Check(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  size_t sent = 0;
  while (sent < wire.size()) {
    ssize_t n = write(fds[1], wire.data() + sent, wire.size() - sent);
    Check(n > 0);
    sent += static_cast<size_t>(n);
  }
  close(fds[1]);
  comm::FramedSocket socket(fds[0]);
  socket.set_max_frame_bytes(limit);
  std::vector<std::string> frames;
  absl::StatusOr<bool> open = socket.ReadAvailable(&frames);
  if (expect_error) {
    Check(!open.ok());
    Check(frames.size() <= expected.size());
  } else {
    Check(open.ok() && !*open);  // the writer closed
    Check(frames == expected);
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    Check(frames[i] == expected[i]);
    Check(frames[i].size() <= limit);
    fsdp::proto::ClientMessage message;
    (void)message.ParseFromString(frames[i]);
  }
  return 0;
}
