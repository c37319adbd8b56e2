// File: fsdp/plan/step_time_model.cc
#include "fsdp/plan/step_time_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fsdp {
namespace plan {
namespace {

absl::Status CheckInputs(const StepModelInputs& in) {
  if (in.units.empty()) return absl::InvalidArgumentError("step model: no units");
  if (in.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("step model: world_size is ", in.world_size, "; it must be at least 1"));
  }
  if (in.strategy == proto::HYBRID_SHARD) {
    if (in.group_size < 1 || in.world_size % in.group_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step model: hybrid_shard group_size ", in.group_size,
          " must be at least 1 and divide world_size ", in.world_size));
    }
  } else if (in.group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step model: group_size is ", in.group_size, "; it is for hybrid_shard only (give 0)"));
  }
  if (in.accum_steps < 1 || in.prefetch_depth < 0 || in.max_gathers_in_flight < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step model: accum_steps (", in.accum_steps, ") and max_gathers_in_flight (",
        in.max_gathers_in_flight, ") must be at least 1, prefetch_depth (", in.prefetch_depth,
        ") at least 0"));
  }
  for (int bytes : {in.param_bytes, in.grad_bytes}) {
    if (bytes != 2 && bytes != 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step model: param_bytes and grad_bytes must be 2 or 4, got ", in.param_bytes, " and ",
          in.grad_bytes));
    }
  }
  return absl::OkStatus();
}

double ProductsSeconds(const std::vector<ProductShape>& products,
                       const proto::HardwareDescription& hw, ProductDtype dtype, double share,
                       int threads) {
  double seconds = 0;
  for (const ProductShape& p : products) {
    const int64_t smallest = std::min({p.m, p.n, p.k});
    const double flops = 2.0 * static_cast<double>(p.m) * p.n * p.k * p.count;
    seconds += flops / (ProductRateFor(hw, dtype, smallest, threads) * share);
  }
  return seconds;
}

// Optimizer bytes per element it updates, read + written: the fp32 master,
// the gradient (widened on read), the optimizer states, the bf16 copy of
// the parameters when they are kept in bf16, and clearing the gradient.
double OptimizerBytesPerElement(const StepModelInputs& in) {
  const int states = OptimizerStatesPerParam(in.optimizer);
  double bytes = 2 * 4 + in.grad_bytes + 2 * 4 * states;  // master r/w, grad, states r/w
  if (in.param_bytes == 2) bytes += 2;                     // the bf16 parameters written
  bytes += in.grad_bytes;                                  // ClearGrads
  if (in.grad_clip) bytes += 2 * in.grad_bytes;            // largest |g|, sum of squares
  return bytes;
}

// The step on two clocks ([Note: the replayed schedule]).
class ScheduleReplay {
 public:
  ScheduleReplay(const StepModelInputs& in, std::vector<double> forward_s,
                 std::vector<double> backward_s, CollectiveGroup shard_group,
                 CollectiveGroup replica_group, int replica_groups, CollectiveGroup world_group,
                 double collective_compute_share)
      : in_(in),
        n_(static_cast<int>(in.units.size())),
        forward_s_(std::move(forward_s)),
        backward_s_(std::move(backward_s)),
        shard_group_(shard_group),
        replica_group_(replica_group),
        world_group_(world_group),
        replica_groups_(replica_groups),
        gather_state_(n_, kWhole),
        gather_done_(n_, 0),
        reduce_done_(n_, 0),
        second_done_(n_, 0),
        collective_share_(collective_compute_share) {}

  void Run() {
    const bool shards_params =
        in_.strategy == proto::FULL_SHARD || in_.strategy == proto::HYBRID_SHARD;
    const bool gathers_updates =
        in_.strategy == proto::SHARD_OPTIMIZER || in_.strategy == proto::SHARD_GRAD_OP;
    // The step starts with every unit sharded (full_shard, hybrid) or holding
    // stale whole parameters to gather into (shard_optimizer, shard_grad_op).
    if (shards_params || gathers_updates) {
      std::fill(gather_state_.begin(), gather_state_.end(), kSharded);
    }
    for (int m = 0; m < in_.accum_steps; ++m) {
      const bool last = m + 1 == in_.accum_steps;
      for (int u = 0; u < n_; ++u) {
        Unshard(u, +1);
        Compute(forward_s_[u]);
        if (shards_params && u + 1 < n_) gather_state_[u] = kSharded;
      }
      for (int u = n_ - 1; u >= 0; --u) {
        Unshard(u, -1);
        Compute(backward_s_[u]);
        if (last) {
          reduce_done_[u] = Post(ReduceScatterSeconds(GradBytes(u), shard_group_));
          if (u + 1 < n_) FinishReduceScatter(u + 1);
        }
        if (shards_params) gather_state_[u] = kSharded;
      }
    }
    FinishReduceScatter(0);
    for (int u = n_ - 1; u >= 0; --u) Wait(second_done_[u]);
    Wait(Post(AllReduceSeconds(4, world_group_)));  // the loss
    if (in_.grad_clip) {
      Wait(Post(AllGatherSeconds(4 * shard_group_.size, shard_group_)));
      Wait(Post(AllGatherSeconds(16 * shard_group_.size, shard_group_)));
    }
  }

