// File: examples/speed_goals.cc
#include "examples/speed_goals.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace speed_goals {
namespace {

constexpr double kFp32Goal = 1.3;       // x PyTorch DDP fp32
constexpr double kBf16Goal = 2.5;       // x PyTorch DDP bf16 autocast, on AMX
constexpr double kFullShardGoal = 1.1;  // full_shard step / no_shard step

const Measured* Find(const std::vector<Measured>& measured, const std::string& precision,
                     const std::string& strategy) {
  for (const Measured& m : measured) {
    if (m.precision == precision && m.strategy == strategy && m.tokens_per_s > 0) return &m;
  }
  return nullptr;
}

std::string Verdict(bool met) { return met ? "met" : "NOT met"; }

void PrintAgainstPyTorch(const std::vector<Measured>& measured, const std::string& precision,
                         const PyTorchResult& reference, double goal, bool applies,
                         const std::string& not_applying) {
  for (const char* strategy : {"no_shard", "full_shard"}) {
    const Measured* m = Find(measured, precision, strategy);
    const std::string what =
        absl::StrFormat("%s %s >= %.1fx PyTorch's %s", precision, strategy, goal,
                        precision == "fp32" ? "fp32" : "bf16 autocast");
    if (m == nullptr) {
      std::printf("  %-52s n/a: not measured in this run\n", what.c_str());
    } else if (!reference.ran) {
      std::printf("  %-52s n/a: PyTorch not run (%s)\n", what.c_str(), reference.why_not.c_str());
    } else {
      const double ratio = m->tokens_per_s / reference.tokens_per_s;
      if (applies) {
        std::printf("  %-52s %s: %.2fx (%.0f against %.0f tok/s)\n", what.c_str(),
                    Verdict(ratio >= goal).c_str(), ratio, m->tokens_per_s,
                    reference.tokens_per_s);
      } else {
        std::printf("  %-52s n/a: %s; here %.2fx (%.0f against %.0f tok/s)\n", what.c_str(),
                    not_applying.c_str(), ratio, m->tokens_per_s, reference.tokens_per_s);
      }
    }
  }
}

void PrintReference(const char* name, const PyTorchResult& r) {
  if (r.ran) {
    std::printf("#   PyTorch %-13s %6.0f tok/s at its best, %s, peak RSS per rank %s%s\n", name,
                r.tokens_per_s, r.layout.c_str(), r.rss.c_str(),
                r.exit_note.empty() ? "" : absl::StrCat(" (", r.exit_note, ")").c_str());
    for (const std::string& other : r.others) std::printf("#     also tried %s\n", other.c_str());
    if (!r.loaded.empty()) std::printf("#     loaded: %s\n", r.loaded.c_str());
  } else {
    std::printf("#   PyTorch %-13s not run: %s\n", name, r.why_not.c_str());
  }
}

}  // namespace

namespace {

// One layout's run: `layout_args` are its --nproc, --threads and --micro_batch.
PyTorchResult RunLayout(const PyTorchOptions& o, bool bf16,
                        const std::vector<std::string>& layout_args) {
  PyTorchResult r;
  const std::string command =
      absl::StrCat("timeout 900 ", o.python, " ", o.script, " ", absl::StrJoin(o.args, " "), " ",
                   absl::StrJoin(layout_args, " "), bf16 ? " --bf16" : "", " 2>&1");
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    r.why_not = "popen failed";
    return r;
  }
  char buffer[4096];
  std::string last;
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    std::string line(buffer);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.rfind("pytorch ", 0) == 0) last = line;
    if (line.rfind("loaded: ", 0) == 0) r.loaded = line.substr(8);
  }
  const int status = pclose(pipe);
  const size_t at = last.rfind(" tok/s");
  const size_t colon = last.rfind(": ", at);
  const std::string ended =
      WIFEXITED(status) ? absl::StrCat("exit status ", WEXITSTATUS(status))
                        : absl::StrCat("signal ", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (at == std::string::npos || colon == std::string::npos) {
    r.why_not =
        absl::StrCat("the reference failed (", ended, "; run it by hand: ", o.python, " ", o.script,
                     " ", absl::StrJoin(layout_args, " "), bf16 ? " --bf16" : "", ")");
    return r;
  }
  if (status != 0) {
    r.exit_note = absl::StrCat("its figures were printed, then ", ended,
                               WIFEXITED(status) && WEXITSTATUS(status) == 124
                                   ? ": the 15-minute timeout"
                                   : "");
  }
  r.tokens_per_s = std::strtod(last.c_str() + colon + 2, nullptr);
  const size_t rss = last.find("peak RSS per rank ");
  if (rss != std::string::npos) r.rss = last.substr(rss + 18);
  r.ran = r.tokens_per_s > 0;
  if (!r.ran) r.why_not = "the reference printed no tokens/s";
  return r;
}

}  // namespace

