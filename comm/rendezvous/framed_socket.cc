// File: comm/rendezvous/framed_socket.cc
#include "comm/rendezvous/framed_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "google/protobuf/message_lite.h"

namespace comm {
namespace {

void SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

int MillisUntil(absl::Time deadline) {
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

// One non-blocking connect attempt, waiting at most until `deadline`.
// Returns the fd, or -1 with `error` set.
int TryConnect(const sockaddr* address, socklen_t length, absl::Time deadline,
               std::string* error) {
  int fd = socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = absl::StrCat("socket: ", strerror(errno));
    return -1;
  }
  SetNonBlocking(fd);
  int rc = connect(fd, address, length);
  if (rc != 0 && errno != EINPROGRESS) {
    *error = strerror(errno);
    close(fd);
    return -1;
  }
  if (rc != 0) {
    if (!WaitForFd(fd, POLLOUT, deadline)) {
      *error = "connect attempt timed out";
      close(fd);
      return -1;
    }
    int so_error = 0;
    socklen_t so_length = sizeof(so_error);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &so_length);
    if (so_error != 0) {
      *error = strerror(so_error);
      close(fd);
      return -1;
    }
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

bool WaitForFd(int fd, short events, absl::Time deadline) {
  while (true) {
    pollfd entry = {fd, events, 0};
    int rc = poll(&entry, 1, MillisUntil(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

absl::StatusOr<int> ListenOnPort(const std::string& bind_ip, int port) {
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, bind_ip.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on '", bind_ip, "': not an IPv4 address"));
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    int error = errno;
    close(fd);
    if (error == EADDRINUSE) {
      return absl::UnavailableError(absl::StrCat(
          "MASTER_PORT ", port, " is in use on this host; choose another"));
    }
    if (error == EADDRNOTAVAIL) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot listen on ", bind_ip, ":", port, ": ", bind_ip,
          " is not an address of this host"));
    }
    return absl::InternalError(absl::StrCat("cannot bind MASTER_PORT ", port, " on ",
                                            bind_ip, ": ", strerror(error)));
  }
  if (listen(fd, 1024) != 0) {
    int error = errno;
    close(fd);
    return absl::InternalError(
        absl::StrCat("cannot listen on MASTER_PORT ", port, ": ", strerror(error)));
  }
  SetNonBlocking(fd);
  return fd;
}

absl::StatusOr<int> ConnectWithRetry(const std::string& host, int port,
                                     absl::Time deadline) {
  const absl::Time start = absl::Now();
  std::string last_error = "no attempt made";
  while (true) {
    addrinfo hints = {};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* results = nullptr;
    int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &results);
    if (rc != 0) {
      last_error = absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc));
    } else {
      for (addrinfo* entry = results; entry != nullptr; entry = entry->ai_next) {
        absl::Time attempt_deadline = std::min(deadline, absl::Now() + absl::Seconds(2));
        int fd = TryConnect(entry->ai_addr, entry->ai_addrlen, attempt_deadline,
                            &last_error);
        if (fd >= 0) {
          freeaddrinfo(results);
          return fd;
        }
      }
      freeaddrinfo(results);
    }
    if (absl::Now() + absl::Milliseconds(100) >= deadline) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "could not reach the rendezvous store at ", host, ":", port, " after ",
      absl::FormatDuration(absl::Now() - start), " (last error: ", last_error,
      "); rank 0 hosts it: check that rank 0 is running and that MASTER_ADDR and "
      "MASTER_PORT point at it"));
}

FramedSocket::FramedSocket(int fd) : fd_(fd) { SetNonBlocking(fd_); }

FramedSocket::~FramedSocket() { Close(); }

void FramedSocket::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::Status FramedSocket::Write(const google::protobuf::MessageLite& message,
                                 absl::Time deadline) {
  if (fd_ < 0) return absl::FailedPreconditionError("socket already closed");
  std::string body = message.SerializeAsString();
  uint32_t length = static_cast<uint32_t>(body.size());
  std::string wire(4, '\0');
  for (int i = 0; i < 4; ++i) wire[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  wire += body;
  size_t sent = 0;
  while (sent < wire.size()) {
    ssize_t n = send(fd_, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitForFd(fd_, POLLOUT, deadline)) {
        return absl::DeadlineExceededError("timed out sending to the rendezvous peer");
      }
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return absl::UnavailableError(
          absl::StrCat("connection lost while sending: ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

bool FramedSocket::TakeFrame(std::string* frame) {
  if (buffer_.size() < 4) return false;
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) {
    length |= static_cast<uint32_t>(static_cast<unsigned char>(buffer_[i])) << (8 * i);
  }
  if (buffer_.size() < 4 + static_cast<size_t>(length)) return false;
  *frame = buffer_.substr(4, length);
  buffer_.erase(0, 4 + static_cast<size_t>(length));
  return true;
}

absl::StatusOr<bool> FramedSocket::ReadAvailable(std::vector<std::string>* frames,
                                                 size_t max_bytes) {
  for (std::string& frame : ready_) frames->push_back(std::move(frame));
  ready_.clear();
  if (fd_ < 0) return false;
  bool open = true;
  char chunk[65536];
  std::string frame;
  size_t read_bytes = 0;
  while (read_bytes < max_bytes) {
    ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n > 0) {
      read_bytes += static_cast<size_t>(n);
      buffer_.append(chunk, static_cast<size_t>(n));
      // Each frame's announced length is checked before it is taken, chunk
      // by chunk: the buffer never holds more than one chunk beyond a frame
      // the limit allows, and no frame over the limit is ever returned.
      while (buffer_.size() >= 4) {
        uint32_t length = 0;
        for (int i = 0; i < 4; ++i) {
          length |= static_cast<uint32_t>(static_cast<unsigned char>(buffer_[i])) << (8 * i);
        }
        if (length > max_frame_bytes_) {
          return absl::DataLossError(absl::StrCat(
              "received a frame announcing ", length, " bytes (limit ", max_frame_bytes_,
              "); the peer is not speaking the rendezvous protocol"));
        }
        if (!TakeFrame(&frame)) break;
        frames->push_back(std::move(frame));
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    open = false;  // orderly close (0) or a broken connection
    break;
  }
  return open;
}

absl::StatusOr<std::string> FramedSocket::ReadFrame(absl::Time deadline) {
  while (true) {
    std::vector<std::string> frames;
    absl::StatusOr<bool> open = ReadAvailable(&frames);
    if (!open.ok()) return open.status();
    if (!frames.empty()) {
      std::string first = std::move(frames.front());
      ready_.assign(std::make_move_iterator(frames.begin() + 1),
                    std::make_move_iterator(frames.end()));
      return first;
    }
    if (!*open) return absl::UnavailableError("the connection was closed by the peer");
    if (!WaitForFd(fd_, POLLIN, deadline)) {
      return absl::DeadlineExceededError("timed out waiting for a message");
    }
  }
}

}  // namespace comm