  double now() const { return now_; }
  double waited() const { return waited_; }
  double comm_busy() const { return comm_busy_; }
  double contention() const { return contention_; }

 private:
  enum GatherState { kSharded, kGathering, kWhole };

  // [Note: collectives share the processor]. Everything posted started by
  // now, so the channel is busy without a gap until channel_free_.
  void Compute(double seconds) {
    const double share = collective_share_;  // of the processor, while the channel runs
    const double busy = std::max(0.0, channel_free_ - now_);
    double took = seconds;
    if (share > 0 && busy > 0) {
      const double slowed = seconds / (1 - share);
      took = slowed <= busy ? slowed : busy + seconds - busy * (1 - share);
    }
    contention_ += took - seconds;
    now_ += took;
  }

  int64_t GradBytes(int u) const { return in_.units[u].padded_numel * in_.grad_bytes; }

  // Starts a collective of `seconds` on the channel; returns when it ends.
  double Post(double seconds) {
    const double start = std::max(now_, channel_free_);
    channel_free_ = start + seconds;
    comm_busy_ += seconds;
    return channel_free_;
  }
  void Wait(double done) {
    if (done > now_) {
      waited_ += done - now_;
      now_ = done;
    }
  }
  void PostGather(int u) {
    const int64_t bytes = in_.units[u].padded_numel * in_.param_bytes;
    if (shard_group_.size == 1) {
      // A shard group of one rank: the "gather" is a copy of the shard into
      // the unit's buffer, made by the posting thread (FinishLocally in
      // fsdp/train/unit_collectives.cc): compute time, read and written.
      Compute(2.0 * static_cast<double>(bytes) / shard_group_.memory_bandwidth_bytes_per_s);
      gather_done_[u] = now_;
    } else {
      gather_done_[u] = Post(AllGatherSeconds(bytes, shard_group_));
    }
    gather_state_[u] = kGathering;
  }
  void Unshard(int u, int direction) {
    if (gather_state_[u] == kSharded) PostGather(u);
    if (gather_state_[u] == kGathering) {
      Wait(gather_done_[u]);
      gather_state_[u] = kWhole;
    }
    int in_flight = static_cast<int>(
        std::count(gather_state_.begin(), gather_state_.end(), kGathering));
    for (int k = 1; k <= in_.prefetch_depth; ++k) {
      const int next = u + k * direction;
      if (next < 0 || next >= n_) break;
      if (gather_state_[next] != kSharded) continue;
      if (in_flight >= in_.max_gathers_in_flight) break;
      PostGather(next);
      ++in_flight;
    }
  }
  void FinishReduceScatter(int u) {
    Wait(reduce_done_[u]);
    second_done_[u] = now_;
    if (in_.strategy == proto::NO_SHARD) {
      second_done_[u] = Post(AllGatherSeconds(GradBytes(u), shard_group_));
    } else if (in_.strategy == proto::HYBRID_SHARD && replica_groups_ > 1) {
      second_done_[u] = Post(AllReduceSeconds(
          in_.units[u].shard_numel * in_.grad_bytes, replica_group_));
    }
  }

  const StepModelInputs& in_;
  const int n_;
  const std::vector<double> forward_s_, backward_s_;
  const CollectiveGroup shard_group_, replica_group_, world_group_;
  const int replica_groups_;
  std::vector<GatherState> gather_state_;
  std::vector<double> gather_done_, reduce_done_, second_done_;
  const double collective_share_;
  double now_ = 0, channel_free_ = 0, waited_ = 0, comm_busy_ = 0, contention_ = 0;
};

double StandardNormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

