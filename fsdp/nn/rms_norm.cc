// File: fsdp/nn/rms_norm.cc
#include "fsdp/nn/rms_norm.h"

#include <cmath>

#include "base/bfloat16.h"

namespace fsdp {
namespace {

template <typename Out>
void Forward(Out* out, float* rstd, const float* inp, const float* weight, int n, int channels,
             float eps) {
  for (int i = 0; i < n; ++i) {
    const float* x = inp + static_cast<long>(i) * channels;
    Out* o = out + static_cast<long>(i) * channels;
    double squares = 0.0;
    for (int c = 0; c < channels; ++c) squares += double{x[c]} * x[c];
    const float r = static_cast<float>(1.0 / std::sqrt(squares / channels + eps));
    rstd[i] = r;
    for (int c = 0; c < channels; ++c) {
      const float value = x[c] * r * weight[c];
      if constexpr (std::is_same_v<Out, uint16_t>) {
        o[c] = base::ToBf16Bits(value);
      } else {
        o[c] = value;
      }
    }
  }
}

}  // namespace

void RmsNormForward(DtypeSpan out, float* rstd, const float* inp, const float* weight, int n,
                    int channels, float eps) {
  if (out.dtype() == comm::Dtype::kBFloat16) {
    Forward(out.as<uint16_t>().data(), rstd, inp, weight, n, channels, eps);
  } else {
    Forward(out.as<float>().data(), rstd, inp, weight, n, channels, eps);
  }
}

void RmsNormBackward(float* dinp, DtypeSpan dinp_copy, float* dweight, const float* dout,
                     const float* inp, const float* weight, const float* rstd, int n,
                     int channels) {
  uint16_t* copy16 =
      dinp_copy.dtype() == comm::Dtype::kBFloat16 ? dinp_copy.as<uint16_t>().data() : nullptr;
  for (int i = 0; i < n; ++i) {
    const long row = static_cast<long>(i) * channels;
    const float* x = inp + row;
    const float* g = dout + row;
    float* dx = dinp + row;
    const float r = rstd[i];
    double dot = 0.0;  // sum_c g w x
    for (int c = 0; c < channels; ++c) dot += double{g[c]} * weight[c] * x[c];
    const float coefficient = static_cast<float>(dot * r * r * r / channels);
    for (int c = 0; c < channels; ++c) {
      dx[c] += r * g[c] * weight[c] - coefficient * x[c];
      dweight[c] += g[c] * x[c] * r;
      if (copy16 != nullptr) copy16[row + c] = base::ToBf16Bits(dx[c]);
    }
  }
}

}  // namespace fsdp
