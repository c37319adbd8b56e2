// File: fsdp/nn/param_spec.h
//
// What a model unit holds, as data: each parameter's name and shape, in the
// order the parameters lie in the unit's flat buffer (contiguous, no gaps).
// The shard planner (fsdp/plan/) works on these alone, so it can plan models
// far larger than this machine without building them.
#ifndef FSDP_NN_PARAM_SPEC_H_
#define FSDP_NN_PARAM_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp {

struct ParamSpec {
  std::string name;            // e.g. "block3.attn.qkv.weight"
  std::vector<int64_t> shape;  // row-major, e.g. {3 * C, C}

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// One unit: the boundary at which parameters are gathered and gradients
// reduced (embedding, each transformer block, final norm + head).
struct UnitSpec {
  std::string name;              // e.g. "block3"
  std::vector<ParamSpec> params; // in flat-buffer order

  int64_t numel() const {
    int64_t n = 0;
    for (const ParamSpec& p : params) n += p.numel();
    return n;
  }
};

}  // namespace fsdp

#endif  // FSDP_NN_PARAM_SPEC_H_
