// File: examples/speed_goals.h
//
// Issue 11's speed goals, judged by speed_bench in the sitting that measured
// them: the PyTorch reference (examples/pytorch_reference/gpt_ddp.py, DDP
// over gloo, fp32 and torch.autocast bf16) run right after the jobs on the
// same model, then one line per goal, "met", "NOT met" or "n/a" with why:
//   fp32 >= 1.3x PyTorch's fp32 (no_shard and full_shard);
//   bf16 >= 2.5x PyTorch's bf16 autocast where the CPU has AMX (elsewhere
//     the ratio is printed and the goal is n/a, as the issue says);
//   full_shard's step within 1.1x of no_shard's, in each precision.
// Prints to stdout only; it decides no exit code (the numbers are noisy on a
// shared machine).
//
//   PyTorchResult fp32 = RunPyTorchReference(options, /*bf16=*/false);
//   PrintSpeedGoals(measured, fp32, bf16, CpuHasAmx());
#ifndef EXAMPLES_SPEED_GOALS_H_
#define EXAMPLES_SPEED_GOALS_H_

#include <string>
#include <vector>

namespace speed_goals {

struct PyTorchOptions {
  std::string python;             // e.g. /usr/bin/python3
  std::string script;             // gpt_ddp.py
  std::vector<std::string> args;  // the model's flags and --steps: --layers=8 ... --steps=6
  int nproc = 2;                  // the jobs' ranks (1 thread each) ...
  int micro_batch = 4;            // ... and sequences per rank: the global batch is the product
};

struct PyTorchResult {
  bool ran = false;
  std::string why_not;  // when !ran: what was missing or what failed
  double tokens_per_s = 0;  // the fastest layout's
  std::string layout;       // that layout: "2 ranks x 1 thread (DDP over gloo)"
  std::string rss;      // "1.64, 1.71 GiB" as the script prints it
  std::string loaded;   // the script's "loaded: ..." line: libraries, kernels, threads
  std::vector<std::string> others;  // every other layout tried: "1 process x 2 threads: 732 tok/s"
  // When it printed its figures and then exited badly (a rank that hung at
  // exit until the timeout, say): how it ended. The figures still count:
  // they were measured before.
  std::string exit_note;
};

// PyTorch at its best on the machine (issue 40): runs the reference (under
// coreutils' `timeout`, 15 minutes each) in each layout of the same global
// batch, nproc ranks x 1 thread with DDP and, when nproc > 1, 1 process x
// nproc threads, and keeps the faster. On an Intel Xeon with AMX the faster
// was DDP in fp32 and the one process in bf16 (2026-12-08). Reads each run's
// last line ("... : N tok/s; peak RSS per rank A, B GiB"), even when the run
// then failed to exit cleanly (exit_note says how it ended).
PyTorchResult RunPyTorchReference(const PyTorchOptions& options, bool bf16);

// One speed_bench job's result, as the goals need it.
struct Measured {
  std::string precision;  // fp32, bf16 or bf16_fp32grad
  std::string strategy;
  double tokens_per_s = 0;
};

bool CpuHasAmx();

void PrintSpeedGoals(const std::vector<Measured>& measured, const PyTorchResult& fp32,
                     const PyTorchResult& bf16, bool amx);

}  // namespace speed_goals

#endif  // EXAMPLES_SPEED_GOALS_H_
