// File: fsdp/nn/rotary.cc
#include "fsdp/nn/rotary.h"

#include <cmath>
#include <type_traits>

#include "base/bfloat16.h"

namespace fsdp {
namespace {

template <typename Out>
void Put(Out* dst, float value) {
  if constexpr (std::is_same_v<Out, uint16_t>) {
    *dst = base::ToBf16Bits(value);
  } else {
    *dst = value;
  }
}

// sign +1: the forward rotation; -1: its inverse. dst may equal src (each
// pair is read before it is written).
template <typename Out>
void Rotate(Out* dst, const float* src, int heads, int head_size, int position,
            const float* table, int seq_len, float sign) {
  const int half = head_size / 2;
  const float* cos_row = table + static_cast<long>(position) * half;
  const float* sin_row =
      table + static_cast<long>(seq_len) * half + static_cast<long>(position) * half;
  for (int h = 0; h < heads; ++h) {
    const float* x = src + static_cast<long>(h) * head_size;
    Out* y = dst + static_cast<long>(h) * head_size;
    for (int i = 0; i < half; ++i) {
      const float a = x[i], b = x[i + half];
      const float c = cos_row[i], s = sign * sin_row[i];
      Put(y + i, a * c - b * s);
      Put(y + i + half, b * c + a * s);
    }
  }
}

}  // namespace

void FillRotaryTable(float* table, int seq_len, int head_size, float theta) {
  const int half = head_size / 2;
  float* cos_part = table;
  float* sin_part = table + static_cast<long>(seq_len) * half;
  for (int i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_size);
    const float inv_freq = 1.0f / std::pow(theta, exponent);
    for (int t = 0; t < seq_len; ++t) {
      const float angle = static_cast<float>(t) * inv_freq;
      cos_part[static_cast<long>(t) * half + i] = static_cast<float>(std::cos(double{angle}));
      sin_part[static_cast<long>(t) * half + i] = static_cast<float>(std::sin(double{angle}));
    }
  }
}

void RotateHeadsInto(float* dst, const float* src, int heads, int head_size, int position,
                     const float* table, int seq_len) {
  Rotate(dst, src, heads, head_size, position, table, seq_len, 1.0f);
}

void RotateHeadsInto(uint16_t* dst, const float* src, int heads, int head_size, int position,
                     const float* table, int seq_len) {
  Rotate(dst, src, heads, head_size, position, table, seq_len, 1.0f);
}

void RotateHeadsInverse(float* row, int heads, int head_size, int position, const float* table,
                        int seq_len) {
  Rotate(row, row, heads, head_size, position, table, seq_len, -1.0f);
}

}  // namespace fsdp
