// File: comm/ucx/ucx_transport.cc
#include "comm/ucx/ucx_transport.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/liveness.h"
#include "comm/rendezvous/rendezvous.h"
#include "comm/ucx/peer_copy_guard.h"
#include "comm/ucx/ucx_failure.h"
#include "comm/ucx/ucx_log_filter.h"

namespace comm {
namespace {

constexpr int kRankBits = 64 - kTransportTagBits;  // 20

uint64_t UcxTag(int source_rank, uint64_t tag) {
  return (static_cast<uint64_t>(source_rank) << kTransportTagBits) | tag;
}

constexpr uint64_t kFullTagMask = ~uint64_t{0};

enum class PeerState { kAlive, kLeft, kDead };

// How long a failed UCX call waits for the failure detector to name the rank
// that died first (see AwaitRootCause). Over loopback the detector usually
// answers within a few ms; this is for a loaded machine. Only a failure that
// turns out not to be a peer's death (kInternal) waits it out.
constexpr absl::Duration kRootCauseWait = absl::Seconds(2);

class UcxTransport final : public Transport {
 public:
  UcxTransport(const JobEnv& env)
      : env_(env), peers_(env.world_size, PeerState::kAlive), left_at_(env.world_size),
        peer_failure_(env.world_size) {}
  ~UcxTransport() override;

  absl::Status Init(const UcxTransportOptions& options);

  int rank() const override { return env_.rank; }
  int world_size() const override { return env_.world_size; }
  int HostIndex(int rank) const override {
    return rank >= 0 && rank < static_cast<int>(host_index_.size()) ? host_index_[rank] : 0;
  }
  absl::Status PostSend(int peer, uint64_t tag, const void* data, size_t num_bytes,
                        Completion* completion) override;
  absl::Status PostRecv(int peer, uint64_t tag, void* data, size_t num_bytes,
                        Completion* completion) override;
  bool Progress() override;
  absl::Status BlockUntilActivity(absl::Duration timeout) override;
  void Interrupt() override;
  absl::Status health() const override { return health_.ok() ? stopped_ : health_; }
  void Abort(const absl::Status& why) override { Stop(why); }
  CallerLiveness* caller_liveness() override { return &liveness_; }

 private:
  // A UCX operation in flight. Lives in operations_ until UCX is done with
  // its request, which may be after the user's Completion was finished (an
  // operation abandoned because its peer died or left).
  struct Operation {
    Completion* completion = nullptr;  // null once the user was told
    int peer = 0;
    uint64_t tag = 0;
    bool is_recv = false;
    size_t posted_bytes = 0;
    absl::Time posted_at;
    void* request = nullptr;
    bool ucx_done = false;
    ucs_status_t ucx_status = UCS_OK;
    ucp_tag_recv_info_t info = {};
  };

  // A self-send that arrived before its receive (its bytes copied).
  struct SelfRecv {
    void* data;
    size_t num_bytes;
    Completion* completion;
  };

  static void OnSendDone(void* request, ucs_status_t status, void* user_data);
  static void OnRecvDone(void* request, ucs_status_t status,
                         const ucp_tag_recv_info_t* info, void* user_data);

