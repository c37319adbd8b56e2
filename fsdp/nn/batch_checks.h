// File: fsdp/nn/batch_checks.h
//
// Validation of a Batch against what a model was built for, shared by the
// models so bad data is an InvalidArgument, never an out-of-bounds read.
#ifndef FSDP_NN_BATCH_CHECKS_H_
#define FSDP_NN_BATCH_CHECKS_H_

#include "absl/status/status.h"
#include "fsdp/nn/model.h"

namespace fsdp {

// Checks 1 <= batch_size <= max_batch, 1 <= seq_len <= max_seq_len, both
// token arrays hold batch_size * seq_len entries, and every token lies in
// [0, vocab).
absl::Status ValidateBatch(const Batch& batch, int max_batch, int max_seq_len, int vocab);

}  // namespace fsdp

#endif  // FSDP_NN_BATCH_CHECKS_H_
