// File: fsdp/report/budget.h
//
// Does a training configuration fit a per-rank memory budget, and if not,
// what would? Predictions come from EstimateRankMemory (memory_estimate.h);
// nothing is allocated.
//
//   // In train_gpt's launching parent, before any rank starts:
//   FSDP_ASSIGN_OR_RETURN(int64_t budget, ParseByteSize(absl::GetFlag(FLAGS_mem_budget)));
//   FSDP_RETURN_IF_ERROR(CheckTrainingFitsBudget(options, budget));
//
// A configuration over budget gives kResourceExhausted like
//
//   no_shard fp32 on 2 ranks (layers=16 d_model=512 ... micro_batch=2) needs
//   1.04 GiB per rank, 0.54 GiB (108%) over the budget of 512.00 MiB; the
//   largest part is optimizer_state: 400.12 MiB (38% of the total; parameters
//   200.06 MiB, gradients 200.06 MiB, optimizer_state 400.12 MiB, activations
//   ...). Would fit: full_shard on 4 ranks (310.20 MiB), shard_grad_op on 8
//   ranks (...). Or, with --activation_checkpointing=every:2, no_shard on 2
//   ranks would fit (498.21 MiB).
#ifndef FSDP_REPORT_BUDGET_H_
#define FSDP_REPORT_BUDGET_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fsdp/report/activation_mode.h"
#include "fsdp/report/memory_estimate.h"
#include "fsdp/run/train_options.h"

namespace fsdp {
namespace report {

// OK when EstimateRankMemory(point).total_bytes() <= budget_bytes.
// kResourceExhausted otherwise, naming the predicted bytes, how much over,
// the dominant category (with every category's bytes), and up to four
// configurations that would fit, fewest ranks first: the least sharded
// other strategy that fits on the same ranks, and each strategy that does
// not at its smallest rank count among ranks x 2^k (up to 65536 ranks);
// hybrid_shard left out (it never needs less than full_shard). Then the
// activation mode that would make it fit on the same strategy and ranks,
// the least recomputation first (ActivationModesByCost: --attention=flash,
// --activation_checkpointing=every:2, both, all, all with flash), named as
// train_gpt's flags; or, when none would, what the leanest mode still
// needs. When no strategy fits, it says which part (e.g. activations and
// workspace, which sharding does not reduce) alone exceeds the budget, the
// activation mode and strategies that would fit if one does, and what to
// reduce. kInvalidArgument for budget_bytes <= 0 or a bad point.
//
// `batch` says what a suggestion does to the global batch: more ranks at the
// same micro_batch (and accum) grow it to micro_batch x accum x ranks. With a
// measured gradient noise scale (docs/batch-size.md), each suggestion whose
// global batch exceeds it says so ("full_shard on 64 ranks (1.2 GiB; global
// batch 512, 18x the noise scale of 28)"), and the message ends with what
// that costs and the way around it (a smaller micro_batch).
struct BatchScale {
  int accum = 1;            // micro-batches per step
  double noise_scale = 0;   // sequences; 0: unknown, nothing said
};
absl::Status CheckFitsBudget(const MemoryPoint& point, int64_t budget_bytes,
                             const BatchScale& batch = {});

// The MemoryPoint a training run's options describe: its model (--model=gpt
// or llama, shaped as fsdp/models/gpt_config.h or llama_config.h), micro_batch,
// activation mode, strategy, nproc ranks, group size, prefetch depth and
// min_unit_numel, fp32, or under --precision=bf16 mixed (bf16 gradients) or
// bf16 (--reduce_dtype=fp32), Adam for AdamW and SGD with momentum
// for SGD (fsdp/run/unit_optimizers.cc). InvalidArgument for a bad strategy
// or another model family.
absl::StatusOr<MemoryPoint> MemoryPointFromTrainOptions(const TrainOptions& options);

// CheckFitsBudget(MemoryPointFromTrainOptions(options), budget_bytes): what
// train_gpt calls for --mem_budget.
absl::Status CheckTrainingFitsBudget(const TrainOptions& options, int64_t budget_bytes);

// The largest member of the GPT family (gpt_family.h, with point.config's
// vocab, seq_len and activation mode) that fits budget_bytes with point's
// strategy, ranks, precision, micro_batch and optimizer, scanning every
// width up to kGptFamilyMaxWidth; nullopt when even the smallest does not
// fit. Under every:K the members with fewer than K blocks are skipped (they
// cannot take the mode). InvalidArgument for a Llama point: the family
// scanned is the GPT's.

struct FittingModel {
  GptConfig config;
  RankMemoryEstimate estimate;
  // The next family member, the first over budget (num_params 0 when the
  // scan reached kGptFamilyMaxWidth): the budget is crossed in between.
  int64_t next_num_params = 0;
  int64_t next_total_bytes = 0;
};
absl::StatusOr<std::optional<FittingModel>> LargestFittingFamilyModel(const MemoryPoint& point,
                                                                      int64_t budget_bytes);

// The longest sequence that fits budget_bytes for point's model, GPT or
// Llama (all of point but its seq_len, which also sizes the GPT's position
// embedding),
// found by bisection over 1..kMaxSearchedSeqLen (memory grows with seq_len);
// nullopt when not even one token fits.
inline constexpr int kMaxSearchedSeqLen = 1 << 20;
struct FittingSeqLen {
  int seq_len = 0;
  RankMemoryEstimate estimate;
  bool at_search_limit = false;  // seq_len == kMaxSearchedSeqLen: it may go further
};
absl::StatusOr<std::optional<FittingSeqLen>> LargestFittingSeqLen(const MemoryPoint& point,
                                                                  int64_t budget_bytes);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_BUDGET_H_
