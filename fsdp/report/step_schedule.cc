// File: fsdp/report/step_schedule.cc
//
// A replay of [Note: the replayed step] in step_schedule.h. The Replay class
// mirrors the runtime's state names (sharded / gathering / unsharded) so the
// two can be read side by side with fsdp/train/train_step.cc.
#include "fsdp/report/step_schedule.h"

#include <algorithm>

namespace fsdp {
namespace report {
namespace {

enum class Params { kSharded, kGathering, kUnsharded };

class Replay {
 public:
  explicit Replay(const ScheduleInputs& in)
      : in_(in),
        n_(static_cast<int>(in.units.size())),
        params_(n_, Params::kUnsharded),
        gathered_(n_, false),
        unsharded_grads_(n_, false) {
    // Sharded parameters start as shards (fsdp/train/unit_state.cc).
    if (in.shard_params) std::fill(params_.begin(), params_.end(), Params::kSharded);
  }

  int64_t Run() {
    for (int step = 0; step < in_.steps; ++step) Step();
    return peak_;
  }

 private:
  void Alloc(int64_t bytes) {
    live_ += bytes;
    peak_ = std::max(peak_, live_);
  }
  void Free(int64_t bytes) { live_ -= bytes; }
  // Bytes held only for a moment: they count for the peak and are gone.
  void Touch(int64_t bytes) { peak_ = std::max(peak_, live_ + bytes); }

  void Unshard(int u) {
    if (params_[u] != Params::kSharded) return;  // done or pending
    if (in_.shard_params) {
      Alloc(in_.param_bytes * in_.units[u].padded_numel);
      gathered_[u] = true;
    }
    params_[u] = Params::kGathering;
  }
  void WaitForUnshard(int u) {
    if (params_[u] != Params::kGathering) return;
    params_[u] = Params::kUnsharded;
  }
  void Reshard(int u) {
    if (gathered_[u]) Free(in_.param_bytes * in_.units[u].padded_numel);
    gathered_[u] = false;
    params_[u] = Params::kSharded;
  }
  void Prefetch(int u, int direction) {
    int in_flight = 0;
    for (Params p : params_) in_flight += p == Params::kGathering ? 1 : 0;
    for (int k = 1; k <= in_.prefetch_depth; ++k) {
      const int next = u + k * direction;
      if (next < 0 || next >= n_) break;
      if (params_[next] != Params::kSharded) continue;
      if (in_flight >= in_.max_gathers_in_flight) break;
      Unshard(next);
      ++in_flight;
    }
  }
  // The reductions move the caller's buffers; only the unsharded gradients
  // of a gradient-sharding strategy come and go.
  void FinishReduceScatter(int u) {
    if (unsharded_grads_[u]) Free(in_.grad_bytes * in_.units[u].padded_numel);
    unsharded_grads_[u] = false;
  }

  void Step() {
    const int accum = std::max(in_.accum_steps, 1);
    for (int m = 0; m < accum; ++m) MicroBatch(/*last=*/m == accum - 1);
    FinishReduceScatter(0);
    // Optimizer step on the shards: shard_optimizer and shard_grad_op leave
    // their whole parameters stale (sharded); the next forward gathers them
    // through Unshard and Prefetch like full_shard, into the same buffers.
    if (in_.shard_optimizer && !in_.shard_params) {
      std::fill(params_.begin(), params_.end(), Params::kSharded);
    }
  }

  // One micro-batch's forward and backward; the reductions only in the last.
  void MicroBatch(bool last) {
    for (int u = 0; u < n_; ++u) {  // forward
      Unshard(u);
      WaitForUnshard(u);
      Prefetch(u, +1);
      // [Note: activation transients]
      Touch(in_.units[u].activation_bytes + in_.units[u].forward_transient_bytes);
      Alloc(in_.units[u].activation_bytes);
      if (in_.shard_params && u + 1 < n_) Reshard(u);
    }
    for (int u = n_ - 1; u >= 0; --u) {  // backward
      Unshard(u);
      WaitForUnshard(u);
      Prefetch(u, -1);
      if (in_.shard_grads && !unsharded_grads_[u]) {
        Alloc(in_.grad_bytes * in_.units[u].padded_numel);
        unsharded_grads_[u] = true;
      }
      Touch(in_.units[u].backward_transient_bytes);
      Free(in_.units[u].activation_bytes);
      if (last && u + 1 < n_) FinishReduceScatter(u + 1);  // u's is now in flight
      if (in_.shard_params) Reshard(u);
    }
  }

  const ScheduleInputs& in_;
  const int n_;
  std::vector<Params> params_;
  std::vector<bool> gathered_;
  std::vector<bool> unsharded_grads_;
  int64_t live_ = 0;
  int64_t peak_ = 0;
};

}  // namespace

ScheduleUnit ScheduleUnitActivations(const std::vector<ModelUnitActivations>& sources) {
  ScheduleUnit unit;
  for (const ModelUnitActivations& s : sources) unit.activation_bytes += s.saved_bytes;
  // Forward: sources in order, each adding its saved bytes to those before.
  int64_t held = 0, forward_peak = 0;
  for (const ModelUnitActivations& s : sources) {
    held += s.saved_bytes;
    forward_peak = std::max(forward_peak, held + s.transient_bytes);
  }
  // Backward: sources in reverse, each freeing its saved bytes when done.
  int64_t backward_peak = 0;
  for (auto s = sources.rbegin(); s != sources.rend(); ++s) {
    backward_peak = std::max(backward_peak, held + s->transient_bytes);
    held -= s->saved_bytes;
  }
  unit.forward_transient_bytes = std::max<int64_t>(0, forward_peak - unit.activation_bytes);
  unit.backward_transient_bytes = std::max<int64_t>(0, backward_peak - unit.activation_bytes);
  return unit;
}

int64_t PeakTransientBytes(const ScheduleInputs& inputs) {
  if (inputs.units.empty()) return 0;
  return Replay(inputs).Run();
}

}  // namespace report
}  // namespace fsdp
