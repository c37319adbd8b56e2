// File: fsdp/nn/grouped_query.cc
//
// One token row at a time. Forward: q rotated into its place, each key head
// rotated into the slot of the first query head of its group and copied to
// the others (a copy of the rounded values in bf16: exact), each value head
// likewise without the rotation. Backward: the group sums into dproj's row,
// then the inverse rotation in place.
#include "fsdp/nn/grouped_query.h"

#include <cstring>
#include <type_traits>

#include "base/bfloat16.h"
#include "fsdp/nn/rotary.h"

namespace fsdp {
namespace {

template <typename Out>
void Forward(Out* qkv, const float* proj, const float* table, int table_seq_len,
             const GroupedQueryShape& s) {
  const int hs = s.head_size, C = s.q_width(), group = s.group();
  for (int64_t r = 0; r < s.rows(); ++r) {
    const int position = static_cast<int>(r % s.seq_len);
    const float* p = proj + r * s.proj_width();
    Out* out = qkv + r * s.qkv_width();
    RotateHeadsInto(out, p, s.heads, hs, position, table, table_seq_len);
    for (int kv = 0; kv < s.kv_heads; ++kv) {
      // Into the slots of the group's first query head; copied to the rest.
      Out* k_first = out + C + kv * group * hs;
      Out* v_first = out + 2 * C + kv * group * hs;
      RotateHeadsInto(k_first, p + C + kv * hs, 1, hs, position, table, table_seq_len);
      const float* v = p + C + s.kv_width() + kv * hs;
      for (int i = 0; i < hs; ++i) {
        if constexpr (std::is_same_v<Out, uint16_t>) {
          v_first[i] = base::ToBf16Bits(v[i]);
        } else {
          v_first[i] = v[i];
        }
      }
      for (int g = 1; g < group; ++g) {
        std::memcpy(k_first + g * hs, k_first, sizeof(Out) * hs);
        std::memcpy(v_first + g * hs, v_first, sizeof(Out) * hs);
      }
    }
  }
}

}  // namespace

void RotaryQkvForward(DtypeSpan qkv, const float* proj, const float* rope_table,
                      int table_seq_len, const GroupedQueryShape& shape) {
  if (qkv.dtype() == comm::Dtype::kBFloat16) {
    Forward(qkv.as<uint16_t>().data(), proj, rope_table, table_seq_len, shape);
  } else {
    Forward(qkv.as<float>().data(), proj, rope_table, table_seq_len, shape);
  }
}

void RotaryQkvBackward(float* dproj, const float* dqkv, const float* rope_table,
                       int table_seq_len, const GroupedQueryShape& s) {
  const int hs = s.head_size, C = s.q_width(), group = s.group();
  for (int64_t r = 0; r < s.rows(); ++r) {
    const float* d = dqkv + r * s.qkv_width();
    float* out = dproj + r * s.proj_width();
    std::memcpy(out, d, sizeof(float) * C);  // dq: one query head each
    float* dk = out + C;
    float* dv = dk + s.kv_width();
    for (int kv = 0; kv < s.kv_heads; ++kv) {
      const int h0 = kv * group;
      std::memcpy(dk + kv * hs, d + C + h0 * hs, sizeof(float) * hs);
      std::memcpy(dv + kv * hs, d + 2 * C + h0 * hs, sizeof(float) * hs);
      for (int h = h0 + 1; h < h0 + group; ++h) {
        for (int i = 0; i < hs; ++i) {
          dk[kv * hs + i] += d[C + h * hs + i];
          dv[kv * hs + i] += d[2 * C + h * hs + i];
        }
      }
    }
    const int position = static_cast<int>(r % s.seq_len);
    RotateHeadsInverse(out, s.heads + s.kv_heads, hs, position, rope_table, table_seq_len);
  }
}

}  // namespace fsdp