  // Refuses a post with a dead peer (naming its failure), and any post to
  // another rank once the transport has stopped (Stop).
  absl::Status CheckPost(const char* op, int peer, uint64_t tag) const;
  absl::Status DeadPeerError(const char* op, int peer, uint64_t tag) const;
  void Finish(Completion* completion, absl::Status status, size_t received_bytes);
  void FinishOperation(Operation& op, absl::Status status);
  absl::Status StatusOf(const Operation& op);
  bool ReapOperations();
  // Waits (at most kRootCauseWait per burst of failures) until the failure
  // detector knows of a dead or hung rank, or `peer` (if >= 0) is no longer
  // alive. Returns how long it waited.
  absl::Duration AwaitRootCause(int peer);
  // Any failed UCX call on `operation` with `peer` (-1: worker-wide): waits
  // for the root cause, then classifies (comm/ucx/ucx_failure.h).
  absl::Status FailureOf(const std::string& operation, int peer, ucs_status_t status);
  bool HandlePeerEvents();
  bool ExpireOperationsWithLeftPeers();
  // `peer` died or hung (`kind`: "died" / "hung"; `what`: "rank 3 is hung:
  // ..."): kUnavailable `what` plus who was told becomes its operations'
  // status (and health() if it is the first failure).
  void MarkPeerFailed(int peer, const char* kind, const std::string& what);
  // The job's first failure, as this rank saw it: health() and
  // on_peer_failure_, which gets `what`.
  void SetFirstFailure(int culprit, const char* kind, const absl::Status& why,
                       const std::string& what);
  // The store declared this very rank hung.
  void MarkSelfHung(const std::string& reason);
  // Fail-stop, at the job's first failure (SetFirstFailure) or on Abort:
  // every pending operation finishes with `why` and the UCX worker is never
  // progressed again, so UCX cannot touch a buffer whose completion is done
  // (no send can be cancelled otherwise; see Abort in comm/transport.h).
  void Stop(const absl::Status& why);
  std::string Describe(const Operation& op) const;
  void CloseEndpoints();

  JobEnv env_;
  std::vector<PeerState> peers_;
  std::vector<absl::Time> left_at_;
  std::vector<absl::Status> peer_failure_;  // why peers_[p] is kDead
  std::function<void(const PeerFailure&)> on_peer_failure_;  // UcxTransportOptions
  absl::Status health_;
  absl::Status stopped_;  // why Stop() was called; OK while running
  CallerLiveness liveness_;  // reported by the heartbeats

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> endpoints_;  // endpoints_[peer]; null for self
  std::unique_ptr<Rendezvous> rendezvous_;
  std::vector<int> host_index_;  // HostIndex(rank), from the rendezvous roster
  int epoll_fd_ = -1;
  int interrupt_fd_ = -1;
  int worker_fd_ = -1;

