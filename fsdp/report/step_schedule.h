// File: fsdp/report/step_schedule.h
//
// The peak of a rank's transient memory over training steps, found by
// replaying the allocations and frees of the runtime's step
// (fsdp/train/train_step.cc, unit_state.cc, unit_collectives.cc) unit by
// unit, without running anything. "Transient" is what comes and goes within
// a step: saved activations, gathered parameters (sharded parameters),
// unsharded gradients (sharded gradients). The collectives move the
// caller's buffers and stage nothing. Everything else is held for the whole
// run and is added by the caller.
//
//   ScheduleInputs in;
//   in.units = {{/*padded_numel=*/66, /*shard_numel=*/22, /*activation_bytes=*/1024}, ...};
//   in.shard_params = true;  in.shard_grads = true;  in.shard_optimizer = true;
//   int64_t peak = PeakTransientBytes(in);
//
// [Note: the replayed step] Per step, forward over units u = 0..n-1:
// gather u unless prefetched (allocate its parameters if sharded, post the
// all-gather), wait for it, prefetch the next prefetch_depth units still
// sharded while fewer
// than max_gathers_in_flight gathers are pending, save u's activations,
// free u's parameters (sharded, except the last unit). Backward over
// u = n-1..0: gather u and prefetch the previous ones the same way, allocate
// u's unsharded gradients (sharded gradients), free u's activations, post
// u's reduce-scatter, then finish unit u+1's: free (sharded gradients) its
// unsharded gradients (no_shard posts its gradient all-gather, into the
// whole gradients it keeps); free u's parameters (sharded). After the loop:
// finish unit 0's reduce-scatter the same way, then every all-gather. With
// accumulation the forward and backward run once per micro-batch; a unit's
// unsharded gradients are allocated by its first backward and kept, and the
// reductions (posting, finishing, freeing) happen only in the last
// micro-batch's backward. After
// the optimizer step shard_optimizer
// and shard_grad_op hold stale whole parameters: the next forward gathers
// each unit's updated shards into them through the same gather and
// prefetch path (no new parameter buffer).
//
// [Note: activation transients] A unit's model units save their
// activations in forward order, and a checkpointed block holds more than it
// saves while it runs (fsdp/nn/gpt_spec.h, GptActivationBreakdown): its
// forward allocates its output and the rest of a block, computes and frees
// the rest; its backward allocates the rest again, recomputes, runs the
// backward and frees everything. So while model unit s of a plan unit runs,
// the plan unit holds the saved bytes of its sources 0..s (in the forward:
// those saved so far; in the backward, which runs the sources in reverse:
// those not yet freed) plus s's transient. The replay needs only how far
// that rises above the unit's whole saved activations: in the forward that
// is on top of the bytes alive before the unit's activations (it peaks
// after WaitForUnshard and the prefetch); in the backward on top of
// everything alive once the unit's unsharded gradients are allocated
// (DataParallelTrainer::BackwardUnit takes them before the model's
// backward runs).
#ifndef FSDP_REPORT_STEP_SCHEDULE_H_
#define FSDP_REPORT_STEP_SCHEDULE_H_

#include <cstdint>
#include <vector>

namespace fsdp {
namespace report {

struct ScheduleUnit {
  int64_t padded_numel = 0;      // P_u
  int64_t shard_numel = 0;       // S_u
  int64_t activation_bytes = 0;  // saved by its forward, freed by its backward
  // [Note: activation transients]: how far the unit's activation bytes rise
  // above activation_bytes while its forward, and its backward, run.
  int64_t forward_transient_bytes = 0;
  int64_t backward_transient_bytes = 0;
};

// What one model unit of a plan unit saves from its forward to its backward,
// and holds on top only while one of them runs.
struct ModelUnitActivations {
  int64_t saved_bytes = 0;
  int64_t transient_bytes = 0;
};

// A plan unit's activation_bytes and transients from its model units
// (proto source_units, forward order), per [Note: activation transients].
// Its padded and shard numel are left 0 for the caller.
ScheduleUnit ScheduleUnitActivations(const std::vector<ModelUnitActivations>& sources);

struct ScheduleInputs {
  std::vector<ScheduleUnit> units;  // forward order
  bool shard_params = false;        // full_shard, hybrid_shard
  bool shard_grads = false;         // shard_grad_op, full_shard, hybrid_shard
  bool shard_optimizer = false;     // every strategy but no_shard
  int64_t param_bytes = 4;          // bytes per gathered parameter element
  int64_t grad_bytes = 4;           // bytes per unsharded gradient element
  int prefetch_depth = 1;
  int max_gathers_in_flight = 2;
  int steps = 2;                    // the report trains 2 steps
  int accum_steps = 1;              // micro-batches per step
};

// The largest sum of transient bytes alive at once over `steps` steps.
int64_t PeakTransientBytes(const ScheduleInputs& inputs);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_STEP_SCHEDULE_H_
