// File: fsdp/run/unit_optimizers.h
//
// UnitOptimizer (fsdp/train/unit_optimizer.h) over fsdp/optim/: one AdamW or
// SGD-with-momentum instance per unit, its state in tracked buffers.
//
//   FSDP_ASSIGN_OR_RETURN(std::unique_ptr<UnitOptimizer> opt,
//                         MakeUnitOptimizer(OptimizerKind::kAdamW, /*weight_decay=*/0.1f));
#ifndef FSDP_RUN_UNIT_OPTIMIZERS_H_
#define FSDP_RUN_UNIT_OPTIMIZERS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "fsdp/run/train_options.h"
#include "fsdp/train/unit_optimizer.h"

namespace fsdp {

// AdamW (betas 0.9/0.999, eps 1e-8) or SGD (momentum 0.9), both with
// `weight_decay` on every element. InvalidArgument for a negative decay.
absl::StatusOr<std::unique_ptr<UnitOptimizer>> MakeUnitOptimizer(OptimizerKind kind,
                                                                 float weight_decay);

}  // namespace fsdp

#endif  // FSDP_RUN_UNIT_OPTIMIZERS_H_
