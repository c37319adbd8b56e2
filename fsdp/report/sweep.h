// File: fsdp/report/sweep.h
//
// Which configurations the memory report visits, and how a configuration
// becomes a training run. Pure: nothing here launches or allocates.
//
//   FSDP_ASSIGN_OR_RETURN(SweepOptions sweep, SweepPreset("small"));
//   for (const MemoryPoint& point : SweepPoints(sweep)) {
//     absl::StatusOr<TrainOptions> run = TrainOptionsForPoint(point, sweep.steps);
//     if (!run.ok()) { /* report "not measured: " + run.status().message() */ }
//     ...
//   }
#ifndef FSDP_REPORT_SWEEP_H_
#define FSDP_REPORT_SWEEP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fsdp/report/activation_mode.h"
#include "fsdp/report/memory_estimate.h"
#include "fsdp/run/train_options.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace report {

// The second plot's sweep: one GPT-family model, strategy, rank count and
// precision, per-rank peak against seq_len for each activation mode.
struct SeqLenSweep {
  int width = 0;  // the GPT family member (gpt_family.h); 0 = no sequence-length sweep
  int vocab = 2048;
  int micro_batch = 2;
  proto::ShardingStrategy strategy = proto::FULL_SHARD;
  int ranks = 2;
  Precision precision = Precision::kFp32;
  std::vector<int> seq_lens;
  std::vector<ActivationMode> modes;
  // Longer sequences are predicted only (a step's attention grows with T^2).
  int max_measured_seq_len = 0;
};

struct SweepOptions {
  std::string name;  // "small", "full"
  // GPT family widths (gpt_family.h); every one is predicted.
  std::vector<int> widths;
  // Widths above this are predicted only (too slow to train here).
  int max_measured_width = 0;
  int vocab = 2048;
  int seq_len = 128;
  int micro_batch = 2;
  std::vector<int> ranks;
  std::vector<proto::ShardingStrategy> strategies;
  std::vector<Precision> precisions;
  // Activation modes of the model sweep (--activation_checkpointing x
  // --attention). A mode a family member cannot take (every:K with more
  // than its blocks) skips that member.
  std::vector<ActivationMode> modes = {ActivationMode{}};
  SeqLenSweep seq_len_sweep;
  int steps = 2;  // training steps per measured point
  // A point is measured only if ranks x predicted bytes per rank stays under
  // this, so a sweep never asks the machine for more than it can give,
  int64_t measure_cap_bytes = int64_t{6} << 30;
  // and if ranks x parameters stays under this (a step's compute, on this
  // machine's 2 cores, grows with it).
  double max_measured_rank_params = 2.5e8;
};

// Both presets: every strategy and precision (fp32, bf16, mixed),
// default activations (none, standard attention) in the model sweep, and a
// sequence-length sweep under full_shard on 2 ranks in fp32 for the modes
// none, every:2, all, flash and all+flash.
// "small": two tiny models (4e4 and 1.3e5 parameters, vocab 256, seq_len 32)
// on 1, 2 and 4 ranks; the sequence-length sweep on the first (2 blocks of
// width 32) over seq_len 32 to 256, all measured; seconds, run as a test.
// "full": widths 128 to 4096 (1.3e6 to 2.6e10 parameters, vocab 2048,
// seq_len 128) on 1, 2, 4, 8 ranks, measured up to width 512 (5.3e7
// parameters) within 6 GiB and 2.5e8 rank-parameters in total; the
// sequence-length sweep on width 128 (4 blocks, 1.3e6 parameters) over
// seq_len 128 to 4096, measured up to 1024. InvalidArgument for other names.
absl::StatusOr<SweepOptions> SweepPreset(absl::string_view name);

// hybrid_shard's group size in a sweep: half the ranks (two replicas), or 1
// on one rank.
int SweepHybridGroupSize(int ranks);

// Every (precision, strategy, ranks, mode, width) point, in that nesting
// order, leaving out the widths a mode cannot apply to.
std::vector<MemoryPoint> SweepPoints(const SweepOptions& sweep);

// Every (mode, seq_len) point of sweep.seq_len_sweep, in that order; empty
// when its width is 0.
std::vector<MemoryPoint> SeqLenSweepPoints(const SweepOptions& sweep);

// The training run that measures `point`: its GPT, micro_batch, strategy and
// ranks (and hybrid group size), prefetch depth, min_unit_numel,
// activation checkpointing and attention, `steps` steps, AdamW, one
// micro-batch per step. Errors say why the runtime cannot train it, so the
// report can print "not measured: <why>": kUnimplemented for optimizers
// other than AdamW and for bf16 compute outside the bf16 layouts (see
// [Note: runtime mixed precision] in sweep.cc), and ValidateTrainOptions'
// errors (e.g. a strategy the runtime does not run).
absl::StatusOr<TrainOptions> TrainOptionsForPoint(const MemoryPoint& point, int steps);

// "small" / "full" sweep summary for titles: "vocab=2048 seq_len=128 micro_batch=2, 2 steps".
std::string SweepDescription(const SweepOptions& sweep);
// "full sequence-length sweep: GPT layers=8 d_model=256 ... full_shard fp32 on 2 ranks, 2 steps".
std::string SeqLenSweepDescription(const SweepOptions& sweep);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_SWEEP_H_
