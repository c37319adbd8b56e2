// File: fsdp/plan/hardware_description.cc
#include "fsdp/plan/hardware_description.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace fsdp {
namespace plan {
namespace {

// Keeps the parser's first error, with its position.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!error_.empty()) return;
    error_ = absl::StrCat("line ", line + 1, " column ", column + 1, ": ", message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("field ", field, " ", problem));
}

absl::Status CheckPositive(absl::string_view field, bool present, double value) {
  if (!present) return FieldError(field, "is missing");
  if (!std::isfinite(value) || value <= 0) {
    return FieldError(field, absl::StrCat("is ", value, "; it must be a positive number"));
  }
  return absl::OkStatus();
}

absl::Status CheckNonNegative(absl::string_view field, bool present, double value) {
  if (!present) return FieldError(field, "is missing");
  if (!std::isfinite(value) || value < 0) {
    return FieldError(field, absl::StrCat("is ", value, "; it must be zero or more"));
  }
  return absl::OkStatus();
}

absl::Status CheckLink(absl::string_view name, bool present, const proto::LinkLevel& link) {
  if (!present) return FieldError(name, "is missing");
  FSDP_RETURN_IF_ERROR(
      CheckNonNegative(absl::StrCat(name, ".latency_s"), link.has_latency_s(), link.latency_s()));
  return CheckPositive(absl::StrCat(name, ".bandwidth_bytes_per_s"),
                       link.has_bandwidth_bytes_per_s(), link.bandwidth_bytes_per_s());
}

int ThreadsOf(const proto::ProductRate& rate) { return rate.has_threads() ? rate.threads() : 1; }

// The rules shared by product_rates and peak_product_rates.
absl::Status CheckRates(absl::string_view list,
                        const google::protobuf::RepeatedPtrField<proto::ProductRate>& rates) {
  std::set<std::tuple<std::string, int, int64_t>> seen;
  std::set<std::pair<std::string, int>> groups, based;  // (dtype, threads)
  for (int i = 0; i < rates.size(); ++i) {
    const proto::ProductRate& rate = rates[i];
    const std::string field = absl::StrCat(list, "[", i, "]");
    if (!rate.has_dtype()) return FieldError(field + ".dtype", "is missing");
    if (rate.dtype() != "fp32" && rate.dtype() != "bf16") {
      return FieldError(field + ".dtype",
                        absl::StrCat("is \"", rate.dtype(), "\"; it must be \"fp32\" or \"bf16\""));
    }
    if (!rate.has_min_dimension()) return FieldError(field + ".min_dimension", "is missing");
    if (rate.min_dimension() < 0) {
      return FieldError(field + ".min_dimension",
                        absl::StrCat("is ", rate.min_dimension(), "; it must be zero or more"));
    }
    if (rate.has_threads() && rate.threads() < 1) {
      return FieldError(field + ".threads",
                        absl::StrCat("is ", rate.threads(), "; it must be at least 1 (or absent)"));
    }
    FSDP_RETURN_IF_ERROR(
        CheckPositive(field + ".flops_per_s", rate.has_flops_per_s(), rate.flops_per_s()));
    const int threads = ThreadsOf(rate);
    if (!seen.insert({rate.dtype(), threads, rate.min_dimension()}).second) {
      return FieldError(field, absl::StrCat("repeats dtype ", rate.dtype(), " with min_dimension ",
                                            rate.min_dimension(), " at ", threads, " thread(s)"));
    }
    groups.insert({rate.dtype(), threads});
    if (rate.min_dimension() == 0) based.insert({rate.dtype(), threads});
  }
  for (const char* dtype : {"fp32", "bf16"}) {
    if (!based.count({dtype, 1})) {
      return FieldError(list, absl::StrCat("has no entry with min_dimension 0 for ", dtype,
                                           ": every product needs a rate"));
    }
  }
  for (const auto& [dtype, threads] : groups) {
    if (!based.count({dtype, threads})) {
      return FieldError(
          list, absl::StrCat("has no entry with min_dimension 0 for ", dtype, " at ", threads,
                             " threads: every product of a rank with that many "
                             "threads needs a rate"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* ProductDtypeName(ProductDtype dtype) {
  return dtype == ProductDtype::kBf16 ? "bf16" : "fp32";
}

absl::StatusOr<proto::HardwareDescription> ParseHardwareDescription(absl::string_view text,
                                                                    absl::string_view origin) {
  proto::HardwareDescription hw;
  FirstError errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &hw)) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": not a HardwareDescription in text format (proto/hardware.proto): ",
        errors.error()));
  }
  absl::Status valid = ValidateHardwareDescription(hw);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", valid.message()));
  }
  return hw;
}