  std::list<Operation> operations_;
  std::map<uint64_t, std::deque<std::string>> self_unexpected_;  // tag -> payloads
  std::map<uint64_t, std::deque<SelfRecv>> self_posted_;         // tag -> receives
  bool finished_outside_progress_ = false;
  // End of the current root-cause wait; failures close together share it.
  absl::Time root_cause_deadline_ = absl::InfinitePast();
};

absl::Status UcxError(const std::string& what, ucs_status_t status) {
  return absl::InternalError(
      absl::StrCat(what, " failed: ", ucs_status_string(status)));
}

absl::Status UcxTransport::Init(const UcxTransportOptions& options) {
  const std::string me = absl::StrCat("rank ", env_.rank);
  if (env_.world_size > (1 << kRankBits)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world size ", env_.world_size, " exceeds the UCX transport's limit of ",
        1 << kRankBits, " ranks (the source rank has ", kRankBits, " tag bits)"));
  }
  interrupt_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (interrupt_fd_ < 0 || epoll_fd_ < 0) {
    return absl::InternalError(absl::StrCat(me, ": cannot create eventfd/epoll: ",
                                            strerror(errno)));
  }
  epoll_event event = {};
  event.events = EPOLLIN;
  event.data.fd = interrupt_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, interrupt_fd_, &event);
  endpoints_.assign(env_.world_size, nullptr);
  on_peer_failure_ = options.on_peer_failure;
  if (env_.world_size == 1) return absl::OkStatus();

  // A peer that dies mid-transfer must give us an error, not abort us.
  InstallPeerCopyGuard();
  // What UCX logs once this transport has stopped after a failure is
  // demoted (Stop); healthy warnings stay visible.
  FSDP_RETURN_IF_ERROR(InstallUcxLogFilter());
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return UcxError(me + ": ucp_config_read", status);
  ucp_params_t params = {};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (status != UCS_OK) return UcxError(me + ": ucp_init", status);

  ucp_worker_params_t worker_params = {};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  status = ucp_worker_create(context_, &worker_params, &worker_);
  if (status != UCS_OK) return UcxError(me + ": ucp_worker_create", status);
  status = ucp_worker_get_efd(worker_, &worker_fd_);
  if (status != UCS_OK) return UcxError(me + ": ucp_worker_get_efd", status);
  event.data.fd = worker_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, worker_fd_, &event);

  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  status = ucp_worker_get_address(worker_, &address, &address_length);
  if (status != UCS_OK) return UcxError(me + ": ucp_worker_get_address", status);
  std::string blob(reinterpret_cast<const char*>(address), address_length);
  ucp_worker_release_address(worker_, address);

  HangDetection hang_detection;
  hang_detection.bound = options.hang_timeout;
  hang_detection.liveness = &liveness_;
  FSDP_ASSIGN_OR_RETURN(rendezvous_, Rendezvous::Join(env_, blob, options.rendezvous_timeout,
                                                      hang_detection));
  // Host names to indices, numbered in order of first appearance.
  std::vector<std::string> names;
  for (const std::string& host : rendezvous_->hosts()) {
    auto it = std::find(names.begin(), names.end(), host);
    host_index_.push_back(static_cast<int>(it - names.begin()));
    if (it == names.end()) names.push_back(host);
  }
  event.data.fd = rendezvous_->failure_detector_fd();
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event.data.fd, &event);

  for (int peer = 0; peer < env_.world_size; ++peer) {
    if (peer == env_.rank) continue;
    ucp_ep_params_t ep_params = {};
    // No UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE: see the header (PEER mode
    // would force TCP).
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(
        rendezvous_->blobs()[peer].data());
    status = ucp_ep_create(worker_, &ep_params, &endpoints_[peer]);
    if (status != UCS_OK) {
      endpoints_[peer] = nullptr;
      // A peer that finished (or died) right after the rendezvous has already
      // torn down its shared memory. That is not our failure: wait for the
      // failure detector to say so, and leave that peer unconnected (a dead
      // one then fails this rank's first operation with it, by name).
      absl::Status failure =
          FailureOf(absl::StrCat("ucp_ep_create to rank ", peer, " on rank ", env_.rank), peer,
                    status);
      if (peers_[peer] == PeerState::kAlive) return failure;
    }
  }
  return absl::OkStatus();
}

void UcxTransport::OnSendDone(void* /*request*/, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Operation*>(user_data);
  op->ucx_done = true;
  op->ucx_status = status;
}

void UcxTransport::OnRecvDone(void* /*request*/, ucs_status_t status,
                              const ucp_tag_recv_info_t* info, void* user_data) {
  auto* op = static_cast<Operation*>(user_data);
  op->ucx_done = true;
  op->ucx_status = status;
  if (info != nullptr) op->info = *info;
}

absl::Status UcxTransport::CheckPost(const char* op, int peer, uint64_t tag) const {
  if (peer < 0 || peer >= env_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", env_.rank, ": ", op, " with peer ", peer, ", outside [0, ",
        env_.world_size, ")"));
  }
  if (tag > kMaxTransportTag) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", env_.rank, ": ", op, " to/from rank ", peer, " with tag ", tag,
        " above kMaxTransportTag (", kMaxTransportTag, ")"));
  }
  if (peers_[peer] == PeerState::kDead) return DeadPeerError(op, peer, tag);
  if (!stopped_.ok() && peer != env_.rank) {
    return absl::Status(stopped_.code(),
                        absl::StrCat("rank ", env_.rank, ": cannot ", op, " rank ", peer,
                                     " tag ", tag, ": the transport has stopped: ",
                                     stopped_.message()));
  }
  return absl::OkStatus();
}

absl::Status UcxTransport::DeadPeerError(const char* op, int peer, uint64_t tag) const {
  return absl::UnavailableError(absl::StrCat("rank ", env_.rank, ": cannot ", op, " rank ",
                                             peer, " tag ", tag, ": ",
                                             peer_failure_[peer].message()));
}

