// File: fsdp/train/model_entry.h
//
// A unit's forward and backward through the fsdp::Model entry for the dtypes
// its buffers hold (fsdp/train/dtype_buffer.h): the one place the training
// step dispatches on the parameters' and gradients' dtype to reach the model
// (which has a virtual per precision, fsdp/nn/model.h).
//
//   FSDP_RETURN_IF_ERROR(ForwardModelUnit(model, 3, params, batch));
//   FSDP_RETURN_IF_ERROR(BackwardModelUnit(model, 3, params, grads, write, scratch, 0.5f));
#ifndef FSDP_TRAIN_MODEL_ENTRY_H_
#define FSDP_TRAIN_MODEL_ENTRY_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "fsdp/nn/grad_write.h"
#include "fsdp/nn/model.h"
#include "fsdp/train/dtype_buffer.h"

namespace fsdp {

// Model::ForwardUnit (fp32 parameters) or ForwardUnitBf16 (bf16).
absl::Status ForwardModelUnit(Model& model, int unit, ConstDtypeSpan params, const Batch& batch);

// d(loss_scale * loss)/d(params) into `grads` as `write` says, in grads'
// dtype. fp32 gradients: the model writes them itself (BackwardUnit, or
// BackwardUnitBf16 for bf16 parameters). bf16 gradients ([Note: bf16
// gradients] in fsdp/train/unit_state.h; bf16 parameters only) go through
// `fp32_scratch` (grads' size): kOverwrite rounds them into `grads`
// (Model::BackwardUnitBf16ToBf16Grads), kAdd adds them into `grads` in fp32
// and rounds once per element. InvalidArgument for bf16 gradients with fp32
// parameters or a scratch of the wrong size.
absl::Status BackwardModelUnit(Model& model, int unit, ConstDtypeSpan params, DtypeSpan grads,
                               GradWrite write, absl::Span<float> fp32_scratch,
                               float loss_scale);

}  // namespace fsdp

#endif  // FSDP_TRAIN_MODEL_ENTRY_H_
