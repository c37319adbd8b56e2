// File: tests/fsdp/nn/product_rows.h
//
// The GPT's products on seeded operands, one sequence's rows at a time or a
// stack of sequences at once: what product_rows_test and product_rows_probe
// compare (the exact mode's question: do a sequence's bits depend on how many
// sequences the call holds?). Results are compared as bits: floats are kept
// as their uint32_t patterns.
#ifndef TESTS_FSDP_NN_PRODUCT_ROWS_H_
#define TESTS_FSDP_NN_PRODUCT_ROWS_H_

#include <cstdint>
#include <vector>

#include "fsdp/nn/matmul.h"

namespace fsdp {

inline constexpr int kMaxSequences = 4;

// One weight of the GPT block or head: out x in (Linear layout).
struct WeightShape {
  const char* name;
  int out, in;
};
// qkv, attn_proj, mlp_fc, mlp_proj and an lm_head of vocab 2048 at d_model d.
std::vector<WeightShape> GptWeightShapes(int d);
// fp32, plus bf16 for oneDNN (OpenBLAS widens bf16 operands to fp32).
std::vector<NumType> ProductTypes(MatmulBackend backend);

// One sequence's three products, as bits.
struct SequenceProducts {
  std::vector<uint32_t> forward;      // T x out: X W^T + b
  std::vector<uint32_t> input_grad;   // T x in:  dY W
  std::vector<uint32_t> weight_grad;  // out x in: dY^T X (K = T)
};

// Seeded operands for `kMaxSequences` sequences of `seq_len` rows.
class ProductOperands {
 public:
  ProductOperands(WeightShape w, int seq_len, NumType type);

  // Each sequence from a buffer holding it alone, one call per product.
  std::vector<SequenceProducts> PerSequenceAlone() const;
  // Sequence j read from its place in a stack of n, with M (K) = seq_len.
  SequenceProducts PerSequenceInStack(int n, int j) const;
  // The forward and input-gradient products over a stack of n sequences in
  // one call (M = n seq_len), cut into the sequences' rows (weight_grad
  // empty: one call over n sequences sums them).
  std::vector<SequenceProducts> Stacked(int n) const;

 private:
  struct Stack {
    std::vector<float> f32;
    std::vector<uint16_t> bf16;
    const void* data(NumType type, size_t offset) const;
  };
  Stack MakeStack(const std::vector<std::vector<float>>& pool, int n) const;
  SequenceProducts Products(const Stack& x, const Stack& dy, int rows, size_t x_offset,
                            size_t dy_offset, bool weight_grad) const;

  WeightShape w_;
  int t_;
  NumType type_;
  Stack weight_;
  std::vector<float> bias_;
  std::vector<std::vector<float>> x_pool_, dy_pool_;
};

}  // namespace fsdp

#endif  // TESTS_FSDP_NN_PRODUCT_ROWS_H_
