// File: fsdp/nn/swiglu.cc
#include "fsdp/nn/swiglu.h"

#include <cmath>
#include <type_traits>

#include "base/bfloat16.h"

namespace fsdp {
namespace {

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

template <typename Out>
void Forward(Out* out, const float* gate_up, int rows, int hidden) {
  for (long r = 0; r < rows; ++r) {
    const float* gate = gate_up + r * 2 * hidden;
    const float* up = gate + hidden;
    Out* o = out + r * hidden;
    for (int i = 0; i < hidden; ++i) {
      const float value = gate[i] * Sigmoid(gate[i]) * up[i];
      if constexpr (std::is_same_v<Out, uint16_t>) {
        o[i] = base::ToBf16Bits(value);
      } else {
        o[i] = value;
      }
    }
  }
}

}  // namespace

void SwigluForward(DtypeSpan out, const float* gate_up, int rows, int hidden) {
  if (out.dtype() == comm::Dtype::kBFloat16) {
    Forward(out.as<uint16_t>().data(), gate_up, rows, hidden);
  } else {
    Forward(out.as<float>().data(), gate_up, rows, hidden);
  }
}

void SwigluBackward(float* dgate_up, const float* dout, const float* gate_up, int rows,
                    int hidden) {
  for (long r = 0; r < rows; ++r) {
    const float* gate = gate_up + r * 2 * hidden;
    const float* up = gate + hidden;
    const float* d = dout + r * hidden;
    float* dgate = dgate_up + r * 2 * hidden;
    float* dup = dgate + hidden;
    for (int i = 0; i < hidden; ++i) {
      const float g = gate[i];
      const float s = Sigmoid(g);
      dgate[i] = d[i] * up[i] * (s * (1.0f + g * (1.0f - s)));
      dup[i] = d[i] * g * s;
    }
  }
}

}  // namespace fsdp
