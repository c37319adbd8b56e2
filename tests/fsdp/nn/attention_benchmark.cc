// File: tests/fsdp/nn/attention_benchmark.cc
//
// Naive attention (B H T^2 probabilities saved) against the blocked one (B H T
// log-sum-exps saved), forward + backward, at several sequence lengths, one
// thread (--threads for more); best of --repeats. The GPT's shape: B 4, H 8, C 512.
//
//   bazel run -c opt //tests/fsdp/nn:attention_benchmark -- --seq_lens=256,1024,4096
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "fsdp/nn/attention.h"
#include "fsdp/nn/attention_layout.h"
#include "base/bf16_convert.h"
#include "fsdp/nn/compute_threads.h"
#include "fsdp/nn/flash_attention.h"
#include "fsdp/nn/matmul.h"

ABSL_FLAG(std::string, seq_lens, "256,1024", "comma-separated sequence lengths");
ABSL_FLAG(int, batch, 4, "sequences");
ABSL_FLAG(int, channels, 512, "model width");
ABSL_FLAG(int, heads, 8, "heads");
ABSL_FLAG(int, repeats, 3, "repetitions; the fastest is reported");
ABSL_FLAG(int, threads, 1, "compute threads (the products' and the kernels')");

namespace {

double Seconds(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (!fsdp::SetComputeThreads(absl::GetFlag(FLAGS_threads)).ok()) return 1;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, cpu = "unknown CPU";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::printf("# cpu: %s\n# %s\n", cpu.c_str(),
              fsdp::MatmulKernelDescription(fsdp::CurrentMatmulBackend()).c_str());
  const int B = absl::GetFlag(FLAGS_batch), C = absl::GetFlag(FLAGS_channels),
            H = absl::GetFlag(FLAGS_heads);
  std::printf("%6s %14s %14s %14s %16s %16s\n", "T", "naive ms", "blocked ms", "naive bf16 ms",
              "naive saved MiB", "blocked saved MiB");
  for (absl::string_view piece : absl::StrSplit(absl::GetFlag(FLAGS_seq_lens), ',')) {
    int T = 0;
    if (!absl::SimpleAtoi(piece, &T) || T < 1) {
      std::fprintf(stderr, "attention_benchmark: bad --seq_lens entry '%s'\n",
                   std::string(piece).c_str());
      return 2;
    }
    std::vector<float> qkv(int64_t{B} * T * 3 * C, 0.01f), dout(int64_t{B} * T * C, 0.02f),
        out(int64_t{B} * T * C), dqkv(qkv.size());
    for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>((i * 7919) % 1000) / 1e3f;
    const double probs_bytes = 4.0 * B * H * T * T;
    double naive = 0, naive_bf16 = 0;
    if (probs_bytes <= 4.0 * (int64_t{1} << 30)) {  // the naive one needs B H T^2 floats
      // A scratch slot per thread: the heads run on the threads.
      const int slots = absl::GetFlag(FLAGS_threads);
      std::vector<float> probs(int64_t{B} * H * T * T),
          scratch(slots * fsdp::AttentionBackwardScratchFloats(T));
      naive = 1e30;
      for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
        const auto start = std::chrono::steady_clock::now();
        fsdp::AttentionForward(out.data(), probs.data(), qkv.data(), B, T, C, H);
        fsdp::AttentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), probs.data(),
                                B, T, C, H, slots);
        naive = std::min(naive, Seconds(start));
      }
      // The bf16 compute mode's standard attention on the same values.
      const int hs = C / H;
      std::vector<uint16_t> qkv16(qkv.size()), dout16(dout.size()),
          scratch16(slots * fsdp::AttentionBf16ScratchElements(T, hs)), probs16(probs.size()),
          out16(out.size());
      base::ToBf16(qkv16.data(), qkv.data(), static_cast<int64_t>(qkv.size()));
      base::ToBf16(dout16.data(), dout.data(), static_cast<int64_t>(dout.size()));
      std::vector<float> scratch_bf16_mode(slots * fsdp::AttentionBf16ScratchFloats(T, hs));
      naive_bf16 = 1e30;
      for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
        const auto start = std::chrono::steady_clock::now();
        fsdp::AttentionForwardBf16(out16.data(), probs16.data(), scratch_bf16_mode.data(),
                                   scratch16.data(), qkv16.data(), B, T, C, H, slots);
        fsdp::AttentionBackwardBf16(dqkv.data(), scratch_bf16_mode.data(), scratch16.data(),
                                    dout16.data(), qkv16.data(), probs16.data(), B, T, C, H, slots);
        naive_bf16 = std::min(naive_bf16, Seconds(start));
      }
    }
    const int flash_slots = absl::GetFlag(FLAGS_threads);
    std::vector<float> lse(int64_t{B} * H * T),
        scratch(flash_slots * fsdp::FlashAttentionScratchFloats(T, C / H));
    double blocked = 1e30;
    for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
      const auto start = std::chrono::steady_clock::now();
      fsdp::FlashAttentionForward(out.data(), lse.data(), scratch.data(), qkv.data(), B, T, C, H,
                                  flash_slots);
      fsdp::FlashAttentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(),
                                   out.data(), lse.data(), B, T, C, H, flash_slots);
      blocked = std::min(blocked, Seconds(start));
    }
    std::printf("%6d %14.1f %14.1f %14.1f %16.1f %16.3f\n", T, naive > 0 ? 1e3 * naive : -1.0,
                1e3 * blocked, naive_bf16 > 0 ? 1e3 * naive_bf16 : -1.0,
                probs_bytes / (1 << 20), 4.0 * B * H * T / (1 << 20));
  }
  return 0;
}
