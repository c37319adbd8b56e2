// File: comm/rendezvous/pmix_session.cc
#include "comm/rendezvous/pmix_session.h"

#include <pmix.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace comm {
namespace {

pmix_proc_t g_me;  // set by Init, read by every call

void FinalizeAtExit() { PMIx_Finalize(nullptr, 0); }

std::string PmixError(const std::string& what, pmix_status_t status) {
  return absl::StrCat(what, " failed: ", PMIx_Error_string(status));
}

// A job-level value (rank = wildcard) or one of this process's own.
absl::StatusOr<uint32_t> GetUint(pmix_rank_t rank, const char* key) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, g_me.nspace, rank);
  pmix_value_t* value = nullptr;
  pmix_status_t status = PMIx_Get(&proc, key, nullptr, 0, &value);
  if (status != PMIX_SUCCESS || value == nullptr) {
    return absl::UnavailableError(PmixError(absl::StrCat("PMIx_Get(", key, ")"), status));
  }
  uint32_t result = 0;
  switch (value->type) {
    case PMIX_UINT32: result = value->data.uint32; break;
    case PMIX_UINT16: result = value->data.uint16; break;
    case PMIX_INT: result = static_cast<uint32_t>(value->data.integer); break;
    case PMIX_PROC_RANK: result = value->data.rank; break;
    default:
      PMIX_VALUE_RELEASE(value);
      return absl::InternalError(absl::StrCat("PMIx_Get(", key, ") returned type ",
                                              static_cast<int>(value->type)));
  }
  PMIX_VALUE_RELEASE(value);
  return result;
}

// Seconds for PMIX_TIMEOUT: at least 1 (0 would mean "no timeout").
int TimeoutSeconds(absl::Time deadline) {
  const int64_t seconds = absl::ToInt64Seconds(deadline - absl::Now() + absl::Seconds(1));
  return static_cast<int>(std::clamp<int64_t>(seconds, 1, 1 << 20));
}

// The fence's outcome, filled in on PMIx's progress thread.
struct FenceState {
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;
};

void OnFenceDone(pmix_status_t status, void* data) {
  auto* state = static_cast<FenceState*>(data);
  std::lock_guard<std::mutex> lock(state->mu);
  state->status = status;
  state->done = true;
  state->done_cv.notify_all();
}

}  // namespace

absl::StatusOr<PmixSession*> PmixSession::Get() {
  static PmixSession* session = nullptr;
  static absl::Status init_status;
  static std::once_flag once;
  std::call_once(once, [] {
    auto* candidate = new PmixSession();
    init_status = candidate->Init();
    if (init_status.ok()) {
      session = candidate;
      std::atexit(FinalizeAtExit);
    } else {
      delete candidate;
    }
  });
  if (!init_status.ok()) return init_status;
  return session;
}

absl::Status PmixSession::Init() {
  pmix_status_t status = PMIx_Init(&g_me, nullptr, 0);
  if (status != PMIX_SUCCESS) {
    return absl::UnavailableError(absl::StrCat(
        PmixError("PMIx_Init", status),
        ": PMIX_RANK and PMIX_NAMESPACE are set but this task cannot reach the engine's PMIx "
        "server; run it under mpirun or srun --mpi=pmix, or set MASTER_ADDR and MASTER_PORT"));
  }
  identity_.nspace = g_me.nspace;
  identity_.rank = static_cast<int>(g_me.rank);
  absl::StatusOr<uint32_t> size = GetUint(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
  absl::StatusOr<uint32_t> local_size = GetUint(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE);
  absl::StatusOr<uint32_t> local_rank = GetUint(g_me.rank, PMIX_LOCAL_RANK);
  for (const absl::StatusOr<uint32_t>* got : {&size, &local_size, &local_rank}) {
    if (!got->ok()) {
      PMIx_Finalize(nullptr, 0);
      return got->status();
    }
  }
  identity_.world_size = static_cast<int>(*size);
  identity_.local_world_size = static_cast<int>(*local_size);
  identity_.local_rank = static_cast<int>(*local_rank);
  return absl::OkStatus();
}

absl::Status PmixSession::Publish(const std::string& key, const std::string& value) {
  pmix_value_t put;
  PMIX_VALUE_LOAD(&put, value.c_str(), PMIX_STRING);
  pmix_status_t status = PMIx_Put(PMIX_GLOBAL, key.c_str(), &put);
  PMIX_VALUE_DESTRUCT(&put);
  if (status != PMIX_SUCCESS) {
    return absl::UnavailableError(PmixError(absl::StrCat("PMIx_Put(", key, ")"), status));
  }
  status = PMIx_Commit();
  if (status != PMIX_SUCCESS) return absl::UnavailableError(PmixError("PMIx_Commit", status));
  return absl::OkStatus();
}

absl::Status PmixSession::Fence(absl::Time deadline) {
  pmix_proc_t all;
  PMIX_LOAD_PROCID(&all, g_me.nspace, PMIX_RANK_WILDCARD);
  pmix_info_t info;
  bool collect = true;
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  // Heap-allocated and deleted only once the callback ran: after a timeout
  // PMIx may still call it, so then it is leaked on purpose.
  auto* state = new FenceState();
  pmix_status_t status = PMIx_Fence_nb(&all, 1, &info, 1, &OnFenceDone, state);
  PMIX_INFO_DESTRUCT(&info);
  if (status != PMIX_SUCCESS) {
    delete state;
    return absl::UnavailableError(PmixError("PMIx_Fence_nb", status));
  }
  std::unique_lock<std::mutex> lock(state->mu);
  const bool done = state->done_cv.wait_for(
      lock, absl::ToChronoNanoseconds(std::max(deadline - absl::Now(), absl::ZeroDuration())),
      [state] { return state->done; });
  if (!done) {
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", identity_.rank, ": the PMIx fence of all ", identity_.world_size,
        " ranks (to learn where rank 0's rendezvous store listens) did not finish before the "
        "rendezvous deadline: some rank did not start or did not reach it"));
  }
  status = state->status;
  lock.unlock();
  delete state;
  if (status != PMIX_SUCCESS) return absl::UnavailableError(PmixError("PMIx fence", status));
  return absl::OkStatus();
}

absl::StatusOr<std::string> PmixSession::Read(int rank, const std::string& key,
                                              absl::Time deadline) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, g_me.nspace, static_cast<pmix_rank_t>(rank));
  pmix_info_t info;
  int timeout = TimeoutSeconds(deadline);
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout, PMIX_INT);
  pmix_value_t* value = nullptr;
  pmix_status_t status = PMIx_Get(&proc, key.c_str(), &info, 1, &value);
  PMIX_INFO_DESTRUCT(&info);
  if (status != PMIX_SUCCESS || value == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", identity_.rank, ": ",
        PmixError(absl::StrCat("PMIx_Get of rank ", rank, "'s ", key), status)));
  }
  if (value->type != PMIX_STRING || value->data.string == nullptr) {
    PMIX_VALUE_RELEASE(value);
    return absl::InternalError(absl::StrCat("rank ", identity_.rank, ": rank ", rank, "'s ", key,
                                            " is not a string"));
  }
  std::string result = value->data.string;
  PMIX_VALUE_RELEASE(value);
  return result;
}

}  // namespace comm
