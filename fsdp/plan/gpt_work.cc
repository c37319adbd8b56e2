// File: fsdp/plan/gpt_work.cc
#include "fsdp/plan/gpt_work.h"

#include <cstdint>
#include <utility>

namespace fsdp {
namespace plan {
namespace {

// A Linear layer's backward: the input gradient and the weight gradient.
void AddLinear(int64_t m, int64_t n, int64_t k, UnitWork& work) {
  work.forward_products.push_back({m, n, k, 1});
  work.backward_products.push_back({m, k, n, 1});
  work.backward_products.push_back({n, k, m, 1});
}

// A framework's element-wise work (fsdp/plan/framework_kernels.h) for a
// micro-batch of `tokens` tokens, in place of this runtime's count: bytes
// per token times the tokens, kernels once.
void UseFrameworkWork(const ElementwiseWork& per_token, double tokens, UnitWork& work) {
  work.forward_elementwise_bytes = per_token.forward_bytes * tokens;
  work.backward_elementwise_bytes = per_token.backward_bytes * tokens;
  work.forward_kernels = per_token.forward_kernels;
  work.backward_kernels = per_token.backward_kernels;
}

UnitWork ModelUnitWork(const GptConfig& c, int micro_batch, int model_unit,
                       const FrameworkWork* framework) {
  const int64_t b = micro_batch, t = c.seq_len, d = c.d_model, h = c.heads, v = c.vocab;
  const int64_t tokens = b * t, head_dim = d / h;
  const double bytes = 4;
  UnitWork work;
  if (model_unit == 0) {  // embedding
    work.forward_elementwise_bytes = tokens * 12.0 * d;
    work.backward_elementwise_bytes = tokens * 12.0 * d;
    if (framework != nullptr) {
      UseFrameworkWork(EmbeddingElementwisePerToken(framework->block, framework->options),
                       tokens, work);
    }
  } else if (model_unit <= c.layers) {  // a block
    AddLinear(tokens, 3 * d, d, work);
    AddLinear(tokens, d, d, work);
    AddLinear(tokens, 4 * d, d, work);
    AddLinear(tokens, d, 4 * d, work);
    const double causal = 0.5 * b * h;
    work.forward_products.push_back({t, t, head_dim, causal});   // Q K^T
    work.forward_products.push_back({t, head_dim, t, causal});   // P V
    work.backward_products.push_back({t, t, head_dim, causal});  // dP = dO V^T
    work.backward_products.push_back({t, head_dim, t, causal});  // dV = P^T dO
    work.backward_products.push_back({t, head_dim, t, causal});  // dQ = dS K
    work.backward_products.push_back({t, head_dim, t, causal});  // dK = dS^T Q
    // Flash attention keeps the scores in its blocks (no T x T traffic).
    const double scores = c.flash_attention ? 0 : 2 * bytes * h * t / 2.0;
    const double forward = tokens * ((2 * 8.0 + 2 * 12.0 + 32.0) * d + scores);
    work.forward_elementwise_bytes = forward;
    work.backward_elementwise_bytes = 2 * forward;
    if (framework != nullptr) {
      UseFrameworkWork(BlockElementwisePerToken(framework->block, t, framework->options),
                       tokens, work);
    }
    if (IsCheckpointedBlock(c, model_unit - 1)) {  // the forward again, before the backward
      work.backward_products.insert(work.backward_products.end(), work.forward_products.begin(),
                                    work.forward_products.end());
      work.backward_elementwise_bytes += work.forward_elementwise_bytes;
      work.backward_kernels += work.forward_kernels;
    }
  } else {  // head
    AddLinear(tokens, v, d, work);
    work.forward_elementwise_bytes = tokens * (8.0 * d + 2 * bytes * v);
    work.backward_elementwise_bytes = 2 * work.forward_elementwise_bytes;
    if (framework != nullptr) {
      UseFrameworkWork(HeadElementwisePerToken(framework->block, v, framework->options), tokens,
                       work);
    }
  }
  return work;
}

double ProductFlops(const std::vector<ProductShape>& products) {
  double flops = 0;
  for (const ProductShape& p : products) {
    flops += 2.0 * static_cast<double>(p.m) * p.n * p.k * p.count;
  }
  return flops;
}

}  // namespace

std::vector<UnitWork> GptUnitWork(const GptConfig& config, int micro_batch,
                                  const proto::ShardPlan& plan) {
  return GptUnitWork(config, micro_batch, plan, FrameworkWork{});
}

std::vector<UnitWork> GptUnitWork(const GptConfig& config, int micro_batch,
                                  const proto::ShardPlan& plan, const FrameworkWork& framework) {
  const FrameworkWork* counted =
      framework.options.software == KernelSoftware::kThisRuntime ? nullptr : &framework;
  std::vector<UnitWork> units;
  for (const proto::UnitPlan& unit_plan : plan.units()) {
    UnitWork work;
    work.padded_numel = unit_plan.padded_numel();
    work.shard_numel = unit_plan.shard_numel();
    for (const proto::SourceUnit& source : unit_plan.source_units()) {
      UnitWork part = ModelUnitWork(config, micro_batch, source.model_unit_index(), counted);
      work.forward_products.insert(work.forward_products.end(), part.forward_products.begin(),
                                   part.forward_products.end());
      work.backward_products.insert(work.backward_products.end(),
                                    part.backward_products.begin(),
                                    part.backward_products.end());
      work.forward_elementwise_bytes += part.forward_elementwise_bytes;
      work.backward_elementwise_bytes += part.backward_elementwise_bytes;
      work.forward_kernels += part.forward_kernels;
      work.backward_kernels += part.backward_kernels;
    }
    units.push_back(std::move(work));
  }
  return units;
}

double GptFlopsPerMicroBatch(const GptConfig& config, int micro_batch) {
  GptConfig without_recomputation = config;
  without_recomputation.activation_checkpoint_every = 0;
  double flops = 0;
  for (int u = 0; u < config.layers + 2; ++u) {
    const UnitWork work = ModelUnitWork(without_recomputation, micro_batch, u, nullptr);
    flops += ProductFlops(work.forward_products) + ProductFlops(work.backward_products);
  }
  return flops;
}

}  // namespace plan
}  // namespace fsdp