PyTorchResult RunPyTorchReference(const PyTorchOptions& o, bool bf16) {
  PyTorchResult not_run;
  if (access(o.python.c_str(), X_OK) != 0) {
    not_run.why_not = absl::StrCat(o.python, " not found");
    return not_run;
  }
  if (access(o.script.c_str(), R_OK) != 0) {
    not_run.why_not = absl::StrCat(o.script, " not found; pass --pytorch_reference");
    return not_run;
  }
  const std::string probe = absl::StrCat(o.python, " -c 'import torch' >/dev/null 2>&1");
  if (std::system(probe.c_str()) != 0) {
    not_run.why_not = absl::StrCat("no torch for ", o.python, " (apt-get install python3-torch)");
    return not_run;
  }
  struct Layout {
    std::string name;
    std::vector<std::string> args;
  };
  std::vector<Layout> layouts = {
      {absl::StrCat(o.nproc, o.nproc == 1 ? " rank" : " ranks", " x 1 thread",
                    o.nproc > 1 ? " (DDP over gloo)" : ""),
       {absl::StrCat("--nproc=", o.nproc), "--threads=1",
        absl::StrCat("--micro_batch=", o.micro_batch)}}};
  if (o.nproc > 1) {
    layouts.push_back({absl::StrCat("1 process x ", o.nproc, " threads"),
                       {"--nproc=1", absl::StrCat("--threads=", o.nproc),
                        absl::StrCat("--micro_batch=", o.micro_batch * o.nproc)}});
  }
  std::vector<PyTorchResult> runs;
  size_t fastest = 0;  // the fastest that ran, else the first
  for (const Layout& layout : layouts) {
    runs.push_back(RunLayout(o, bf16, layout.args));
    runs.back().layout = layout.name;
    const PyTorchResult& r = runs.back();
    if (r.ran && (!runs[fastest].ran || r.tokens_per_s > runs[fastest].tokens_per_s)) {
      fastest = runs.size() - 1;
    }
  }
  PyTorchResult best = runs[fastest];
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i == fastest) continue;
    const PyTorchResult& r = runs[i];
    best.others.push_back(r.ran ? absl::StrFormat("%s: %.0f tok/s", r.layout, r.tokens_per_s)
                                : absl::StrCat(r.layout, ": ", r.why_not));
  }
  return best;
}

bool CpuHasAmx() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) return line.find(" amx_bf16") != std::string::npos;
  }
  return false;
}

void PrintSpeedGoals(const std::vector<Measured>& measured, const PyTorchResult& fp32,
                     const PyTorchResult& bf16, bool amx) {
  std::printf("\n# PyTorch reference, right after the jobs, in each layout of the same batch:\n");
  PrintReference("fp32", fp32);
  PrintReference("bf16 autocast", bf16);

  std::printf("# goals of issue 11 (this run):\n");
  PrintAgainstPyTorch(measured, "fp32", fp32, kFp32Goal, true, "");
  PrintAgainstPyTorch(measured, "bf16", bf16, kBf16Goal, amx,
                      "the goal is for a CPU with AMX and this one has none");
  for (const char* precision : {"fp32", "bf16"}) {
    const Measured* no_shard = Find(measured, precision, "no_shard");
    const Measured* full_shard = Find(measured, precision, "full_shard");
    const std::string what =
        absl::StrFormat("%s full_shard step <= %.1fx no_shard's", precision, kFullShardGoal);
    if (no_shard == nullptr || full_shard == nullptr) {
      std::printf("  %-52s n/a: not both measured in this run\n", what.c_str());
      continue;
    }
    const double ratio = no_shard->tokens_per_s / full_shard->tokens_per_s;
    std::printf("  %-52s %s: %.2fx\n", what.c_str(), Verdict(ratio <= kFullShardGoal).c_str(),
                ratio);
  }
}

}  // namespace speed_goals