void UcxTransport::Finish(Completion* completion, absl::Status status,
                          size_t received_bytes) {
  completion->status = std::move(status);
  completion->received_bytes = received_bytes;
  completion->done = true;
}

std::string UcxTransport::Describe(const Operation& op) const {
  return absl::StrCat(op.is_recv ? "receive of " : "send of ", op.posted_bytes,
                      " bytes ", op.is_recv ? "from" : "to", " rank ", op.peer, " tag ",
                      op.tag, " on rank ", env_.rank);
}

absl::Status UcxTransport::PostSend(int peer, uint64_t tag, const void* data,
                                    size_t num_bytes, Completion* completion) {
  FSDP_RETURN_IF_ERROR(CheckPost("send to", peer, tag));
  if (peers_[peer] == PeerState::kLeft) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", env_.rank, ": cannot send to rank ", peer, " tag ", tag, ": rank ", peer,
        " has shut down (it left the job)",
        health_.ok() ? "" : absl::StrCat("; first failure in the job: ", health_.message())));
  }
  completion->done = false;
  completion->status = absl::OkStatus();
  completion->received_bytes = 0;
  if (peer == env_.rank) {
    auto posted = self_posted_.find(tag);
    if (posted != self_posted_.end() && !posted->second.empty()) {
      SelfRecv recv = posted->second.front();
      posted->second.pop_front();
      if (num_bytes > recv.num_bytes) {
        Finish(recv.completion,
               absl::InvalidArgumentError(absl::StrCat(
                   "rank ", env_.rank, ": a message of ", num_bytes,
                   " bytes from rank ", peer, " tag ", tag,
                   " is longer than the posted receive of ", recv.num_bytes, " bytes")),
               0);
      } else {
        if (num_bytes > 0) std::memcpy(recv.data, data, num_bytes);
        Finish(recv.completion, absl::OkStatus(), num_bytes);
      }
    } else {
      self_unexpected_[tag].emplace_back(static_cast<const char*>(data), num_bytes);
    }
    Finish(completion, absl::OkStatus(), 0);
    finished_outside_progress_ = true;
    return absl::OkStatus();
  }

  operations_.emplace_back();
  Operation& op = operations_.back();
  op.completion = completion;
  op.peer = peer;
  op.tag = tag;
  op.posted_bytes = num_bytes;
  op.posted_at = absl::Now();
  ucp_request_param_t param = {};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxTransport::OnSendDone;
  param.user_data = &op;
  ucs_status_ptr_t request =
      ucp_tag_send_nbx(endpoints_[peer], data, num_bytes, UcxTag(env_.rank, tag), &param);
  if (UCS_PTR_IS_ERR(request)) {
    // Popped before waiting for the root cause: the completion must stay
    // untouched when PostSend fails (the detector would finish it).
    operations_.pop_back();
    return FailureOf(absl::StrCat("posting a send of ", num_bytes, " bytes to rank ", peer,
                                  " tag ", tag, " on rank ", env_.rank),
                     peer, UCS_PTR_STATUS(request));
  }
  if (request == nullptr) {  // completed in place
    operations_.pop_back();
    Finish(completion, absl::OkStatus(), 0);
    finished_outside_progress_ = true;
    return absl::OkStatus();
  }
  op.request = request;
  return absl::OkStatus();
}

