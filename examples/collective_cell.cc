// File: examples/collective_cell.cc
#include "base/bfloat16.h"
#include "examples/collective_cell.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "base/status_macros.h"

namespace collective_bench {
namespace {

// Small integers: every sum over up to 85 ranks is exact in fp32 and bf16.
float InputValue(int rank, size_t index) {
  return static_cast<float>(static_cast<int>((rank * 3 + index) % 7) - 3);
}

void Fill(comm::Dtype dtype, int rank, size_t offset, std::byte* out, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    float value = InputValue(rank, offset + i);
    if (dtype == comm::Dtype::kFloat32) {
      std::memcpy(out + 4 * i, &value, 4);
    } else {
      uint16_t bits = base::ToBf16Bits(value);
      std::memcpy(out + 2 * i, &bits, 2);
    }
  }
}

float Read(comm::Dtype dtype, const std::byte* in, size_t i) {
  if (dtype == comm::Dtype::kFloat32) {
    float value;
    std::memcpy(&value, in + 4 * i, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, in + 2 * i, 2);
  return base::FromBf16Bits(bits);
}

}  // namespace

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kBroadcast: return "broadcast";
  }
  return "?";
}

double BusFactor(Collective c, int n) {
  switch (c) {
    case Collective::kAllGather:
    case Collective::kReduceScatter: return (n - 1.0) / n;
    case Collective::kAllReduce: return 2.0 * (n - 1.0) / n;
    case Collective::kBroadcast: return 1.0;
  }
  return 1.0;
}

Cell::Cell(comm::Communicator& comm, const CellOptions& options, Collective collective,
           size_t nominal_bytes)
    : comm_(comm), dtype_(options.dtype), algorithm_(options.algorithm),
      collective_(collective), in_place_(options.in_place) {
  const int n = comm.size();
  const size_t element = comm::DtypeSize(dtype_);
  if (collective == Collective::kAllGather || collective == Collective::kReduceScatter) {
    count_ = nominal_bytes / (element * n);  // per rank
    big_ = Allocate(count_ * n * element, options.huge_pages);
    if (!in_place_) small_ = Allocate(count_ * element, options.huge_pages);
  } else {
    count_ = nominal_bytes / element;
    big_ = Allocate(count_ * element, options.huge_pages);
  }
}

Cell::Buffer Cell::Allocate(size_t bytes, bool huge_pages) {
  Buffer buffer;
  if (bytes == 0) return buffer;
  void* memory = huge_pages ? comm::AllocateTransferMemory(bytes)
                            : std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (memory == nullptr) throw std::bad_alloc();
  std::memset(memory, 0, bytes);  // first touch: faults the pages in now
  buffer.memory.reset(static_cast<std::byte*>(memory));
  buffer.size = bytes;
  return buffer;
}

absl::Span<std::byte> Cell::OwnSlot() const {
  const size_t slot_bytes = count_ * comm::DtypeSize(dtype_);
  return big_.span().subspan(static_cast<size_t>(comm_.rank()) * slot_bytes, slot_bytes);
}

absl::StatusOr<comm::WorkHandle> Cell::Post() {
  switch (collective_) {
    case Collective::kAllGather: {
      comm::AllGatherOptions options;
      options.input = PerRankSide();
      options.output = big_.span();
      options.algorithm = algorithm_;
      return comm_.AllGather(options);
    }
    case Collective::kReduceScatter: {
      comm::ReduceScatterOptions options;
      options.input = big_.span();
      options.output = PerRankSide();
      options.dtype = dtype_;
      options.algorithm = algorithm_;
      return comm_.ReduceScatter(options);
    }
    case Collective::kAllReduce: {
      comm::AllReduceOptions options;
      options.buffer = big_.span();
      options.dtype = dtype_;
      options.algorithm = algorithm_;
      return comm_.AllReduce(options);
    }
    case Collective::kBroadcast: {
      comm::BroadcastOptions options;
      options.buffer = big_.span();
      options.root = 0;
      return comm_.Broadcast(options);
    }
  }
  return absl::InternalError("unknown collective");
}

