// File: fsdp/run/param_digest.h
//
// SHA-256 of a model's parameters: every unit's real (unpadded) parameters in
// model order, each float as 4 little-endian bytes. Two runs end with the
// same digest exactly when their parameters are bit-identical, whatever the
// world size or strategy (padding is excluded), which is how tests and the
// train_gpt metrics file compare runs.
//
//   std::string hex = ParamSha256Hex({unit0_params, unit1_params});
#ifndef FSDP_RUN_PARAM_DIGEST_H_
#define FSDP_RUN_PARAM_DIGEST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"

struct evp_md_ctx_st;

namespace fsdp {

// The same digest fed unit by unit, so that a sharded model can be hashed
// one gathered unit at a time (DataParallelTrainer::ForEachGatheredUnit).
class ParamDigest {
 public:
  ParamDigest();
  ~ParamDigest();
  ParamDigest(const ParamDigest&) = delete;
  ParamDigest& operator=(const ParamDigest&) = delete;
  // The next parameters in model order.
  void Update(absl::Span<const float> params);
  // 64 lowercase hex digits of everything fed.
  std::string HexDigest();

 private:
  evp_md_ctx_st* ctx_;
};

// 64 lowercase hex digits.
std::string ParamSha256Hex(const std::vector<absl::Span<const float>>& units_in_order);

}  // namespace fsdp

#endif  // FSDP_RUN_PARAM_DIGEST_H_
