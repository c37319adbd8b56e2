// File: fsdp/nn/dtype_buffer.h
//
// Elements of a dtype named at run time (PrecisionPolicy's, comm::Dtype):
// a view (DtypeSpan, ConstDtypeSpan) and a tracked allocation (DtypeBuffer).
// The unit's buffers carry their dtype with them, so the state machine moves
// and slices them without asking which precision it is in; code that reads
// the elements (a kernel, the model) takes the typed span with as<T>(), which
// checks the dtype, at the one place it dispatches on it
// (fsdp/train/dtype_kernels.h).
//
//   FSDP_ASSIGN_OR_RETURN(DtypeBuffer grads, DtypeBuffer::Allocate(
//       tracker, MemoryCategory::kGradients, policy.reduce_dtype, n, "grads"));
//   DtypeSpan mine = grads.span().subspan(rank * shard, shard);
//   if (mine.dtype() == comm::Dtype::kBFloat16) Use(mine.as<uint16_t>());
#ifndef FSDP_NN_DTYPE_BUFFER_H_
#define FSDP_NN_DTYPE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/dtype.h"
#include "fsdp/memory/memory_tracker.h"

namespace fsdp {

// The dtype of a C++ element type: float is fp32, uint16_t bf16 bits,
// int64_t exact fixed-point sums.
template <typename T>
constexpr comm::Dtype DtypeOf();
template <>
constexpr comm::Dtype DtypeOf<float>() { return comm::Dtype::kFloat32; }
template <>
constexpr comm::Dtype DtypeOf<uint16_t>() { return comm::Dtype::kBFloat16; }
template <>
constexpr comm::Dtype DtypeOf<int64_t>() { return comm::Dtype::kInt64; }

// `size()` elements of `dtype()` at `data()`; not owning. Mutable elements
// (ConstDtypeSpan reads them only).
template <typename Byte>
class BasicDtypeSpan {
 public:
  BasicDtypeSpan() = default;
  template <typename T>
  BasicDtypeSpan(absl::Span<T> values)  // NOLINT: a typed span is a DtypeSpan
      : dtype_(DtypeOf<std::remove_const_t<T>>()),
        data_(reinterpret_cast<Byte*>(values.data())),
        size_(static_cast<int64_t>(values.size())) {}
  // A mutable view reads as a const one.
  template <typename OtherByte>
  BasicDtypeSpan(const BasicDtypeSpan<OtherByte>& other)  // NOLINT
      : dtype_(other.dtype()), data_(other.data()), size_(other.size()) {}

  // `numel` elements of `dtype` starting at `data`.
  static BasicDtypeSpan Of(comm::Dtype dtype, Byte* data, int64_t numel) {
    BasicDtypeSpan out;
    out.dtype_ = dtype;
    out.data_ = data;
    out.size_ = numel;
    return out;
  }

  comm::Dtype dtype() const { return dtype_; }
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Byte* data() const { return data_; }
  int64_t num_bytes() const { return size_ * static_cast<int64_t>(comm::DtypeSize(dtype_)); }
  absl::Span<Byte> bytes() const { return absl::Span<Byte>(data_, num_bytes()); }

  // Elements [offset, offset + n), or to the end when n < 0.
  BasicDtypeSpan subspan(int64_t offset, int64_t n = -1) const {
    FSDP_CHECK(offset >= 0 && offset <= size_ && n <= size_ - offset);
    BasicDtypeSpan out = *this;
    out.data_ = data_ + offset * static_cast<int64_t>(comm::DtypeSize(dtype_));
    out.size_ = n < 0 ? size_ - offset : n;
    return out;
  }

  // The elements as T (float for fp32, uint16_t for bf16, int64_t for
  // int64); the dtype must match (a programmer's error otherwise).
  template <typename T>
  auto as() const {
    FSDP_CHECK(dtype_ == DtypeOf<T>());
    using Elem = std::conditional_t<std::is_const<Byte>::value, const T, T>;
    return absl::Span<Elem>(reinterpret_cast<Elem*>(data_), static_cast<size_t>(size_));
  }

  // The same memory and the same elements.
  bool SameAs(const BasicDtypeSpan& other) const {
    return dtype_ == other.dtype_ && data_ == other.data_ && size_ == other.size_;
  }

 private:
  comm::Dtype dtype_ = comm::Dtype::kFloat32;
  Byte* data_ = nullptr;
  int64_t size_ = 0;
};

using DtypeSpan = BasicDtypeSpan<std::byte>;
using ConstDtypeSpan = BasicDtypeSpan<const std::byte>;

// A tracked allocation of `size()` elements of `dtype()` (MemoryTracker).
// Move-only; empty when default-constructed or after Reset().
class DtypeBuffer {
 public:
  DtypeBuffer() = default;
  explicit DtypeBuffer(comm::Dtype dtype) : dtype_(dtype) {}

  // Zeroed (Allocate) or not (AllocateUninitialized, for a buffer whose
  // every element is written before it is read). Errors are the tracker's.
  static absl::StatusOr<DtypeBuffer> Allocate(MemoryTracker& tracker, MemoryCategory category,
                                              comm::Dtype dtype, int64_t numel,
                                              absl::string_view label) {
    return AllocateImpl(tracker, category, dtype, numel, label, /*zeroed=*/true);
  }
  static absl::StatusOr<DtypeBuffer> AllocateUninitialized(MemoryTracker& tracker,
                                                           MemoryCategory category,
                                                           comm::Dtype dtype, int64_t numel,
                                                           absl::string_view label) {
    return AllocateImpl(tracker, category, dtype, numel, label, /*zeroed=*/false);
  }

  comm::Dtype dtype() const { return dtype_; }
  int64_t size() const { return bytes_.size() / static_cast<int64_t>(comm::DtypeSize(dtype_)); }
  bool empty() const { return bytes_.empty(); }
  void Reset() { bytes_.Reset(); }
  DtypeSpan span() { return DtypeSpan::Of(dtype_, bytes_.data(), size()); }
  ConstDtypeSpan span() const { return ConstDtypeSpan::Of(dtype_, bytes_.data(), size()); }

 private:
  static absl::StatusOr<DtypeBuffer> AllocateImpl(MemoryTracker& tracker,
                                                  MemoryCategory category, comm::Dtype dtype,
                                                  int64_t numel, absl::string_view label,
                                                  bool zeroed) {
    DtypeBuffer out(dtype);
    const int64_t num_bytes = numel * static_cast<int64_t>(comm::DtypeSize(dtype));
    FSDP_ASSIGN_OR_RETURN(out.bytes_,
                          zeroed ? tracker.Allocate<std::byte>(category, num_bytes, label)
                                 : tracker.AllocateUninitialized<std::byte>(category, num_bytes,
                                                                            label));
    return out;
  }
  comm::Dtype dtype_ = comm::Dtype::kFloat32;
  TrackedBuffer<std::byte> bytes_;
};

}  // namespace fsdp

#endif  // FSDP_NN_DTYPE_BUFFER_H_
