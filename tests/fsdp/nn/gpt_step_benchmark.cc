// File: tests/fsdp/nn/gpt_step_benchmark.cc
//
// Milliseconds per GPT forward + backward on one process (no communication,
// no optimizer), for a few sizes. Run optimized:
//   bazel run -c opt //tests/fsdp/nn:gpt_step_benchmark -- --threads=2
#include <chrono>
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "fsdp/nn/compute_threads.h"
#include "fsdp/nn/gpt_model.h"
#include "tests/fsdp/nn/model_harness.h"

ABSL_FLAG(int, threads, 0, "OpenBLAS threads (0: hardware threads / LOCAL_WORLD_SIZE)");
ABSL_FLAG(int, steps, 20, "timed steps per configuration");

namespace fsdp {
namespace {

int Run() {
  const int threads = absl::GetFlag(FLAGS_threads);
  if (absl::Status s = SetComputeThreads(threads > 0 ? threads : DefaultComputeThreads());
      !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  struct Case { GptConfig config; int micro_batch; };
  const Case cases[] = {
      {{2, 64, 4, 256, 64}, 4},     // the tiny default
      {{4, 128, 4, 512, 128}, 4},
      {{6, 256, 8, 1024, 128}, 4},
  };
  std::printf("compute threads: %d\n", ComputeThreads());
  for (const Case& c : cases) {
    MemoryTracker tracker;
    auto model = GptModel::Create(c.config, c.micro_batch, &tracker);
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
      return 1;
    }
    testing_util::ModelHarness h(model->get());
    h.Init(1);
    const Batch batch = testing_util::RandomBatch(c.micro_batch, c.config.seq_len,
                                                  c.config.vocab, 1);
    (void)h.Forward(batch);  // warm-up
    (void)h.Backward(1.0f);
    const int steps = absl::GetFlag(FLAGS_steps);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      if (!h.Forward(batch).ok() || !h.Backward(1.0f).ok()) return 1;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count() / steps;
    const double tokens = double(c.micro_batch) * c.config.seq_len;
    std::printf("%-45s B=%d  params %9lld  %8.2f ms/step  %9.0f tokens/s  activations %s\n",
                GptConfigToString(c.config).c_str(), c.micro_batch,
                static_cast<long long>(GptNumParams(c.config)), ms, tokens / ms * 1000,
                FormatBytes(GptActivationBytes(c.config, c.micro_batch)).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace fsdp

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return fsdp::Run();
}
