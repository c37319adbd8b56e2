// File: fsdp/nn/matmul.h
//
// Every matrix product of the layers goes through Matmul: one call shape for
// fp32 and bf16 operands, strided and transposed views, bias, scaling and
// accumulation, on either of two backends chosen process-wide:
//
//   - oneDNN (Debian's libdnnl 2.6): JIT kernels for the running CPU,
//     including AVX512_BF16 and AMX tiles for bf16 operands with fp32
//     accumulation; primitives are created once per shape and reused.
//   - OpenBLAS sgemm: fp32 only; bf16 operands are widened to fp32 first.
//
//   // y[n, out] = x[n, in] @ w[out, in]^T + b
//   Matmul({.m = n, .n = out, .k = in,
//           .a = {x, NumType::kF32, in},
//           .b = {w, NumType::kF32, in, /*transposed=*/true},
//           .c = y, .c_type = NumType::kF32, .ldc = out, .bias = b});
//
// The backends round differently, so the backend is part of a run's bits. The
// default (`DefaultMatmulBackend`) is a fixed rule of the machine and the build,
// never a timing: the same command gives the same bits every time.
// `MeasureMatmulBackends` times both, for an explicit `--matmul_backend=auto`
// and for benchmarks. Results are deterministic for a given backend, kernel,
// shape and thread count.
//
// Matmul keeps process-wide counters (calls, seconds, floating-point
// operations) so a training step can report the share of its time spent in
// matrix products and the rate they achieved.
#ifndef FSDP_NN_MATMUL_H_
#define FSDP_NN_MATMUL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fsdp {

enum class NumType { kF32, kBF16 };  // bf16: raw uint16_t bits (comm/dtype.h)

// A matrix operand. Its logical shape comes from MatmulArgs (m x k for A,
// k x n for B). Stored row-major with `ld` elements between consecutive stored
// rows; `transposed` means the stored matrix is the logical one's transpose
// (for B: stored n x k, as PyTorch stores a Linear weight).
struct MatrixArg {
  const void* data = nullptr;
  NumType type = NumType::kF32;
  int64_t ld = 0;
  bool transposed = false;
};

struct MatmulArgs {
  int64_t m = 0, n = 0, k = 0;
  MatrixArg a;  // logical m x k
  MatrixArg b;  // logical k x n
  void* c = nullptr;  // m x n, row-major, leading dimension ldc
  NumType c_type = NumType::kF32;
  int64_t ldc = 0;
  const float* bias = nullptr;  // n floats added to every row (fp32), or null
  float alpha = 1.0f;           // scales the product; must be 1 when bias is set
  bool accumulate = false;      // C += alpha A B (+ bias) instead of C = ...
};

// C = alpha op(A) op(B) (+ bias) (+ C if accumulate), fp32 accumulation.
// Shapes and strides are the caller's contract (checked with FSDP_CHECK-style
// aborts in debug builds only); nothing here allocates after the first call
// with a given shape, except OpenBLAS's widening of bf16 operands.
void Matmul(const MatmulArgs& args);

enum class MatmulBackend { kOpenBlas, kOneDnn };

// "openblas" / "onednn".
const char* MatmulBackendName(MatmulBackend backend);
// Parses "openblas" or "onednn" (the choices of `--matmul_backend` that name
// a backend; "default" and "auto" are the caller's).
absl::StatusOr<MatmulBackend> ParseMatmulBackend(absl::string_view name);

// How a job's backend is chosen (`--matmul_backend`, parsed once where the
// flag is read; fsdp/run/compute_backend.h acts on it): kDefault, the
// machine's rule (DefaultMatmulBackend); kOneDnn or kOpenBlas as named; kAuto,
// timed at start-up (MeasureMatmulBackends).
enum class MatmulBackendChoice { kDefault, kOneDnn, kOpenBlas, kAuto };

// The flag spelling: "default", "onednn", "openblas", "auto".
const char* MatmulBackendChoiceName(MatmulBackendChoice choice);

// Parses the four spellings above, else InvalidArgument saying what each one
// means.
absl::StatusOr<MatmulBackendChoice> ParseMatmulBackendChoice(absl::string_view name);

// Process-wide. The default is oneDNN. Not thread-safe against concurrent Matmul.
void SetMatmulBackend(MatmulBackend backend);
MatmulBackend CurrentMatmulBackend();

// The default backend for this machine and build, a pure function of the
// instruction set oneDNN runs with here (its effective ISA: the CPU's, capped
// by ONEDNN_MAX_CPU_ISA if set): oneDNN from AVX2 up (its JIT kernels for
// AVX2, AVX-512 and AMX, and the only native bf16 products), OpenBLAS below.
// `reason` says which ISA decided, e.g. "oneDNN's instruction set here is
// avx512_core_bf16 (AVX2 or newer)".
struct DefaultBackendChoice {
  MatmulBackend backend = MatmulBackend::kOneDnn;
  std::string reason;
};
DefaultBackendChoice DefaultMatmulBackend();

// Times both backends on an fp32 256 x 1536 x 512 product (the GPT's qkv
// projection shape) with the current thread count: three untimed calls each
// first (oneDNN generates its kernel, OpenBLAS allocates its buffers), then 9
// rounds alternating which backend goes first, the best time of each. It
// returns oneDNN unless OpenBLAS is faster by more than 20% (a margin, so that
// machines where the two are close do not flip between runs). About 0.1 s,
// once per process: later calls return the first answer. A timing is noisy,
// so a choice made from it makes the bits depend on the timing; the default
// never uses it.
struct BackendMeasurement {
  MatmulBackend chosen = MatmulBackend::kOneDnn;
  double openblas_gflops = 0;
  double onednn_gflops = 0;
};
BackendMeasurement MeasureMatmulBackends();

// Which kernels run here, for benchmark output: for oneDNN the instruction set
// it detected and the implementation it chose for an fp32 and a bf16 product
// (for example "onednn: isa avx512_core_amx, f32 brg:avx512_core, bf16
// brg:avx512_core_amx_bf16"); for OpenBLAS its build configuration and core.
std::string MatmulKernelDescription(MatmulBackend backend);

// Counters over every Matmul call in this process since the last reset.
struct MatmulStats {
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;  // 2 m n k per call
};
MatmulStats CurrentMatmulStats();
void ResetMatmulStats();

// Sets the thread count of both backends (OpenBLAS's pool and oneDNN's OpenMP
// runtime) for products issued from the calling thread.
void SetMatmulThreads(int threads);

// For its lifetime, oneDNN's products issued from the calling thread use
// `threads` threads (OpenBLAS's are left alone): for a stretch of products too
// small to gain from more, where splitting them costs more than it saves
// (bf16 attention's per-head products, docs/compute.md). Restores the count
// it found.
class MatmulThreadsScope {
 public:
  explicit MatmulThreadsScope(int threads);
  ~MatmulThreadsScope();
  MatmulThreadsScope(const MatmulThreadsScope&) = delete;
  MatmulThreadsScope& operator=(const MatmulThreadsScope&) = delete;

 private:
  int saved_;
};

}  // namespace fsdp

#endif  // FSDP_NN_MATMUL_H_
