// File: tests/integration/comm/collective_reference.cc
#include "base/bfloat16.h"
#include "tests/integration/comm/collective_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace comm_test {
namespace {

// Output buffers start as all-ones bytes: a NaN in fp32 and in bf16, which no
// input formula produces and which compares unequal to every expectation.
constexpr std::byte kNeverWrittenByte{0xFF};
constexpr std::byte kGuardByte{0xA5};

float ReadElement(comm::Dtype dtype, absl::Span<const std::byte> bytes, size_t i) {
  if (dtype == comm::Dtype::kFloat32) {
    float value;
    std::memcpy(&value, bytes.data() + i * 4, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes.data() + i * 2, 2);
  return base::FromBf16Bits(bits);
}

void WriteElement(comm::Dtype dtype, float value, std::byte* bytes, size_t i) {
  if (dtype == comm::Dtype::kFloat32) {
    std::memcpy(bytes + i * 4, &value, 4);
  } else {
    uint16_t bits = base::ToBf16Bits(value);
    std::memcpy(bytes + i * 2, &bits, 2);
  }
}

// Rounds `value` to what `dtype` can hold (identity for fp32).
float RoundTo(comm::Dtype dtype, float value) {
  if (dtype == comm::Dtype::kFloat32) return value;
  return base::FromBf16Bits(base::ToBf16Bits(value));
}

// The distance from |value| to the next representable magnitude in `dtype`.
float UnitInLastPlace(comm::Dtype dtype, float value) {
  float magnitude = std::fabs(value);
  if (dtype == comm::Dtype::kFloat32) {
    return std::nextafter(magnitude, INFINITY) - magnitude;
  }
  uint16_t bits = base::ToBf16Bits(magnitude);
  return base::FromBf16Bits(static_cast<uint16_t>(bits + 1)) -
         base::FromBf16Bits(bits);
}

// Accumulates mismatches and renders the first one.
class MismatchReport {
 public:
  // `begin`: index of the first checked element in the whole buffer.
  explicit MismatchReport(size_t count, size_t begin = 0) : count_(count), begin_(begin) {}
  void Add(size_t index, float expected, float got) {
    if (wrong_ == 0) {
      std::string range = begin_ == 0 ? absl::StrCat("of ", count_)
                                      : absl::StrCat("checked ", begin_, "..",
                                                     begin_ + count_ - 1);
      first_ = absl::StrCat("element ", index, " (", range, "): expected ", expected,
                            ", got ", got,
                            std::isnan(got) ? " (never written)" : "");
    }
    ++wrong_;
  }
  std::string Render() const {
    if (wrong_ == 0) return "";
    return absl::StrCat(first_, "; ", wrong_, " element(s) wrong");
  }

 private:
  size_t count_;
  size_t begin_;
  size_t wrong_ = 0;
  std::string first_;
};

// The wrapping int64 sum of every source's element `index`, checked exactly.
std::string CheckInt64Sum(absl::Span<const int> sources, size_t begin, size_t count,
                          uint64_t salt, absl::Span<const std::byte> got) {
  size_t wrong = 0;
  std::string first;
  for (size_t i = 0; i < count; ++i) {
    uint64_t expected = 0;
    for (int source : sources) {
      expected += static_cast<uint64_t>(Int64InputValue(source, begin + i, salt));
    }
    uint64_t value;
    std::memcpy(&value, got.data() + i * 8, 8);
    if (value != expected) {
      if (wrong == 0) {
        first = absl::StrCat("element ", begin + i, ": expected ",
                             static_cast<int64_t>(expected), ", got ",
                             static_cast<int64_t>(value));
      }
      ++wrong;
    }
  }
  return wrong == 0 ? "" : absl::StrCat(first, "; ", wrong, " element(s) wrong");
}

}  // namespace

int64_t Int64InputValue(int source, uint64_t index, uint64_t salt) {
  // splitmix64's finalizer over the three: every bit depends on all of them.
  uint64_t z = static_cast<uint64_t>(source) * 0x9E3779B97F4A7C15ull + index * 0xBF58476D1CE4E5B9ull +
               salt * 0x94D049BB133111EBull + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>(z ^ (z >> 31));
}

float InputValue(ValueMode mode, int source, uint64_t index, uint64_t salt) {
  uint64_t mix = static_cast<uint64_t>(source) * 131 + index * 7 + salt * 13;
  if (mode == ValueMode::kSmallIntegers) {
    return static_cast<float>(static_cast<int>(mix % 17) - 8);
  }
  // The odd per-source step gives contributions of both parities in 1/128,
  // so partial sums land between bf16 values at every magnitude.
  uint64_t k = (index * 35 + salt * 65 + static_cast<uint64_t>(source) * 29) % 128;
  return 1.0f + static_cast<float>(k) / 128.0f;
}

std::vector<std::byte> MakeInput(comm::Dtype dtype, ValueMode mode, int source,
                                 size_t count, uint64_t salt) {
  std::vector<std::byte> bytes(count * comm::DtypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    if (dtype == comm::Dtype::kInt64) {
      const int64_t value = Int64InputValue(source, i, salt);
      std::memcpy(bytes.data() + i * 8, &value, 8);
    } else {
      WriteElement(dtype, InputValue(mode, source, i, salt), bytes.data(), i);
    }
  }
  return bytes;
}

std::vector<std::byte> MakeOutputWithGuard(size_t num_bytes) {
  std::vector<std::byte> bytes(num_bytes + kGuardBytes, kGuardByte);
  std::fill(bytes.begin(), bytes.begin() + num_bytes, kNeverWrittenByte);
  return bytes;
}

std::string CheckGuard(absl::Span<const std::byte> buffer_with_guard, size_t num_bytes) {
  for (size_t i = num_bytes; i < buffer_with_guard.size(); ++i) {
    if (buffer_with_guard[i] != kGuardByte) {
      return absl::StrCat("wrote past the end of the output: byte ", i - num_bytes,
                          " after its ", num_bytes, " bytes changed");
    }
  }
  return "";
}

size_t ChunkBegin(size_t count, int group_size, int group_rank) {
  size_t chunk = (count + group_size - 1) / group_size;
  size_t begin = chunk * group_rank;
  return begin < count ? begin : count;
}

size_t ChunkSize(size_t count, int group_size, int group_rank) {
  size_t chunk = (count + group_size - 1) / group_size;
  size_t begin = ChunkBegin(count, group_size, group_rank);
  return count - begin < chunk ? count - begin : chunk;
}

std::string CheckAllGather(comm::Dtype dtype, ValueMode mode,
                           absl::Span<const int> sources, size_t count_per_rank,
                           uint64_t salt, absl::Span<const std::byte> got) {
  size_t total = count_per_rank * sources.size();
  if (got.size() != total * comm::DtypeSize(dtype)) {
    return absl::StrCat("output has ", got.size(), " bytes, expected ",
                        total * comm::DtypeSize(dtype));
  }
  MismatchReport report(total);
  for (size_t p = 0; p < sources.size(); ++p) {
    for (size_t i = 0; i < count_per_rank; ++i) {
      float expected = RoundTo(dtype, InputValue(mode, sources[p], i, salt));
      float value = ReadElement(dtype, got, p * count_per_rank + i);
      if (!(value == expected)) report.Add(p * count_per_rank + i, expected, value);
    }
  }
  return report.Render();
}

std::string CheckReduced(comm::Dtype dtype, comm::ReduceOp op, ValueMode mode,
                         absl::Span<const int> sources, size_t begin, size_t count,
                         uint64_t salt, absl::Span<const std::byte> got,
                         Bf16Rounding rounding) {
  if (got.size() < count * comm::DtypeSize(dtype)) {
    return absl::StrCat("output has ", got.size(), " bytes, expected at least ",
                        count * comm::DtypeSize(dtype));
  }
  if (dtype == comm::Dtype::kInt64) {
    if (op != comm::ReduceOp::kSum) return "int64 data can only be summed";
    return CheckInt64Sum(sources, begin, count, salt, got);
  }
  MismatchReport report(count, begin);
  const bool average = op == comm::ReduceOp::kAverage;
  const bool per_hop = rounding == Bf16Rounding::kPerHop && dtype == comm::Dtype::kBFloat16;
  for (size_t i = 0; i < count; ++i) {
    // Exact: every input is a multiple of 1/128 below 17 in magnitude.
    double sum = 0;
    for (int source : sources) sum += InputValue(mode, source, begin + i, salt);
    float exact = static_cast<float>(average ? sum / sources.size() : sum);
    float expected = RoundTo(dtype, exact);
    float value = ReadElement(dtype, got, i);
    float ulp = UnitInLastPlace(dtype, expected);
    float tolerance = per_hop ? ulp * sources.size() : average ? ulp : 0.0f;
    if (!(std::fabs(value - expected) <= tolerance)) {
      report.Add(begin + i, expected, value);
    }
  }
  return report.Render();
}

std::string CheckBroadcast(comm::Dtype dtype, ValueMode mode, int root_source,
                           size_t count, uint64_t salt, absl::Span<const std::byte> got) {
  MismatchReport report(count);
  for (size_t i = 0; i < count; ++i) {
    float expected = RoundTo(dtype, InputValue(mode, root_source, i, salt));
    float value = ReadElement(dtype, got, i);
    if (!(value == expected)) report.Add(i, expected, value);
  }
  return report.Render();
}

}  // namespace comm_test