absl::Status UcxTransport::PostRecv(int peer, uint64_t tag, void* data,
                                    size_t num_bytes, Completion* completion) {
  FSDP_RETURN_IF_ERROR(CheckPost("receive from", peer, tag));
  completion->done = false;
  completion->status = absl::OkStatus();
  completion->received_bytes = 0;
  if (peer == env_.rank) {
    auto unexpected = self_unexpected_.find(tag);
    if (unexpected != self_unexpected_.end() && !unexpected->second.empty()) {
      std::string payload = std::move(unexpected->second.front());
      unexpected->second.pop_front();
      if (payload.size() > num_bytes) {
        Finish(completion,
               absl::InvalidArgumentError(absl::StrCat(
                   "rank ", env_.rank, ": a message of ", payload.size(),
                   " bytes from rank ", peer, " tag ", tag,
                   " is longer than the posted receive of ", num_bytes, " bytes")),
               0);
      } else {
        if (!payload.empty()) std::memcpy(data, payload.data(), payload.size());
        Finish(completion, absl::OkStatus(), payload.size());
      }
      finished_outside_progress_ = true;
    } else {
      self_posted_[tag].push_back({data, num_bytes, completion});
    }
    return absl::OkStatus();
  }

  // Receives from a peer that left are still posted: its last messages may be
  // waiting in UCX's unexpected queue. ExpireOperationsWithLeftPeers() ends
  // them after kLeftPeerGrace.
  operations_.emplace_back();
  Operation& op = operations_.back();
  op.completion = completion;
  op.peer = peer;
  op.tag = tag;
  op.is_recv = true;
  op.posted_bytes = num_bytes;
  op.posted_at = absl::Now();
  ucp_request_param_t param = {};
  // NO_IMM_CMPL: UCX 1.13 does not fill recv_info when a receive matches an
  // unexpected message in place (received_bytes came out 0), so always take
  // the request and its callback, which carries the length.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = &UcxTransport::OnRecvDone;
  param.user_data = &op;
  ucs_status_ptr_t request = ucp_tag_recv_nbx(worker_, data, num_bytes,
                                              UcxTag(peer, tag), kFullTagMask, &param);
  if (UCS_PTR_IS_ERR(request)) {
    operations_.pop_back();
    return FailureOf(absl::StrCat("posting a receive of ", num_bytes, " bytes from rank ",
                                  peer, " tag ", tag, " on rank ", env_.rank),
                     peer, UCS_PTR_STATUS(request));
  }
  // The callback may already have run (a message was waiting); Progress()
  // reaps the operation either way.
  op.request = request;
  if (op.ucx_done) finished_outside_progress_ = true;
  return absl::OkStatus();
}

absl::Status UcxTransport::StatusOf(const Operation& op) {
  switch (op.ucx_status) {
    case UCS_OK:
      return absl::OkStatus();
    case UCS_ERR_MESSAGE_TRUNCATED:
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", env_.rank, ": a message from rank ", op.peer, " tag ", op.tag,
          " is longer than the posted receive of ", op.posted_bytes,
          " bytes; post a larger buffer"));
    default:
      // Every other status, UCS_ERR_CANCELED included (the requests this
      // transport cancels were finished first, so UCX cancelled this one),
      // may be how a peer's death surfaced: see comm/ucx/ucx_failure.h.
      return FailureOf(Describe(op), op.peer, op.ucx_status);
  }
}

absl::Status UcxTransport::FailureOf(const std::string& operation, int peer,
                                     ucs_status_t status) {
  KnownFailures known;
  known.waited = AwaitRootCause(peer);
  known.health = health_;
  known.peer_left = peer >= 0 && peers_[peer] == PeerState::kLeft;
  // What the peer-copy guard saw, if this looks like its kind of failure.
  std::string detail = status == UCS_ERR_IO_ERROR && PeerCopyFailureCount() > 0
                           ? LastPeerCopyFailure()
                           : "";
  return ClassifyUcxFailure(operation, peer, status, detail, known);
}

void UcxTransport::FinishOperation(Operation& op, absl::Status status) {
  if (op.completion == nullptr) return;
  size_t received = (status.ok() && op.is_recv) ? op.info.length : 0;
  Finish(op.completion, std::move(status), received);
  op.completion = nullptr;
}

