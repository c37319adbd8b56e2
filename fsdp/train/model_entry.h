// File: fsdp/train/model_entry.h
//
// A unit's backward through the fsdp::Model entry for the gradients' dtype
// as the unit's buffers hold them (fsdp/nn/dtype_buffer.h). The forward needs
// nothing of the kind: Model::ForwardUnit takes the parameters as they are.
//
//   FSDP_RETURN_IF_ERROR(BackwardModelUnit(model, 3, params, grads, write, scratch, 0.5f));
#ifndef FSDP_TRAIN_MODEL_ENTRY_H_
#define FSDP_TRAIN_MODEL_ENTRY_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "fsdp/nn/dtype_buffer.h"
#include "fsdp/nn/grad_write.h"
#include "fsdp/nn/model.h"

namespace fsdp {

// d(loss_scale * loss)/d(params) into `grads` as `write` says, in grads'
// dtype. fp32 gradients: the model writes them itself. bf16 gradients
// ([Note: bf16 gradients] in fsdp/train/unit_state.h; bf16 parameters only)
// go through `fp32_scratch` (grads' size): kOverwrite hands both to the model
// (Model::BackwardUnit writes bf16 gradients whole), kAdd has the model write
// fp32 ones into the scratch, adds them into `grads` in fp32 and rounds once
// per element. InvalidArgument for bf16 gradients with fp32 parameters or a
// scratch of the wrong size.
// int64 gradients (--exact) are exact sums the model adds into itself,
// with `exact` (UnitGrads) and the scratch.
absl::Status BackwardModelUnit(Model& model, int unit, ConstDtypeSpan params, DtypeSpan grads,
                               GradWrite write, absl::Span<float> fp32_scratch,
                               float loss_scale, ExactGradSums exact = {});

}  // namespace fsdp

#endif  // FSDP_TRAIN_MODEL_ENTRY_H_
