// File: comm/rendezvous/framed_socket.h
//
// TCP plumbing for the rendezvous store: listening on MASTER_PORT, connecting
// with retries until a deadline, and length-prefixed messages (4-byte
// little-endian length, then the bytes of a serialized protobuf) on a
// non-blocking socket. Every wait takes a deadline.
#ifndef COMM_RENDEZVOUS_FRAMED_SOCKET_H_
#define COMM_RENDEZVOUS_FRAMED_SOCKET_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace google::protobuf {
class MessageLite;
}

namespace comm {

// Frames larger than this are refused as garbage (a roster of 2^20 UCX
// addresses of ~1 KiB still fits).
inline constexpr size_t kMaxFrameBytes = size_t{1} << 30;

// Listens at `bind_ip`:`port` (dotted IPv4; "0.0.0.0" for every interface;
// SO_REUSEADDR, so a port in TIME_WAIT is fine). A port that another process
// listens on gives kUnavailable "MASTER_PORT N is in use on this host; choose
// another"; an address that is not this host's gives kInvalidArgument.
absl::StatusOr<int> ListenOnPort(const std::string& bind_ip, int port);

// Connects to host:port, retrying refused/unreachable attempts every ~100 ms
// until `deadline`. The error names host:port, the time waited and the last
// failure.
absl::StatusOr<int> ConnectWithRetry(const std::string& host, int port,
                                     absl::Time deadline);

// A connected socket carrying length-prefixed messages. Owns the fd.
class FramedSocket {
 public:
  explicit FramedSocket(int fd);  // makes `fd` non-blocking
  ~FramedSocket();
  FramedSocket(const FramedSocket&) = delete;
  FramedSocket& operator=(const FramedSocket&) = delete;

  int fd() const { return fd_; }

  // Frames announcing more than this are an error as soon as their length
  // arrives (kMaxFrameBytes unless lowered; the store lowers it for what
  // clients send, so that a stranger cannot make it buffer a gigabyte).
  void set_max_frame_bytes(size_t max_frame_bytes) { max_frame_bytes_ = max_frame_bytes; }

  // Sends one message, waiting for socket space until `deadline`.
  absl::Status Write(const google::protobuf::MessageLite& message, absl::Time deadline);

  // Reads whatever is available without blocking and appends each complete
  // frame to `frames`. Returns true while the connection is open, false once
  // the peer closed it (or it broke); frames read before that are returned.
  // A frame over the limit (set_max_frame_bytes) is kDataLoss, reported
  // before more than one read chunk beyond its header is buffered. At most
  // about `max_bytes` (one read chunk more) are read per call; what is left
  // stays in the kernel for the next call.
  absl::StatusOr<bool> ReadAvailable(std::vector<std::string>* frames,
                                     size_t max_bytes = SIZE_MAX);

  // Waits until one frame arrives. kDeadlineExceeded at `deadline`,
  // kUnavailable if the peer closed the connection first.
  absl::StatusOr<std::string> ReadFrame(absl::Time deadline);

  // Closes the connection now (the destructor does it too).
  void Close();

 private:
  bool TakeFrame(std::string* frame);  // pops one complete frame from buffer_

  int fd_;
  size_t max_frame_bytes_ = kMaxFrameBytes;
  std::string buffer_;      // bytes read but not yet returned as frames
  std::vector<std::string> ready_;  // frames read ahead by ReadFrame
};

// poll() for `events` on `fd` until `deadline`; true if ready.
bool WaitForFd(int fd, short events, absl::Time deadline);

}  // namespace comm

#endif  // COMM_RENDEZVOUS_FRAMED_SOCKET_H_