absl::Duration UcxTransport::AwaitRootCause(int peer) {
  // A UCX call failed, most likely because some peer's process is gone. Often
  // that peer only exited because an earlier rank died; the failure detector
  // says which, a moment later. Wait briefly for it so the error names the
  // root cause. A burst of failures (every operation with a dead peer) shares
  // one wait instead of waiting kRootCauseWait each.
  const absl::Time start = absl::Now();
  if (start > root_cause_deadline_ + kRootCauseWait) root_cause_deadline_ = start + kRootCauseWait;
  auto known = [&] {
    return !health_.ok() || (peer >= 0 && peers_[peer] != PeerState::kAlive);
  };
  while (!known() && absl::Now() < root_cause_deadline_ && rendezvous_ != nullptr &&
         rendezvous_->failure_detector_fd() >= 0) {
    HandlePeerEvents();
    if (known()) break;
    pollfd fd = {rendezvous_->failure_detector_fd(), POLLIN, 0};
    poll(&fd, 1, 10);
  }
  return absl::Now() - start;
}

bool UcxTransport::ReapOperations() {
  bool any = false;
  for (auto it = operations_.begin(); it != operations_.end();) {
    if (!it->ucx_done) {
      ++it;
      continue;
    }
    if (it->completion != nullptr) {
      FinishOperation(*it, StatusOf(*it));
      any = true;
    }
    if (it->request != nullptr) ucp_request_free(it->request);
    it = operations_.erase(it);
  }
  return any;
}

void UcxTransport::Stop(const absl::Status& why) {
  if (!stopped_.ok()) return;
  stopped_ = why.ok() ? absl::InternalError("stopped without a reason") : why;
  // From here UCX talks about the wreck (unmatched messages, requests never
  // returned at ucp_worker_destroy), not news: issue 37, comm/ucx/ucx_log_filter.h.
  QuietUcxLogAfterFailure();
  // The requests stay with UCX (freed, callbacks off, in the destructor);
  // their buffers are safe because nothing progresses the worker any more.
  for (Operation& op : operations_) FinishOperation(op, stopped_);
  finished_outside_progress_ = true;
}

void UcxTransport::SetFirstFailure(int culprit, const char* kind, const absl::Status& why,
                                   const std::string& what) {
  if (!health_.ok()) return;
  health_ = why;
  if (on_peer_failure_) on_peer_failure_(PeerFailure{culprit, kind, what});
  // One failure stops the job: whatever this rank still had in flight can
  // no longer finish correctly.
  Stop(why);
}

void UcxTransport::MarkPeerFailed(int peer, const char* kind, const std::string& what) {
  if (peers_[peer] == PeerState::kDead) return;
  peers_[peer] = PeerState::kDead;
  const absl::Status why =
      absl::UnavailableError(absl::StrCat(what, " (reported to rank ", env_.rank, ")"));
  peer_failure_[peer] = why;
  SetFirstFailure(peer, kind, why, what);
}

void UcxTransport::MarkSelfHung(const std::string& reason) {
  absl::Status status = absl::UnavailableError(absl::StrCat(
      "rank ", env_.rank, " (this rank) was declared hung and is out of the job: ", reason));
  SetFirstFailure(env_.rank, "hung", status, reason);
}

bool UcxTransport::HandlePeerEvents() {
  if (rendezvous_ == nullptr) return false;
  const int fd_before = rendezvous_->failure_detector_fd();
  std::vector<PeerEvent> events = rendezvous_->PollPeerEvents();
  if (fd_before >= 0 && rendezvous_->failure_detector_fd() < 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd_before, nullptr);
  }
  for (const PeerEvent& event : events) {
    if (event.kind == PeerEvent::Kind::kHung && event.rank == env_.rank) {
      MarkSelfHung(event.reason);
      continue;
    }
    if (event.rank == env_.rank) continue;
    if (event.kind == PeerEvent::Kind::kHung) {
      MarkPeerFailed(event.rank, "hung", event.reason);
    } else if (event.kind == PeerEvent::Kind::kDied) {
      MarkPeerFailed(event.rank, "died",
                     event.rank == 0
                         ? absl::StrCat("rank 0 died: the connection to its rendezvous store at ",
                                        rendezvous_->store_address(),
                                        " dropped without a goodbye")
                         : absl::StrCat("rank ", event.rank,
                                        " died: its connection to the rendezvous store "
                                        "on rank 0 dropped without a goodbye"));
    } else if (peers_[event.rank] == PeerState::kAlive) {
      peers_[event.rank] = PeerState::kLeft;
      left_at_[event.rank] = absl::Now();
      // Its goodbye (over the store's TCP connection) can overtake UCX's own
      // acknowledgement of a send it already took: a rank's last all-gather
      // send often completes only after the peer, done, has left. So sends
      // to it get the same grace as receives from it
      // (ExpireOperationsWithLeftPeers); new sends fail at once (PostSend).
    }
  }
  return !events.empty();
}

