// File: fsdp/plan/goodput.h
//
// [Note: goodput] The expected fraction of a job's wall time that trains,
// when nodes fail and the job checkpoints, after Young (1974) and Daly
// (2006). A job on `nodes` nodes fails at rate lambda = nodes x
// failures_per_node_hour / 3600 per second; with MTBF M = 1 / lambda, a
// save that stops training for d seconds every tau seconds, and a restart
// (new processes to resumed) of R seconds, each failure also loses on
// average tau / 2 of work since the last checkpoint (the recovery: R +
// tau / 2). To first order in tau / M:
//   goodput = 1 - d / tau - (R + tau / 2) / M,
// maximised at Young's interval tau = sqrt(2 d M), never shorter than one
// step (a checkpoint lands between steps). Pure arithmetic.
//
//   CheckpointCosts costs = CheckpointCostsFor(hw.checkpoint_cost(), state_bytes_per_rank);
//   Goodput g = YoungDalyGoodput(step_s, nodes, 1.76e-4, costs);
#ifndef FSDP_PLAN_GOODPUT_H_
#define FSDP_PLAN_GOODPUT_H_

#include "proto/hardware.pb.h"

namespace fsdp {
namespace plan {

struct CheckpointCosts {
  double save_s = 0;     // training stopped per save
  double restart_s = 0;  // a failure's restart, before the lost work is redone
};

// The description's cost model at `bytes_per_rank` of state per rank.
CheckpointCosts CheckpointCostsFor(const proto::CheckpointCost& cost, double bytes_per_rank);

struct Goodput {
  double interval_s = 0;  // between checkpoints; 0 without failures
  double fraction = 1;    // of wall time that trains, in [0, 1]
  double mtbf_s = 0;      // the job's; 0 without failures
};

// [Note: goodput]. failures_per_node_hour 0 gives fraction 1 (no checkpoints
// needed); a save cost of 0 checkpoints every step.
Goodput YoungDalyGoodput(double step_s, int nodes, double failures_per_node_hour,
                         const CheckpointCosts& costs);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_GOODPUT_H_
