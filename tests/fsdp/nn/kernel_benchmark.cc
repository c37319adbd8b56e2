// File: tests/fsdp/nn/kernel_benchmark.cc
//
// Old (scalar, tests/fsdp/nn/reference_kernels.h) against new (vectorized,
// every ISA variant this CPU runs) element-wise kernels on the shapes of the
// GPT of issue 11: 8 layers, width C = 512, 8 heads, vocab 8192, seq_len 256,
// micro-batch 4 (B*T = 1024 rows). Prints the CPU model and the variant the
// layers use (BestKernelIsa), then per kernel the minimum over repetitions
// (the machines are shared: the minimum is the least disturbed run).
//
//   bazel run -c opt //tests/fsdp/nn:kernel_benchmark -- [repetitions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "fsdp/nn/attention.h"
#include "fsdp/nn/attention_layout.h"
#include "base/bf16_convert.h"
#include "fsdp/nn/bf16_outputs.h"
#include "fsdp/nn/compute_threads.h"
#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/embedding.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/kernel_isa.h"
#include "fsdp/nn/layer_norm.h"
#include "fsdp/nn/linear.h"
#include "fsdp/nn/matmul.h"
#include "fsdp/nn/residual.h"
#include "fsdp/nn/fixed_point_sum.h"
#include "fsdp/optim/adamw.h"
#include "fsdp/optim/grad_clip.h"
#include "tests/fsdp/nn/grad_check.h"
#include "tests/fsdp/nn/reference_kernels.h"

namespace fsdp {
namespace {

constexpr int kBatch = 4, kSeq = 256, kChannels = 512, kHeads = 8, kVocab = 8192;
constexpr int kRows = kBatch * kSeq;
// One rank's AdamW shard of the 33.7 M-parameter model at 2 ranks.
constexpr int64_t kShardNumel = 33731584 / 2;

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

double MinSeconds(int repetitions, const std::function<void()>& fn) {
  fn();  // warm-up: page faults, caches
  double best = 1e30;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    best = std::min(best, elapsed.count());
  }
  return best;
}

struct Kernel {
  std::string name;
  std::function<void()> old_fn;
  std::function<void(KernelIsa)> new_fn;
};

struct Fused {
  std::string name;
  std::function<void()> unfused_fn;
  std::function<void()> fused_fn;
};

int Main(int repetitions) {
  // The attention sgemms: one thread, as one rank of 2 on 2 cores.
  if (absl::Status s = SetComputeThreads(1); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("CPU: %s\n", CpuModel().c_str());
  std::printf("kernel ISA used by the layers: %s\n", KernelIsaName(BestKernelIsa()));
  std::printf("shapes: B*T = %d rows, C = %d, 4C = %d, vocab %d, B=%d H=%d T=%d; "
              "AdamW / sum of squares over %lld floats; min of %d runs\n\n",
              kRows, kChannels, 4 * kChannels, kVocab, kBatch, kHeads, kSeq,
              static_cast<long long>(kShardNumel), repetitions);

  using testing_util::RandomVector;
  const int64_t nc = int64_t{kRows} * kChannels, n4c = 4 * nc, nv = int64_t{kRows} * kVocab;
  std::vector<float> wide_in = RandomVector(n4c, 1), wide_out(n4c), wide_d = RandomVector(n4c, 2),
                     wide_grad(n4c);
  std::vector<float> x = RandomVector(nc, 3), y(nc), d = RandomVector(nc, 4), dx(nc),
                     w = RandomVector(kChannels, 5), b = RandomVector(kChannels, 6),
                     dw(kChannels), db(kChannels), mean(kRows), rstd(kRows);
  std::vector<float> qkv = RandomVector(3 * nc, 7), att_out(nc), dqkv(3 * nc),
                     probs(int64_t{kBatch} * kHeads * kSeq * kSeq),
                     scratch(AttentionBackwardScratchFloats(kSeq));
  const std::vector<float> logits = RandomVector(nv, 8, 2.0f);
  std::vector<float> ce(nv);
  std::vector<int32_t> targets(kRows), tokens(kRows);
  for (int i = 0; i < kRows; ++i) targets[i] = tokens[i] = (i * 7919) % kVocab;
  std::vector<float> wte = RandomVector(int64_t{kVocab} * kChannels, 9),
                     wpe = RandomVector(int64_t{kSeq} * kChannels, 10),
                     dwte(wte.size()), dwpe(wpe.size());
  std::vector<float> params = RandomVector(kShardNumel, 11, 0.02f),
                     grads = RandomVector(kShardNumel, 12, 1e-3f), m(kShardNumel), v(kShardNumel);
  const AdamWOptions adam;
  LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), kRows,
                   kChannels);
  AttentionForward(att_out.data(), probs.data(), qkv.data(), kBatch, kSeq, kChannels, kHeads);