double ExpectedMaxOfNormals(int n) {
  if (n <= 1) return 0;
  // E[max] = integral of x n phi(x) Phi(x)^(n-1) dx, midpoint rule on
  // [-10, 10]: the integrand is negligible outside for n <= 2^31.
  const int steps = 20000;
  const double lo = -10, width = 20.0 / steps;
  const double norm = 1 / std::sqrt(2 * M_PI);
  double sum = 0;
  for (int i = 0; i < steps; ++i) {
    const double x = lo + (i + 0.5) * width;
    const double phi = norm * std::exp(-0.5 * x * x);
    sum += x * n * phi * std::pow(StandardNormalCdf(x), n - 1) * width;
  }
  return sum;
}

CollectiveGroup GroupOn(const proto::HardwareDescription& hw, int group_size, bool spans_nodes,
                        double rank_share) {
  CollectiveGroup group;
  group.size = group_size;
  group.on_one_host = !spans_nodes;
  const proto::LinkLevel& link = spans_nodes ? hw.inter_node() : hw.intra_node();
  group.latency_s = link.latency_s();
  // A ring over consecutive ranks crosses the network once per node; its
  // crossing hop gets network_rails_per_ring of the node's adapters.
  const double rails = std::max(1, hw.network_rails_per_ring());
  group.bandwidth_bytes_per_s =
      spans_nodes ? std::min(hw.intra_node().bandwidth_bytes_per_s(),
                             hw.inter_node().bandwidth_bytes_per_s() * rails)
                  : link.bandwidth_bytes_per_s();
  group.memory_bandwidth_bytes_per_s = hw.memory_bandwidth_bytes_per_s() * rank_share;
  return group;
}

absl::StatusOr<StepTimePrediction> PredictStepTime(const StepModelInputs& in,
                                                   const proto::HardwareDescription& hw) {
  FSDP_RETURN_IF_ERROR(CheckInputs(in));
  StepTimePrediction p;
  const int per_node = hw.ranks_per_node();
  const int ranks_on_node = std::min(in.world_size, per_node);
  p.rank_share = std::min(1.0, static_cast<double>(hw.processors_per_node()) / ranks_on_node);
  p.rank_threads = std::max(1, hw.processors_per_node() / ranks_on_node);
  const double memory_bw = hw.memory_bandwidth_bytes_per_s() * p.rank_share;

  // Absent framework_overhead reads as zeros: no launch cost, no sharing.
  const double launch_s = hw.framework_overhead().kernel_launch_s();
  std::vector<double> forward_s, backward_s;
  for (const UnitWork& unit : in.units) {
    forward_s.push_back(
        ProductsSeconds(unit.forward_products, hw, in.product_dtype, p.rank_share, p.rank_threads) +
        unit.forward_elementwise_bytes / memory_bw + unit.forward_kernels * launch_s);
    backward_s.push_back(ProductsSeconds(unit.backward_products, hw, in.product_dtype, p.rank_share,
                                         p.rank_threads) +
                         unit.backward_elementwise_bytes / memory_bw +
                         unit.backward_kernels * launch_s);
    p.compute_s += (forward_s.back() + backward_s.back()) * in.accum_steps;
  }

  const int shard_size = in.strategy == proto::HYBRID_SHARD ? in.group_size : in.world_size;
  const int replica_groups = in.world_size / shard_size;
  // Consecutive ranks share a node: the shard group spans nodes when it is
  // larger than one; a replica group (ranks r, r + G, ...) when the world is.
  const CollectiveGroup shard_group = GroupOn(hw, shard_size, shard_size > per_node, p.rank_share);
  const CollectiveGroup replica_group =
      GroupOn(hw, replica_groups, in.world_size > per_node, p.rank_share);
  ScheduleReplay replay(in, forward_s, backward_s, shard_group, replica_group, replica_groups,
                        GroupOn(hw, in.world_size, in.world_size > per_node, p.rank_share),
                        hw.framework_overhead().collective_compute_share());
  replay.Run();

  int64_t updated = 0;
  for (const UnitWork& unit : in.units) {
    updated += in.strategy == proto::NO_SHARD ? unit.padded_numel : unit.shard_numel;
  }
  p.optimizer_s = static_cast<double>(updated) * OptimizerBytesPerElement(in) / memory_bw;
  p.comm_s = replay.comm_busy();
  p.exposed_comm_s = replay.waited();
  p.contention_s = replay.contention();
  p.straggler_s = hw.compute_time_cv() * p.compute_s * ExpectedMaxOfNormals(in.world_size);
  p.step_s = replay.now() + p.optimizer_s + p.straggler_s;
  return p;
}

}  // namespace plan
}  // namespace fsdp