bool UcxTransport::ExpireOperationsWithLeftPeers() {
  bool any = false;
  const absl::Time now = absl::Now();
  for (Operation& op : operations_) {
    if (op.completion == nullptr || op.ucx_done || peers_[op.peer] != PeerState::kLeft) {
      continue;
    }
    if (now < std::max(left_at_[op.peer], op.posted_at) + kLeftPeerGrace) continue;
    absl::Status expired = absl::UnavailableError(
        op.is_recv ? absl::StrCat("rank ", op.peer, " shut down (said goodbye) while rank ",
                                  env_.rank, " still waited for a ", op.posted_bytes,
                                  "-byte message from it with tag ", op.tag)
                   : absl::StrCat("rank ", op.peer, " shut down (said goodbye) before rank ",
                                  env_.rank, "'s send of ", op.posted_bytes, " bytes with tag ",
                                  op.tag, " to it completed"));
    any = true;
    if (op.is_recv) {
      // Nothing matched it yet (the usual case): cancelling takes it out of
      // UCX at once.
      ucp_request_cancel(worker_, op.request);
      if (op.ucx_done) {
        FinishOperation(op, expired);
        continue;
      }
    }
    // A send (UCX cannot cancel it), or a receive already matched and under
    // way: only stopping guarantees UCX will not touch the buffer later.
    Stop(expired);
    break;
  }
  return any;
}

bool UcxTransport::Progress() {
  bool any = finished_outside_progress_;
  finished_outside_progress_ = false;
  if (worker_ != nullptr && stopped_.ok()) {
    // Bounded, so a stream of arrivals cannot starve the caller.
    for (int i = 0; i < 64 && ucp_worker_progress(worker_) != 0; ++i) any = true;
  }
  any |= ReapOperations();
  any |= HandlePeerEvents();
  any |= ExpireOperationsWithLeftPeers();
  return any;
}

absl::Status UcxTransport::BlockUntilActivity(absl::Duration timeout) {
  if (worker_ != nullptr && stopped_.ok()) {
    // ucp_worker_arm says BUSY while events are pending; progress them and
    // report activity rather than sleep on them.
    for (int attempt = 0;; ++attempt) {
      ucs_status_t status = ucp_worker_arm(worker_);
      if (status == UCS_OK) break;
      if (status != UCS_ERR_BUSY) {
        return FailureOf(absl::StrCat("arming the UCX worker (ucp_worker_arm) on rank ",
                                      env_.rank),
                         -1, status);
      }
      if (Progress() || attempt >= 16) return absl::OkStatus();
    }
  }
  // Wake up when a left peer's receives are due to expire, and often enough
  // to notice the rendezvous store falling silent (no event fd for that).
  absl::Time wake = absl::Now() + timeout;
  if (rendezvous_ != nullptr && rendezvous_->failure_detector_fd() >= 0) {
    wake = std::min(wake, absl::Now() + rendezvous_->poll_interval());
  }
  for (const Operation& op : operations_) {
    if (op.completion != nullptr && peers_[op.peer] == PeerState::kLeft) {
      wake = std::min(wake, std::max(left_at_[op.peer], op.posted_at) + kLeftPeerGrace);
    }
  }
  absl::Duration left = wake - absl::Now();
  int timeout_ms = left <= absl::ZeroDuration()
                       ? 0
                       : static_cast<int>(std::min<int64_t>(
                             absl::ToInt64Microseconds(left + absl::Microseconds(999)) / 1000,
                             1 << 30));
  epoll_event events[4];
  int ready = epoll_wait(epoll_fd_, events, 4, timeout_ms);
  for (int i = 0; i < ready; ++i) {
    if (events[i].data.fd == interrupt_fd_) {
      uint64_t value = 0;
      (void)!read(interrupt_fd_, &value, sizeof(value));
    }
  }
  return absl::OkStatus();
}

