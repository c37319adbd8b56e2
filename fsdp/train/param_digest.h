// File: fsdp/train/param_digest.h
//
// SHA-256 of a model's parameters: every unit's real (unpadded) parameters in
// model order, each float as 4 little-endian bytes. Two runs end with the
// same digest exactly when their parameters are bit-identical, whatever the
// world size or strategy (padding is excluded), which is how tests and the
// train_gpt metrics file compare runs.
//
//   std::string hex = ParamSha256Hex({unit0_params, unit1_params});
#ifndef FSDP_TRAIN_PARAM_DIGEST_H_
#define FSDP_TRAIN_PARAM_DIGEST_H_

#include <string>
#include <vector>

#include "absl/types/span.h"

namespace fsdp {

// 64 lowercase hex digits.
std::string ParamSha256Hex(const std::vector<absl::Span<const float>>& units_in_order);

}  // namespace fsdp

#endif  // FSDP_TRAIN_PARAM_DIGEST_H_
