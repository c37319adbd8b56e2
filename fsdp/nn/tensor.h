// File: fsdp/nn/tensor.h
//
// A non-owning view of a contiguous row-major fp32 tensor: a pointer into a
// flat buffer plus a shape (rank <= 4). The layers take raw pointers and
// sizes (like llm.c); views exist to carve a unit's flat parameter buffer into
// its named parameters without copying:
//
//   FSDP_ASSIGN_OR_RETURN(std::vector<ConstTensorView> p,
//                         ViewParams(unit_spec, params));   // one per ParamSpec
//   const float* qkv_weight = p[2].data();                   // {3C, C}
#ifndef FSDP_NN_TENSOR_H_
#define FSDP_NN_TENSOR_H_

#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fsdp/nn/param_spec.h"

namespace fsdp {

template <typename T>  // float or const float
class BasicTensorView {
 public:
  static constexpr int kMaxRank = 4;

  BasicTensorView() = default;
  // `shape` has at most kMaxRank dimensions (checked by the caller).
  BasicTensorView(T* data, absl::Span<const int64_t> shape) : data_(data) {
    rank_ = static_cast<int>(shape.size());
    for (int i = 0; i < rank_; ++i) shape_[i] = shape[i];
  }

  T* data() const { return data_; }
  int rank() const { return rank_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= shape_[i];
    return n;
  }
  absl::Span<T> span() const { return absl::Span<T>(data_, numel()); }

 private:
  T* data_ = nullptr;
  std::array<int64_t, kMaxRank> shape_{};
  int rank_ = 0;
};

using TensorView = BasicTensorView<float>;
using ConstTensorView = BasicTensorView<const float>;

// Splits a unit's flat buffer into one view per parameter, in spec order.
// InvalidArgument if the buffer's size differs from unit.numel() or a shape
// has more than four dimensions.
absl::StatusOr<std::vector<ConstTensorView>> ViewParams(const UnitSpec& unit,
                                                        absl::Span<const float> flat);
absl::StatusOr<std::vector<TensorView>> ViewParams(const UnitSpec& unit, absl::Span<float> flat);

}  // namespace fsdp

#endif  // FSDP_NN_TENSOR_H_