void UcxTransport::Interrupt() {
  uint64_t one = 1;
  (void)!write(interrupt_fd_, &one, sizeof(one));
}

void UcxTransport::CloseEndpoints() {
  std::vector<void*> closing;
  for (int peer = 0; peer < static_cast<int>(endpoints_.size()); ++peer) {
    // A flush towards a peer that left would never finish, and UCX refuses
    // a forced close without peer error handling (UCS_ERR_INVALID_PARAM):
    // ucp_worker_destroy takes those endpoints down.
    if (endpoints_[peer] == nullptr || peers_[peer] != PeerState::kAlive) continue;
    ucp_request_param_t param = {};
    ucs_status_ptr_t request = ucp_ep_close_nbx(endpoints_[peer], &param);
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) closing.push_back(request);
    endpoints_[peer] = nullptr;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  while (!closing.empty() && absl::Now() < deadline) {
    ucp_worker_progress(worker_);
    for (auto it = closing.begin(); it != closing.end();) {
      if (ucp_request_check_status(*it) != UCS_INPROGRESS) {
        ucp_request_free(*it);
        it = closing.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (void* request : closing) ucp_request_free(request);
}

UcxTransport::~UcxTransport() {
  const absl::Status shut_down =
      absl::CancelledError(absl::StrCat("rank ", env_.rank, "'s transport shut down"));
  for (auto& [tag, receives] : self_posted_) {
    for (SelfRecv& recv : receives) Finish(recv.completion, shut_down, 0);
  }
  // A clean end: never stopped, nothing in flight. Only then are the
  // endpoints flushed (the peers get our last messages before our goodbye):
  // a flush would move data for operations whose completions the Stop below
  // finishes, into or out of buffers that may be gone.
  const bool clean = stopped_.ok() &&
                     std::none_of(operations_.begin(), operations_.end(),
                                  [](const Operation& op) { return op.completion != nullptr; });
  // A clean end is not a failure: what UCX says while tearing it down (a
  // request never returned would be a bug of ours) stays visible.
  if (clean) {
    stopped_ = shut_down;
  } else {
    Stop(shut_down);
  }
  if (worker_ != nullptr) {
    for (Operation& op : operations_) {
      if (op.request != nullptr) ucp_request_free(op.request);  // no callback from now on
    }
    if (clean) CloseEndpoints();
  }
  operations_.clear();
  // Goodbye after the endpoints are flushed, so peers get our last messages
  // before they hear that we left.
  if (rendezvous_ != nullptr) rendezvous_->Leave();
  rendezvous_.reset();
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (interrupt_fd_ >= 0) close(interrupt_fd_);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> CreateUcxTransport(
    const JobEnv& env, const UcxTransportOptions& options) {
  auto transport = std::make_unique<UcxTransport>(env);
  FSDP_RETURN_IF_ERROR(transport->Init(options));
  return std::unique_ptr<Transport>(std::move(transport));
}

absl::StatusOr<std::unique_ptr<Transport>> CreateUcxTransport(
    const JobEnv& env, absl::Duration rendezvous_timeout) {
  UcxTransportOptions options;
  options.rendezvous_timeout = rendezvous_timeout;
  return CreateUcxTransport(env, options);
}

}  // namespace comm