absl::Status ValidateHardwareDescription(const proto::HardwareDescription& hw) {
  if (!hw.has_name() || hw.name().empty()) return FieldError("name", "is missing");
  if (hw.product_rates_size() == 0) {
    return FieldError("product_rates", "is missing: give at least one entry for fp32 and bf16");
  }
  FSDP_RETURN_IF_ERROR(CheckRates("product_rates", hw.product_rates()));
  if (hw.peak_product_rates_size() > 0) {
    FSDP_RETURN_IF_ERROR(CheckRates("peak_product_rates", hw.peak_product_rates()));
  }
  FSDP_RETURN_IF_ERROR(CheckPositive("memory_bandwidth_bytes_per_s",
                                     hw.has_memory_bandwidth_bytes_per_s(),
                                     hw.memory_bandwidth_bytes_per_s()));
  if (!hw.has_ranks_per_node()) return FieldError("ranks_per_node", "is missing");
  if (hw.ranks_per_node() < 1) {
    return FieldError("ranks_per_node",
                      absl::StrCat("is ", hw.ranks_per_node(), "; it must be at least 1"));
  }
  if (!hw.has_processors_per_node()) return FieldError("processors_per_node", "is missing");
  if (hw.processors_per_node() < 1) {
    return FieldError("processors_per_node",
                      absl::StrCat("is ", hw.processors_per_node(), "; it must be at least 1"));
  }
  FSDP_RETURN_IF_ERROR(CheckPositive("memory_bytes_per_processor",
                                     hw.has_memory_bytes_per_processor(),
                                     hw.memory_bytes_per_processor()));
  FSDP_RETURN_IF_ERROR(CheckLink("intra_node", hw.has_intra_node(), hw.intra_node()));
  FSDP_RETURN_IF_ERROR(CheckLink("inter_node", hw.has_inter_node(), hw.inter_node()));
  if (!hw.has_network_rails_per_ring()) return FieldError("network_rails_per_ring", "is missing");
  if (hw.network_rails_per_ring() < 1) {
    return FieldError("network_rails_per_ring",
                      absl::StrCat("is ", hw.network_rails_per_ring(), "; it must be at least 1"));
  }
  FSDP_RETURN_IF_ERROR(
      CheckNonNegative("compute_time_cv", hw.has_compute_time_cv(), hw.compute_time_cv()));
  if (hw.has_framework_overhead()) {
    const proto::FrameworkOverhead& overhead = hw.framework_overhead();
    FSDP_RETURN_IF_ERROR(CheckNonNegative("framework_overhead.kernel_launch_s",
                                          overhead.has_kernel_launch_s(),
                                          overhead.kernel_launch_s()));
    FSDP_RETURN_IF_ERROR(CheckNonNegative("framework_overhead.collective_compute_share",
                                          overhead.has_collective_compute_share(),
                                          overhead.collective_compute_share()));
    if (overhead.collective_compute_share() >= 1) {
      return FieldError("framework_overhead.collective_compute_share",
                        absl::StrCat("is ", overhead.collective_compute_share(),
                                     "; it must be below 1 (a share of the processor)"));
    }
  }
  if (!hw.has_checkpoint_cost()) return absl::OkStatus();
  const proto::CheckpointCost& cost = hw.checkpoint_cost();
  FSDP_RETURN_IF_ERROR(CheckNonNegative("checkpoint_cost.save_fixed_s", cost.has_save_fixed_s(),
                                        cost.save_fixed_s()));
  FSDP_RETURN_IF_ERROR(CheckPositive("checkpoint_cost.save_bytes_per_s",
                                     cost.has_save_bytes_per_s(), cost.save_bytes_per_s()));
  FSDP_RETURN_IF_ERROR(CheckNonNegative("checkpoint_cost.restart_fixed_s",
                                        cost.has_restart_fixed_s(), cost.restart_fixed_s()));
  return CheckPositive("checkpoint_cost.restart_bytes_per_s", cost.has_restart_bytes_per_s(),
                       cost.restart_bytes_per_s());
}

namespace {

double RateIn(const google::protobuf::RepeatedPtrField<proto::ProductRate>& rates,
              ProductDtype dtype, int64_t smallest_dimension, int threads) {
  const std::string name = ProductDtypeName(dtype);
  // The most threads the description has for this dtype, up to `threads`.
  int group = 1;
  for (const proto::ProductRate& entry : rates) {
    if (entry.dtype() == name && ThreadsOf(entry) <= threads)
      group = std::max(group, ThreadsOf(entry));
  }
  int64_t best_dimension = -1;
  double rate = 0;
  for (const proto::ProductRate& entry : rates) {
    if (entry.dtype() != name || ThreadsOf(entry) != group) continue;
    if (entry.min_dimension() > smallest_dimension) continue;
    if (entry.min_dimension() > best_dimension) {
      best_dimension = entry.min_dimension();
      rate = entry.flops_per_s();
    }
  }
  return rate;
}

}  // namespace

double ProductRateFor(const proto::HardwareDescription& hw, ProductDtype dtype,
                      int64_t smallest_dimension, int threads) {
  return RateIn(hw.product_rates(), dtype, smallest_dimension, threads);
}

double PeakProductRate(const proto::HardwareDescription& hw, ProductDtype dtype) {
  const int64_t any_shape = int64_t{1} << 62;
  if (hw.peak_product_rates_size() > 0) return RateIn(hw.peak_product_rates(), dtype, any_shape, 1);
  return RateIn(hw.product_rates(), dtype, any_shape, 1);
}

std::string HardwareDescriptionToText(const proto::HardwareDescription& hw) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(hw, &text);
  return text;
}

}  // namespace plan
}  // namespace fsdp
