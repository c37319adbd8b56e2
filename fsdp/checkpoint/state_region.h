// File: fsdp/checkpoint/state_region.h
//
// [Note: checkpoint regions] A checkpoint addresses every element by its
// place in the model vector (proto/checkpoint.proto): all parameters,
// unpadded, in model order. A plan unit's flat element i is model element
// model_offset + i. A region is a run of one state tensor ("param", or an
// optimizer state name such as "exp_avg") that a rank saves from, or loads
// into, its own buffers; fsdp/checkpoint/ does the I/O, the trainer and its
// units only say where (fsdp/train/unit_state.h SaveRegions / LoadRegions).
#ifndef FSDP_CHECKPOINT_STATE_REGION_H_
#define FSDP_CHECKPOINT_STATE_REGION_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace fsdp {

struct StateRegion {
  std::string state;         // "param" or an optimizer state name
  int64_t model_offset = 0;  // first element in the model vector
  absl::Span<float> data;    // numel = data.size()
};

}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_STATE_REGION_H_
