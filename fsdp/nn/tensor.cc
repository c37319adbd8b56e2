// File: fsdp/nn/tensor.cc
#include "fsdp/nn/tensor.h"

#include "absl/strings/str_cat.h"

namespace fsdp {
namespace {

template <typename T>
absl::StatusOr<std::vector<BasicTensorView<T>>> ViewParamsImpl(const UnitSpec& unit,
                                                               absl::Span<T> flat) {
  if (static_cast<int64_t>(flat.size()) != unit.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unit '", unit.name, "' has ", unit.numel(), " parameters but its flat buffer holds ",
        flat.size(), " floats; pass exactly the unit's (unsharded) buffer"));
  }
  std::vector<BasicTensorView<T>> views;
  views.reserve(unit.params.size());
  int64_t offset = 0;
  for (const ParamSpec& p : unit.params) {
    if (p.shape.size() > BasicTensorView<T>::kMaxRank) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", p.name, "' has ", p.shape.size(), " dimensions; at most ",
                       BasicTensorView<T>::kMaxRank, " are supported"));
    }
    views.emplace_back(flat.data() + offset, p.shape);
    offset += p.numel();
  }
  return views;
}

}  // namespace

absl::StatusOr<std::vector<ConstTensorView>> ViewParams(const UnitSpec& unit,
                                                        absl::Span<const float> flat) {
  return ViewParamsImpl<const float>(unit, flat);
}

absl::StatusOr<std::vector<TensorView>> ViewParams(const UnitSpec& unit, absl::Span<float> flat) {
  return ViewParamsImpl<float>(unit, flat);
}

}  // namespace fsdp
