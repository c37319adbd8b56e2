// File: fsdp/plan/hardware_description.h
//
// Reads and checks a cluster description (proto/hardware.proto) written in
// protobuf text format, and answers the one question the step-time model
// asks of it per product: at what rate does this shape run.
//
//   FSDP_ASSIGN_OR_RETURN(proto::HardwareDescription hw,
//                         ParseHardwareDescription(text, "a100_ib200.textproto"));
//   double rate = ProductRateFor(hw, ProductDtype::kBf16, /*min_dimension=*/768);
//
// Shipped descriptions, with a citation for every number:
// fsdp/plan/clusters/*.textproto (docs/planning.md).
#ifndef FSDP_PLAN_HARDWARE_DESCRIPTION_H_
#define FSDP_PLAN_HARDWARE_DESCRIPTION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/hardware.pb.h"

namespace fsdp {
namespace plan {

// The operand dtype of a matrix product (accumulation is fp32 in both).
enum class ProductDtype { kFp32, kBf16 };

// "fp32" / "bf16": the spelling of ProductRate.dtype.
const char* ProductDtypeName(ProductDtype dtype);

// Parses `text` and validates it. `origin` (a file name) prefixes every
// error. InvalidArgument for a syntax error or unknown field (with line and
// column), or for the first field ValidateHardwareDescription rejects.
absl::StatusOr<proto::HardwareDescription> ParseHardwareDescription(absl::string_view text,
                                                                    absl::string_view origin);

// OK, or InvalidArgument naming the field and what it must be: every field
// present; rates, bandwidths, ranks_per_node and processors_per_node positive; latencies,
// min_dimension and compute_time_cv non-negative; dtype "fp32" or "bf16";
// threads at least 1 when given; an entry with min_dimension 0 for each of
// fp32 and bf16 at one thread, and for every (dtype, threads) the entries
// name (so that every product has a rate); no two entries with the same
// dtype, threads and min_dimension;
// network_rails_per_ring at least 1; checkpoint_cost, when given, with
// every field, its bandwidths positive and its fixed costs non-negative; peak_product_rates, when given, under
// the same rules as product_rates; framework_overhead, when given, with
// both fields, kernel_launch_s non-negative and collective_compute_share in
// [0, 1).
absl::Status ValidateHardwareDescription(const proto::HardwareDescription& hw);

// The rate of the entry of `dtype` with the largest min_dimension <=
// `smallest_dimension` (min(m, n, k) of the product), among the entries of
// the most threads the description has up to `threads` (one rank's compute
// threads; entries without threads are one). Assumes a valid description.
double ProductRateFor(const proto::HardwareDescription& hw, ProductDtype dtype,
                      int64_t smallest_dimension, int threads = 1);

// The rate MFU is measured against, per processor: the highest one-thread
// rate of peak_product_rates for `dtype` when the description has them, else
// of product_rates.
double PeakProductRate(const proto::HardwareDescription& hw, ProductDtype dtype);

// Text format of `hw`, fields in declaration order (what a calibration writes).
std::string HardwareDescriptionToText(const proto::HardwareDescription& hw);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_HARDWARE_DESCRIPTION_H_
