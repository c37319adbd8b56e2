// File: comm/rendezvous/fuzz_wire.h
//
// For the rendezvous fuzz targets: writes `bytes` as one frame of the
// store's wire format (a 4-byte little-endian length, then the bytes) on a
// blocking socket, whatever the bytes are, so a target can send frames that
// do not parse. A peer that closed ends the write quietly: closing on bad
// input is what the targets provoke.
#ifndef COMM_RENDEZVOUS_FUZZ_WIRE_H_
#define COMM_RENDEZVOUS_FUZZ_WIRE_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace fuzz {

inline void SendRawFrame(int fd, const std::string& bytes) {
  std::string wire(4, '\0');
  const uint32_t length = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) wire[i] = static_cast<char>(length >> (8 * i));
  wire += bytes;
  size_t sent = 0;
  while (sent < wire.size()) {
    const ssize_t n = send(fd, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace fuzz

#endif  // COMM_RENDEZVOUS_FUZZ_WIRE_H_