  std::vector<float> accumulated(kShardNumel);
  std::vector<int64_t> exact_sum(kShardNumel);
  std::vector<Kernel> kernels = {
      {"gelu forward (1024 x 2048)",
       [&] { reference::GeluForward(wide_out.data(), wide_in.data(), n4c); },
       [&](KernelIsa isa) { GeluForward(isa, wide_out.data(), wide_in.data(), n4c); }},
      {"gelu backward",
       [&] { reference::GeluBackward(wide_grad.data(), wide_in.data(), wide_d.data(), n4c); },
       [&](KernelIsa isa) {
         GeluBackward(isa, wide_grad.data(), wide_in.data(), wide_d.data(), n4c);
       }},
      {"layer norm forward (1024 x 512)",
       [&] {
         reference::LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(),
                                     b.data(), kRows, kChannels);
       },
       [&](KernelIsa isa) {
         LayerNormForward(isa, y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                          kRows, kChannels);
       }},
      {"layer norm backward",
       [&] {
         reference::LayerNormBackward(dx.data(), dw.data(), db.data(), d.data(), x.data(),
                                      w.data(), mean.data(), rstd.data(), kRows, kChannels);
       },
       [&](KernelIsa isa) {
         LayerNormBackward(isa, dx.data(), dw.data(), db.data(), d.data(), x.data(), w.data(),
                           mean.data(), rstd.data(), kRows, kChannels);
       }},
      {"attention forward, incl. sgemm (B4 H8 T256)",
       [&] {
         reference::AttentionForward(att_out.data(), probs.data(), qkv.data(), kBatch, kSeq,
                                     kChannels, kHeads);
       },
       [&](KernelIsa isa) {
         AttentionForward(isa, att_out.data(), probs.data(), qkv.data(), kBatch, kSeq, kChannels,
                          kHeads);
       }},
      {"attention backward, incl. sgemm",
       [&] {
         reference::AttentionBackward(dqkv.data(), scratch.data(), d.data(), qkv.data(),
                                      probs.data(), kBatch, kSeq, kChannels, kHeads);
       },
       [&](KernelIsa isa) {
         AttentionBackward(isa, dqkv.data(), scratch.data(), d.data(), qkv.data(), probs.data(),
                           kBatch, kSeq, kChannels, kHeads);
       }},
      // The copy of the logits is part of both columns (forward is in place).
      {"cross-entropy forward (1024 x 8192) + copy",
       [&] {
         ce = logits;
         reference::CrossEntropyForward(ce.data(), targets.data(), kRows, kVocab);
       },
       [&](KernelIsa isa) {
         ce = logits;
         CrossEntropyForward(isa, ce.data(), targets.data(), kRows, kVocab);
       }},
      {"cross-entropy backward",
       [&] { reference::CrossEntropyBackward(ce.data(), targets.data(), kRows, kVocab, 1.0f); },
       [&](KernelIsa isa) {
         CrossEntropyBackward(isa, ce.data(), targets.data(), kRows, kVocab, 1.0f);
       }},
      {"residual forward (1024 x 512)",
       [&] { reference::ResidualForward(y.data(), y.data(), x.data(), nc); },
       [&](KernelIsa isa) { ResidualForward(isa, y.data(), y.data(), x.data(), nc); }},
      {"residual backward",
       [&] { reference::ResidualBackward(dx.data(), y.data(), d.data(), nc); },
       [&](KernelIsa isa) { ResidualBackward(isa, dx.data(), y.data(), d.data(), nc); }},
      {"embedding forward",
       [&] {
         reference::EmbeddingForward(y.data(), tokens.data(), wte.data(), wpe.data(), kBatch,
                                     kSeq, kChannels);
       },
       [&](KernelIsa isa) {
         EmbeddingForward(isa, y.data(), tokens.data(), wte.data(), wpe.data(), kBatch, kSeq,
                          kChannels);
       }},
      {"embedding backward",
       [&] {
         reference::EmbeddingBackward(dwte.data(), dwpe.data(), d.data(), tokens.data(), kBatch,
                                      kSeq, kChannels);
       },
       [&](KernelIsa isa) {
         EmbeddingBackward(isa, dwte.data(), dwpe.data(), d.data(), tokens.data(), kBatch, kSeq,
                           kChannels);
       }},
      {"adamw (16.9 M)",
       [&] {
         reference::AdamWUpdate(adam, 1e-4f, 10, params.data(), grads.data(), m.data(), v.data(),
                                kShardNumel);
       },
       [&](KernelIsa isa) {
         AdamWUpdate(isa, adam, 1e-4f, 10, absl::MakeSpan(params), grads, absl::MakeSpan(m),
                     absl::MakeSpan(v));
       }},
      {"sum of squares (16.9 M)",
       [&] {
         volatile double sink = reference::SumOfSquares(grads.data(), kShardNumel);
         (void)sink;
       },
       [&](KernelIsa isa) {
         volatile double sink = SumOfSquares(isa, grads);
         (void)sink;
       }},
      // One contribution added to a gradient: an fp32 add ("old", what
      // accumulation does today) against the exact mode's rounding to the
      // quantum and int64 add (fsdp/exact): below 1x, the exact add's cost.
      {"grad += contribution: fp32 vs exact int64 (16.9 M)",
       [&] {
         for (int64_t i = 0; i < kShardNumel; ++i) accumulated[i] += grads[i];
       },
       [&](KernelIsa isa) {
         volatile float sink = AddToExactSum(isa, 0, grads, absl::MakeSpan(exact_sum));
         (void)sink;
       }},
  };

  const std::vector<KernelIsa> isas = SupportedKernelIsas();
  std::printf("%-46s %10s", "kernel (ms)", "old");
  for (KernelIsa isa : isas) std::printf(" %15s", KernelIsaName(isa));
  std::printf(" %9s\n", "speedup");
  for (const Kernel& k : kernels) {
    const double old_s = MinSeconds(repetitions, k.old_fn);
    std::printf("%-46s %10.3f", k.name.c_str(), old_s * 1e3);
    double best_s = 0.0;
    for (KernelIsa isa : isas) {
      const double s = MinSeconds(repetitions, [&] { k.new_fn(isa); });
      if (isa == BestKernelIsa()) best_s = s;
      std::printf(" %15.3f", s * 1e3);
    }
    std::printf(" %8.1fx\n", old_s / best_s);
  }

  // Under bf16 compute: a layer that writes fp32 and a ToBf16 pass after it
  // (and, for GELU's backward, the bias sums over that fp32 gradient),
  // against the fused kernels of fsdp/nn/bf16_outputs.h that round (and sum)
  // each block while it is in L1.
  std::vector<uint16_t> out16(n4c);
  std::vector<float> fc_db(4 * kChannels);
  std::vector<Fused> fused = {
      {"gelu forward -> bf16 (1024 x 2048)",
       [&] {
         GeluForward(wide_out.data(), wide_in.data(), n4c);
         base::ToBf16(out16.data(), wide_out.data(), n4c);
       },
       [&] { GeluForwardToBf16(out16.data(), wide_in.data(), n4c); }},
      {"gelu backward + bf16 copy + fc bias sums",
       [&] {
         // The path before GELU's backward summed the bias itself: fp32
         // gradient rounded block by block, then the column sums over it.
         GeluBackwardOverwrite(wide_grad.data(), wide_in.data(), wide_d.data(), n4c);
         base::ToBf16(out16.data(), wide_grad.data(), n4c);
         LinearBackwardBf16(nullptr, nullptr, fc_db.data(), wide_grad.data(), nullptr, nullptr,
                            nullptr, kRows, 1, 4 * kChannels, GradWrite::kAdd,
                            GradWrite::kOverwrite);
       },
       [&] {
         GeluBackwardToBf16WithBiasGradient(fc_db.data(), out16.data(), wide_in.data(),
                                            wide_d.data(), kRows, 4 * kChannels,
                                            GradWrite::kOverwrite);
       }},
      {"layernorm forward -> bf16 (1024 x 512)",
       [&] {
         LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), kRows,
                          kChannels);
         base::ToBf16(out16.data(), y.data(), nc);
       },
       [&] {
         LayerNormForwardToBf16(out16.data(), mean.data(), rstd.data(), x.data(), w.data(),
                                b.data(), kRows, kChannels);
       }},
  };
  // Under bf16 compute, the output gradients the backward's products read:
  // rounded in a pass of their own after the layer that made them, against
  // rounded where they are made (LayerNorm's backward, the qkv bias sums,
  // cross-entropy's backward in place).
  std::vector<float> ln_dinp(nc), ln_dw(kChannels), ln_db(kChannels), wide3(3 * nc);
  for (int64_t i = 0; i < 3 * nc; ++i) wide3[i] = wide_in[i % n4c];
  std::vector<float> qkv_db(3 * kChannels);
  fused.push_back(
      {"layernorm backward + bf16 copy (1024 x 512)",
       [&] {
         LayerNormBackward(ln_dinp.data(), ln_dw.data(), ln_db.data(), y.data(), x.data(),
                           w.data(), mean.data(), rstd.data(), kRows, kChannels);
         base::ToBf16(out16.data(), ln_dinp.data(), nc);
       },
       [&] {
         LayerNormBackwardWithBf16(ln_dinp.data(), out16.data(), ln_dw.data(), ln_db.data(),
                                   y.data(), x.data(), w.data(), mean.data(), rstd.data(), kRows,
                                   kChannels);
       }});
  fused.push_back(
      {"qkv bias sums + bf16 copy (1024 x 1536)",
       [&] {
         LinearBackwardBf16(nullptr, nullptr, qkv_db.data(), wide3.data(), nullptr, nullptr,
                            nullptr, kRows, 1, 3 * kChannels, GradWrite::kAdd,
                            GradWrite::kOverwrite);
         base::ToBf16(out16.data(), wide3.data(), 3 * nc);
       },
       [&] {
         BiasGradientWithBf16(qkv_db.data(), out16.data(), wide3.data(), kRows, 3 * kChannels,
                              GradWrite::kOverwrite);
       }});
  // The logits' gradient: both variants start from the same probabilities
  // (a copy each time, as cross-entropy's backward works in place).
  std::vector<float> ce_probs0(int64_t{kRows} * kVocab, 1.0f / kVocab), ce_probs(ce_probs0.size());
  std::vector<int32_t> ce_targets(kRows);
  for (int r = 0; r < kRows; ++r) ce_targets[r] = (r * 7) % kVocab;
  fused.push_back(
      {"cross-entropy backward -> bf16 (1024 x 8192)",
       [&] {
         std::copy(ce_probs0.begin(), ce_probs0.end(), ce_probs.begin());
         CrossEntropyBackward(ce_probs.data(), ce_targets.data(), kRows, kVocab, 1.0f);
         base::ToBf16InPlace(ce_probs.data(), static_cast<int64_t>(ce_probs.size()));
       },
       [&] {
         std::copy(ce_probs0.begin(), ce_probs0.end(), ce_probs.begin());
         CrossEntropyBackwardToBf16(ce_probs.data(), ce_targets.data(), kRows, kVocab, 1.0f);
       }});
  // A Linear's weight gradient on the first micro-batch of the 2-byte
  // gradient layout: the product into the fp32 workspace and ToBf16 into the
  // bf16 gradients, against the product writing bf16 from its accumulators
  // (LinearBackwardBf16's dweight16). The fc layer's and the head's shapes.
  std::vector<uint16_t> wg_dout16(int64_t{kRows} * kVocab), wg_inp16(n4c),
      wg_grad16(int64_t{kVocab} * kChannels);
  std::vector<float> wg_grad(wg_grad16.size());
  base::ToBf16(wg_inp16.data(), wide_in.data(), n4c);
  for (size_t i = 0; i < wg_dout16.size(); ++i) wg_dout16[i] = out16[i % out16.size()];
  struct WeightShape {
    const char* name;
    int in, out;
  };
  for (const WeightShape& shape : {WeightShape{"fc weight grad -> bf16 (2048 x 512)", kChannels,
                                               4 * kChannels},
                                   WeightShape{"head weight grad -> bf16 (8192 x 512)", kChannels,
                                               kVocab}}) {
    const int in = shape.in, out = shape.out;
    fused.push_back(
        {shape.name,
         [&, in, out] {
           LinearBackwardBf16(nullptr, wg_grad.data(), nullptr, nullptr, wg_dout16.data(),
                              wg_inp16.data(), nullptr, kRows, in, out, GradWrite::kAdd,
                              GradWrite::kOverwrite);
           base::ToBf16(wg_grad16.data(), wg_grad.data(), int64_t{in} * out);
         },
         [&, in, out] {
           LinearBackwardBf16(nullptr, nullptr, nullptr, nullptr, wg_dout16.data(),
                              wg_inp16.data(), nullptr, kRows, in, out, GradWrite::kAdd,
                              GradWrite::kOverwrite, wg_grad16.data());
         }});
  }
  // The rounding itself over 64 MiB that streams from memory (the gradient
  // workspace into the bf16 gradients): the integer path against the CPU's
  // bf16 conversion where ToBf16 uses it.
  const int64_t stream_n = int64_t{16} << 20;
  std::vector<float> stream_in(stream_n);
  for (int64_t i = 0; i < stream_n; ++i) stream_in[i] = wide_in[i % n4c];
  std::vector<uint16_t> stream_out(stream_n);
  fused.push_back(
      {absl::StrCat("ToBf16 16.8 M, integer vs ", base::ToBf16PathName()),
       [&] { base::ToBf16IntegerPath(stream_out.data(), stream_in.data(), stream_n); },
       [&] { base::ToBf16(stream_out.data(), stream_in.data(), stream_n); }});
  // The optimizer phase of --precision=bf16 on one rank's shard: before,
  // the bf16 gradients were widened into a workspace for the norm's two
  // passes and again for AdamW (times the clip scale), and the updated master
  // rounded to bf16 in a pass of its own; now each pass widens block by
  // block in L1 (base/bf16_convert.h, ForEachWidenedBlock).
  std::vector<uint16_t> grads16(kShardNumel), params16(kShardNumel);
  base::ToBf16(grads16.data(), grads.data(), kShardNumel);
  std::vector<float> widened(kShardNumel);
  MemoryTracker tracker;
  absl::StatusOr<AdamW> optimizer = AdamW::Create(adam, kShardNumel, &tracker);
  if (!optimizer.ok()) {
    std::fprintf(stderr, "%s\n", optimizer.status().ToString().c_str());
    return 1;
  }
  const int exponent = SquareUnitExponent(1.0f);
  volatile float max_sink = 0.0f;
  volatile double units_sink = 0.0;
  fused.push_back(
      {"bf16 grads: norm (16.9 M)",
       [&] {
         base::FromBf16(widened.data(), grads16.data(), kShardNumel);
         max_sink = MaxAbs(widened);
         base::FromBf16(widened.data(), grads16.data(), kShardNumel);
         units_sink = static_cast<double>(SumOfSquareUnits(widened, exponent));
       },
       [&] {
         max_sink = MaxAbsBf16(grads16);
         units_sink = static_cast<double>(SumOfSquareUnitsBf16(grads16, exponent));
       }});
  // The averaging of reduced gradients: widened, scaled and rounded block by
  // block (as before) against in registers.
  std::vector<uint16_t> averaged16 = grads16;  // halved twice per repetition: stays normal
  fused.push_back({"bf16 grads: average x 0.5 (16.9 M)",
                   [&] {
                     base::ForEachWidenedBlock(averaged16.data(), kShardNumel,
                                         [&](float* block, int64_t begin, int64_t len) {
                                           for (int64_t i = 0; i < len; ++i) block[i] *= 0.5f;
                                           base::ToBf16(averaged16.data() + begin, block, len);
                                         });
                   },
                   [&] { base::ScaleBf16InPlace(averaged16.data(), kShardNumel, 0.5f); }});
  fused.push_back(
      {"bf16 grads: adamw -> bf16 params (16.9 M)",
       [&] {
         base::FromBf16(widened.data(), grads16.data(), kShardNumel);
         for (float& g : widened) g *= 0.5f;
         (void)optimizer->Step(1e-4f, absl::MakeSpan(params), widened);
         base::ToBf16(params16.data(), params.data(), kShardNumel);
       },
       [&] {
         (void)optimizer->StepBf16(1e-4f, absl::MakeSpan(params), grads16, 0.5f,
                                   absl::MakeSpan(params16));
       }});
  std::printf("\n%-46s %10s %10s %9s\n", "bf16 fusions (ms)", "unfused", "fused", "speedup");
  for (const Fused& k : fused) {
    const double unfused_s = MinSeconds(repetitions, k.unfused_fn);
    const double fused_s = MinSeconds(repetitions, k.fused_fn);
    std::printf("%-46s %10.3f %10.3f %8.2fx\n", k.name.c_str(), unfused_s * 1e3, fused_s * 1e3,
                unfused_s / fused_s);
  }

  // The bf16 attention of --precision=bf16: its time, and how much of it
  // its products take (the rest: gathering heads, softmax, rounding).
  const int head_size = kChannels / kHeads;
  std::vector<uint16_t> qkv16(qkv.size()), d16(nc);
  base::ToBf16(qkv16.data(), qkv.data(), static_cast<int64_t>(qkv.size()));
  base::ToBf16(d16.data(), d.data(), nc);
  std::vector<uint16_t> att_scratch16(AttentionBf16ScratchElements(kSeq, head_size)),
      probs16(probs.size()), att_out16(nc);
  std::vector<float> att_scratch(AttentionBf16ScratchFloats(kSeq, head_size));
  struct Timed {
    const char* name;
    std::function<void()> fn;
  };
  const std::vector<Timed> attention_bf16 = {
      {"attention forward bf16 (B4 H8 T256)",
       [&] {
         AttentionForwardBf16(att_out16.data(), probs16.data(), att_scratch.data(),
                              att_scratch16.data(), qkv16.data(), kBatch, kSeq, kChannels, kHeads);
       }},
      {"attention backward bf16",
       [&] {
         AttentionBackwardBf16(dqkv.data(), att_scratch.data(), att_scratch16.data(), d16.data(),
                               qkv16.data(), probs16.data(), kBatch, kSeq, kChannels, kHeads);
       }},
  };
  std::printf("\n%-46s %10s %10s %9s %8s\n", "bf16 attention (ms)", "all", "products",
              "GFLOP/s", "calls");
  for (const Timed& t : attention_bf16) {
    t.fn();  // primitives created
    ResetMatmulStats();
    const double s = MinSeconds(repetitions, t.fn);
    const MatmulStats stats = CurrentMatmulStats();
    const double per_run = 1.0 / (repetitions + 1);  // MinSeconds warms up once
    std::printf("%-46s %10.3f %10.3f %9.0f %8lld\n", t.name, s * 1e3,
                stats.seconds * per_run * 1e3, stats.flops / stats.seconds * 1e-9,
                static_cast<long long>(stats.calls / (repetitions + 1)));
  }
  return 0;
}

}  // namespace
}  // namespace fsdp

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::atoi(argv[1]) : 10;
  return fsdp::Main(repetitions > 0 ? repetitions : 10);
}
