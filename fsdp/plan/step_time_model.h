// File: fsdp/plan/step_time_model.h
//
// Predicts one optimizer step's wall time on one rank from the work of each
// plan unit, the strategy and a cluster description (proto/hardware.proto).
// Pure: it replays the runtime's schedule on two clocks, computes nothing of
// the model and sends nothing.
//
//   StepModelInputs in;           // units' work, strategy, sizes, dtypes
//   in.units = GptUnitWork(config, micro_batch, plan);   (fsdp/plan/gpt_work.h)
//   FSDP_ASSIGN_OR_RETURN(StepTimePrediction p, PredictStepTime(in, hardware));
//
// [Note: the replayed schedule] fsdp/train/train_step.cc, step by step, on
// a compute clock (the rank's thread) and a communication channel (one
// collective at a time, in posting order, each starting when posted or when
// the previous one ends, whichever is later; its length is
// fsdp/plan/collective_time.h's for the group it runs on):
//   - per micro-batch, forward u = 0..n-1: post u's parameter all-gather
//     unless it is gathered or in flight, wait for it, post the prefetch of
//     u+1..u+prefetch_depth (units still sharded, while fewer than
//     max_gathers_in_flight are in flight), compute, reshard (full_shard and
//     hybrid; the last unit stays gathered for its backward);
//   - backward u = n-1..0 the same way with u-1, u-2, ...; on the last
//     micro-batch post u's gradient reduce-scatter after its backward, then
//     wait for u+1's and post its second phase (no_shard: the gradient
//     all-gather over the shard group; hybrid with more than one group:
//     the shard's all-reduce over the replica group);
//   - at the end wait for unit 0's reduce-scatter, post its second phase,
//     wait for every second phase; the loss all-reduce (4 bytes, the world);
//     with clipping the norm's two all-gathers (4 and 16 bytes per rank,
//     the shard group) and two reads of the gradient shards; the optimizer
//     over the shards (no_shard: the whole buffers) as memory traffic.
// Parameter all-gathers run every micro-batch for full_shard and hybrid, on
// the first micro-batch only for shard_optimizer and shard_grad_op (the
// updated shards, gathered by the next step's forward: in a steady state of
// equal steps that is this step's first forward), never for no_shard.
// The exposed communication is what the compute clock waited.
//
// Compute per rank: a product of 2 m n k operations at the description's
// rate for its dtype and shape class, element-wise work as bytes at its
// memory bandwidth, both times the rank's share of its node's processors
// (processors_per_node / ranks on the node), and each counted kernel at
// framework_overhead.kernel_launch_s.
//
// [Note: collectives share the processor] While the channel runs a
// collective, compute advances at (1 - collective_compute_share) of its
// rate (a GPU library's kernels hold some SMs): a compute span of c seconds
// that starts with the channel busy for another b seconds takes
// c / (1 - s) when it ends within b, else b + c - b (1 - s). The extra is
// contention_s. Without framework_overhead s is 0 and nothing changes.
//
// [Note: straggler tail] Every collective waits for the slowest rank, so a
// step takes the expected maximum over N ranks of their compute times. With
// per-rank noise of coefficient of variation cv (compute_time_cv), the tail
// is cv x compute x E[max of N standard normals] (0 for N = 1, 0.56 for 2,
// 1.03 for 4, 3.7 for 16384), integrated numerically.
//
// Links: a group whose ranks all sit on one node (consecutive ranks,
// ranks_per_node of them per node) uses intra_node; a group that spans
// nodes is limited by inter_node's latency and by the smaller of
// intra_node's bandwidth and inter_node's times network_rails_per_ring (its
// ring crosses the network once per node boundary, over that many of the
// node's adapters at once).
#ifndef FSDP_PLAN_STEP_TIME_MODEL_H_
#define FSDP_PLAN_STEP_TIME_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fsdp/plan/collective_time.h"
#include "fsdp/plan/hardware_description.h"
#include "fsdp/plan/memory_model.h"
#include "proto/hardware.pb.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace plan {

// `count` products of shape m x n x k (2 m n k operations each) per
// micro-batch; count may be fractional (a causal attention's half).
struct ProductShape {
  int64_t m = 0, n = 0, k = 0;
  double count = 1;
};

// One plan unit's work for one micro-batch on one rank.
struct UnitWork {
  int64_t padded_numel = 0;  // the plan's; the all-gather and reduce-scatter size
  int64_t shard_numel = 0;   // padded_numel / shard group size
  std::vector<ProductShape> forward_products;
  std::vector<ProductShape> backward_products;
  double forward_elementwise_bytes = 0;   // read + written outside products
  double backward_elementwise_bytes = 0;
  // Kernels launched (products and element-wise), each costing the
  // description's framework_overhead.kernel_launch_s; 0 when not counted
  // (this runtime's work: its fixed costs are in its measured rates).
  double forward_kernels = 0;
  double backward_kernels = 0;
};

struct StepModelInputs {
  std::vector<UnitWork> units;  // in forward order
  proto::ShardingStrategy strategy = proto::FULL_SHARD;
  int world_size = 1;
  int group_size = 0;  // hybrid_shard's G; 0 otherwise (the shard group is the world)
  ProductDtype product_dtype = ProductDtype::kFp32;
  int param_bytes = 4;  // the gathered parameters' element size (2 under bf16)
  int grad_bytes = 4;   // the reduced gradients' element size
  int accum_steps = 1;
  int prefetch_depth = 1;
  int max_gathers_in_flight = 2;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  bool grad_clip = true;
};

struct StepTimePrediction {
  double compute_s = 0;       // forward and backward of every micro-batch
  double optimizer_s = 0;     // norm reads + optimizer + clearing the gradients
  double comm_s = 0;          // the channel's busy time (all collectives)
  double exposed_comm_s = 0;  // time the compute clock waited for collectives
  double straggler_s = 0;     // [Note: straggler tail]
  double contention_s = 0;    // compute slowed by overlapped collectives (in step_s)
  double step_s = 0;          // compute + contention + optimizer + exposed + straggler
  double rank_share = 1;      // of one processor (proto/hardware.proto)
  // Threads of the rank's products: processors / ranks on its node when
  // there are more processors than ranks (train_gpt's default), else 1.
  int rank_threads = 1;
};

// InvalidArgument naming the input for: no units, world_size < 1, a
// group_size that is not 0 (non-hybrid) or does not divide world_size
// (hybrid), accum_steps, prefetch_depth, max_gathers_in_flight or element
// sizes out of range. `hw` is assumed valid (ValidateHardwareDescription).
absl::StatusOr<StepTimePrediction> PredictStepTime(const StepModelInputs& inputs,
                                                   const proto::HardwareDescription& hw);

// E[max of n independent standard normal draws]; 0 for n <= 1.
double ExpectedMaxOfNormals(int n);

// The link a group of `group_size` ranks crosses: `spans_nodes` picks
// inter_node's latency and min(intra, inter x network_rails_per_ring) bandwidth.
CollectiveGroup GroupOn(const proto::HardwareDescription& hw, int group_size, bool spans_nodes,
                        double rank_share);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_STEP_TIME_MODEL_H_
