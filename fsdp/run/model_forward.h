// File: fsdp/run/model_forward.h
//
// One forward pass of the model (fsdp/nn/inference_model.h) over whatever holds
// its parameters: the trainer, which gathers each unit whole one at a time
// (DataParallelTrainer::ForEachGatheredUnit, the same for every strategy)
// and frees it before the next, or plain vectors loaded from a file.
//
//   ForEachModelUnit units = TrainerModelUnits(trainer);   // collective per pass
//   FSDP_RETURN_IF_ERROR(RunForward(forward, units, tokens, batch, seq));
//   FSDP_ASSIGN_OR_RETURN(absl::Span<const float> logits, forward.logits());
#ifndef FSDP_RUN_MODEL_FORWARD_H_
#define FSDP_RUN_MODEL_FORWARD_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "fsdp/nn/inference_model.h"
#include "fsdp/train/train_step.h"

namespace fsdp {

// Calls its argument with (model unit index, that unit's parameters) for
// every model unit in forward order; the span is valid during the call only.
using ModelUnitFn = std::function<absl::Status(int, absl::Span<const float>)>;
using ForEachModelUnit = std::function<absl::Status(const ModelUnitFn&)>;

// Over the trainer's units, gathered one plan unit at a time. Collective:
// every rank must run each pass. `trainer` must outlive the result.
ForEachModelUnit TrainerModelUnits(DataParallelTrainer& trainer);

// Over `params[u]`, unit u's flat parameters. `params` must outlive the result.
ForEachModelUnit VectorModelUnits(const std::vector<std::vector<float>>& params);

// Begin + every unit's RunUnit; the logits are then forward.logits().
absl::Status RunForward(InferenceModel& forward, const ForEachModelUnit& units,
                        absl::Span<const int32_t> tokens, int batch, int seq);

}  // namespace fsdp

#endif  // FSDP_RUN_MODEL_FORWARD_H_
