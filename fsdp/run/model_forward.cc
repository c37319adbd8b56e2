// File: fsdp/run/model_forward.cc
#include "fsdp/run/model_forward.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fsdp {

ForEachModelUnit TrainerModelUnits(DataParallelTrainer& trainer) {
  return [&trainer](const ModelUnitFn& fn) {
    return trainer.ForEachGatheredUnit(
        [&fn](const proto::UnitPlan& plan, absl::Span<const float> whole) -> absl::Status {
          for (const proto::SourceUnit& source : plan.source_units()) {
            FSDP_RETURN_IF_ERROR(
                fn(source.model_unit_index(), whole.subspan(source.offset(), source.numel())));
          }
          return absl::OkStatus();
        });
  };
}

ForEachModelUnit VectorModelUnits(const std::vector<std::vector<float>>& params) {
  return [&params](const ModelUnitFn& fn) -> absl::Status {
    for (size_t u = 0; u < params.size(); ++u) {
      FSDP_RETURN_IF_ERROR(fn(static_cast<int>(u), params[u]));
    }
    return absl::OkStatus();
  };
}

absl::Status RunForward(InferenceModel& forward, const ForEachModelUnit& units,
                        absl::Span<const int32_t> tokens, int batch, int seq) {
  FSDP_RETURN_IF_ERROR(forward.Begin(tokens, batch, seq));
  return units([&forward](int unit, absl::Span<const float> params) {
    return forward.RunUnit(unit, params);
  });
}

}  // namespace fsdp