void Cell::FillInputs() {
  const int r = comm_.rank();
  const comm::Dtype dtype = dtype_;
  switch (collective_) {
    case Collective::kAllGather:
      Fill(dtype, r, 0, PerRankSide().data(), count_);
      break;
    case Collective::kReduceScatter:
    case Collective::kAllReduce:
      Fill(dtype, r, 0, big_.data(), big_.size / comm::DtypeSize(dtype));
      break;
    case Collective::kBroadcast:
      if (r == 0) Fill(dtype, 0, 0, big_.data(), count_);
      else std::fill(big_.data(), big_.data() + big_.size, std::byte{0xFF});  // NaN
      break;
  }
}

int64_t Cell::CountWrong() const {
  const int n = comm_.size();
  const comm::Dtype dtype = dtype_;
  auto sum_over_ranks = [n](size_t index) {
    float sum = 0;
    for (int p = 0; p < n; ++p) sum += InputValue(p, index);
    return sum;
  };
  int64_t wrong = 0;
  switch (collective_) {
    case Collective::kAllGather:
      for (int p = 0; p < n; ++p) {
        for (size_t i = 0; i < count_; ++i) {
          wrong += Read(dtype, big_.data(), p * count_ + i) != InputValue(p, i);
        }
      }
      break;
    case Collective::kReduceScatter:
      for (size_t i = 0; i < count_; ++i) {
        wrong += Read(dtype, PerRankSide().data(), i) !=
                 sum_over_ranks(comm_.rank() * count_ + i);
      }
      break;
    case Collective::kAllReduce:
      for (size_t i = 0; i < count_; ++i) {
        wrong += Read(dtype, big_.data(), i) != sum_over_ranks(i);
      }
      break;
    case Collective::kBroadcast:
      for (size_t i = 0; i < count_; ++i) {
        wrong += Read(dtype, big_.data(), i) != InputValue(0, i);
      }
      break;
  }
  return wrong;
}

absl::Status PostAndWait(Cell& cell, absl::Duration timeout) {
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, cell.Post());
  return work->Wait(timeout);
}

absl::StatusOr<std::pair<double, int64_t>> CombineOverRanks(comm::Communicator& comm,
                                                             double time_us, int64_t wrong,
                                                             absl::Duration timeout) {
  struct Sample {
    double time_us;
    int64_t wrong;
  };
  Sample mine{time_us, wrong};
  std::vector<Sample> all(comm.size());
  comm::AllGatherOptions options;
  options.input = absl::Span<const std::byte>(reinterpret_cast<const std::byte*>(&mine),
                                              sizeof(mine));
  options.output = comm::AsBytes(absl::MakeSpan(all));
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, comm.AllGather(options));
  FSDP_RETURN_IF_ERROR(work->Wait(timeout));
  std::pair<double, int64_t> combined{0, 0};
  for (const Sample& s : all) {
    combined.first = std::max(combined.first, s.time_us);
    combined.second += s.wrong;
  }
  return combined;
}

absl::StatusOr<Row> MeasureCell(comm::Communicator& comm, const CellOptions& options,
                                Collective collective, size_t nominal_bytes) {
  Cell cell(comm, options, collective, nominal_bytes);
  for (int i = 0; i < options.warmup; ++i) {
    FSDP_RETURN_IF_ERROR(PostAndWait(cell, options.timeout));
  }
  {
    FSDP_ASSIGN_OR_RETURN(comm::WorkHandle barrier, comm.Barrier());
    FSDP_RETURN_IF_ERROR(barrier->Wait(options.timeout));
  }
  const absl::Time start = absl::Now();
  for (int i = 0; i < options.iters; ++i) {
    FSDP_RETURN_IF_ERROR(PostAndWait(cell, options.timeout));
  }
  const double time_us = absl::ToDoubleMicroseconds(absl::Now() - start) / options.iters;
  cell.FillInputs();
  FSDP_RETURN_IF_ERROR(PostAndWait(cell, options.timeout));
  FSDP_ASSIGN_OR_RETURN(auto combined,
                        CombineOverRanks(comm, time_us, cell.CountWrong(), options.timeout));
  Row row;
  row.collective = CollectiveName(collective);
  row.ranks = comm.size();
  row.bytes = cell.total_bytes();
  row.count = cell.count();
  row.time_us = combined.first;
  row.wrong = combined.second;
  row.algbw_gbps = row.time_us > 0 ? row.bytes / (row.time_us * 1e3) : 0;
  row.busbw_gbps = row.algbw_gbps * BusFactor(collective, comm.size());
  return row;
}

}  // namespace collective_bench
