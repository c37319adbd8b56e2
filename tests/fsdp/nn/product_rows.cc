// File: tests/fsdp/nn/product_rows.cc
#include "tests/fsdp/nn/product_rows.h"

#include <cstring>

#include "base/bfloat16.h"
#include "tests/fsdp/nn/grad_check.h"

namespace fsdp {
namespace {

std::vector<uint32_t> Bits(const std::vector<float>& v, size_t begin, size_t n) {
  std::vector<uint32_t> bits(n);
  std::memcpy(bits.data(), v.data() + begin, n * sizeof(float));
  return bits;
}

}  // namespace

std::vector<WeightShape> GptWeightShapes(int d) {
  return {{"qkv", 3 * d, d},
          {"attn_proj", d, d},
          {"mlp_fc", 4 * d, d},
          {"mlp_proj", d, 4 * d},
          {"lm_head(vocab 2048)", 2048, d}};
}

std::vector<NumType> ProductTypes(MatmulBackend backend) {
  if (backend == MatmulBackend::kOneDnn) return {NumType::kF32, NumType::kBF16};
  return {NumType::kF32};
}

const void* ProductOperands::Stack::data(NumType type, size_t offset) const {
  return type == NumType::kF32 ? static_cast<const void*>(f32.data() + offset)
                               : static_cast<const void*>(bf16.data() + offset);
}

ProductOperands::ProductOperands(WeightShape w, int seq_len, NumType type)
    : w_(w), t_(seq_len), type_(type), bias_(testing_util::RandomVector(w.out, 2)) {
  weight_ = MakeStack({testing_util::RandomVector(size_t(w.out) * w.in, 1)}, 1);
  for (int j = 0; j < kMaxSequences; ++j) {
    x_pool_.push_back(testing_util::RandomVector(size_t(t_) * w.in, 10 + j));
    dy_pool_.push_back(testing_util::RandomVector(size_t(t_) * w.out, 20 + j));
  }
}

ProductOperands::Stack ProductOperands::MakeStack(const std::vector<std::vector<float>>& pool,
                                                  int n) const {
  Stack s;
  for (int j = 0; j < n; ++j) s.f32.insert(s.f32.end(), pool[j].begin(), pool[j].end());
  s.bf16.resize(s.f32.size());
  for (size_t i = 0; i < s.f32.size(); ++i) s.bf16[i] = base::ToBf16Bits(s.f32[i]);
  return s;
}

SequenceProducts ProductOperands::Products(const Stack& x, const Stack& dy, int rows,
                                           size_t x_offset, size_t dy_offset,
                                           bool weight_grad) const {
  const NumType type = type_;
  std::vector<float> y(size_t(rows) * w_.out), dx(size_t(rows) * w_.in);
  Matmul({.m = rows, .n = w_.out, .k = w_.in, .a = {x.data(type, x_offset), type, w_.in},
          .b = {weight_.data(type, 0), type, w_.in, /*transposed=*/true},
          .c = y.data(), .c_type = NumType::kF32, .ldc = w_.out, .bias = bias_.data()});
  Matmul({.m = rows, .n = w_.in, .k = w_.out, .a = {dy.data(type, dy_offset), type, w_.out},
          .b = {weight_.data(type, 0), type, w_.in},
          .c = dx.data(), .c_type = NumType::kF32, .ldc = w_.in});
  SequenceProducts p{Bits(y, 0, y.size()), Bits(dx, 0, dx.size()), {}};
  if (weight_grad) {
    std::vector<float> dw(size_t(w_.out) * w_.in);
    Matmul({.m = w_.out, .n = w_.in, .k = rows,
            .a = {dy.data(type, dy_offset), type, w_.out, /*transposed=*/true},
            .b = {x.data(type, x_offset), type, w_.in},
            .c = dw.data(), .c_type = NumType::kF32, .ldc = w_.in});
    p.weight_grad = Bits(dw, 0, dw.size());
  }
  return p;
}

std::vector<SequenceProducts> ProductOperands::PerSequenceAlone() const {
  std::vector<SequenceProducts> out;
  for (int j = 0; j < kMaxSequences; ++j) {
    const Stack x = MakeStack({x_pool_[j]}, 1), dy = MakeStack({dy_pool_[j]}, 1);
    out.push_back(Products(x, dy, t_, 0, 0, /*weight_grad=*/true));
  }
  return out;
}

SequenceProducts ProductOperands::PerSequenceInStack(int n, int j) const {
  const Stack x = MakeStack(x_pool_, n), dy = MakeStack(dy_pool_, n);
  return Products(x, dy, t_, size_t(j) * t_ * w_.in, size_t(j) * t_ * w_.out,
                  /*weight_grad=*/true);
}

std::vector<SequenceProducts> ProductOperands::Stacked(int n) const {
  const Stack x = MakeStack(x_pool_, n), dy = MakeStack(dy_pool_, n);
  const SequenceProducts all = Products(x, dy, n * t_, 0, 0, /*weight_grad=*/false);
  std::vector<SequenceProducts> out(n);
  for (int j = 0; j < n; ++j) {
    const size_t fy = size_t(t_) * w_.out, fx = size_t(t_) * w_.in;
    out[j].forward.assign(all.forward.begin() + j * fy, all.forward.begin() + (j + 1) * fy);
    out[j].input_grad.assign(all.input_grad.begin() + j * fx,
                             all.input_grad.begin() + (j + 1) * fx);
  }
  return out;
}

}  // namespace fsdp
