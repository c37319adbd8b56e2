// File: fsdp/nn/matmul.cc
#include "fsdp/nn/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/bfloat16.h"
#include "comm/dtype.h"
#include "dnnl.hpp"

namespace fsdp {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<MatmulBackend> g_backend{MatmulBackend::kOneDnn};

// Counters: Matmul runs on the training thread; the atomics only make a
// reader on another thread (a benchmark) safe.
std::atomic<int64_t> g_calls{0};
std::atomic<int64_t> g_nanoseconds{0};
std::atomic<double> g_flops{0};

void AddStats(int64_t ns, double flops) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  g_nanoseconds.fetch_add(ns, std::memory_order_relaxed);
  double old = g_flops.load(std::memory_order_relaxed);
  while (!g_flops.compare_exchange_weak(old, old + flops, std::memory_order_relaxed)) {
  }
}

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "fsdp::Matmul: %s\n", message.c_str());
  std::abort();
}

// ------------------------------------------------------------------ OpenBLAS

// Widens a bf16 operand (stored rows x cols, leading dimension ld) into a
// dense fp32 copy with the same orientation.
const float* WidenBf16(const MatrixArg& arg, int64_t stored_rows, int64_t stored_cols,
                       std::vector<float>& scratch, int64_t* ld) {
  if (arg.type == NumType::kF32) {
    *ld = arg.ld;
    return static_cast<const float*>(arg.data);
  }
  scratch.resize(static_cast<size_t>(stored_rows * stored_cols));
  const auto* bits = static_cast<const uint16_t*>(arg.data);
  for (int64_t r = 0; r < stored_rows; ++r) {
    for (int64_t c = 0; c < stored_cols; ++c) {
      scratch[r * stored_cols + c] = base::FromBf16Bits(bits[r * arg.ld + c]);
    }
  }
  *ld = stored_cols;
  return scratch.data();
}

void OpenBlasMatmul(const MatmulArgs& x) {
  thread_local std::vector<float> a_wide, b_wide, c_wide;
  int64_t lda = 0, ldb = 0;
  const float* a = WidenBf16(x.a, x.a.transposed ? x.k : x.m, x.a.transposed ? x.m : x.k, a_wide,
                             &lda);
  const float* b = WidenBf16(x.b, x.b.transposed ? x.n : x.k, x.b.transposed ? x.k : x.n, b_wide,
                             &ldb);
  float* c = static_cast<float*>(x.c);
  int64_t ldc = x.ldc;
  if (x.c_type == NumType::kBF16) {
    c_wide.assign(static_cast<size_t>(x.m * x.n), 0.0f);
    const auto* bits = static_cast<const uint16_t*>(x.c);
    if (x.accumulate) {
      for (int64_t r = 0; r < x.m; ++r)
        for (int64_t j = 0; j < x.n; ++j)
          c_wide[r * x.n + j] = base::FromBf16Bits(bits[r * x.ldc + j]);
    }
    c = c_wide.data();
    ldc = x.n;
  }
  cblas_sgemm(CblasRowMajor, x.a.transposed ? CblasTrans : CblasNoTrans,
              x.b.transposed ? CblasTrans : CblasNoTrans, x.m, x.n, x.k, x.alpha, a, lda, b, ldb,
              x.accumulate ? 1.0f : 0.0f, c, ldc);
  if (x.bias != nullptr) {
    for (int64_t r = 0; r < x.m; ++r) {
      float* row = c + r * ldc;
      for (int64_t j = 0; j < x.n; ++j) row[j] += x.bias[j];
    }
  }
  if (x.c_type == NumType::kBF16) {
    auto* bits = static_cast<uint16_t*>(x.c);
    for (int64_t r = 0; r < x.m; ++r)
      for (int64_t j = 0; j < x.n; ++j)
        bits[r * x.ldc + j] = base::ToBf16Bits(c_wide[r * x.n + j]);
  }
}

// ------------------------------------------------------------------ oneDNN

dnnl::memory::data_type DnnlType(NumType type) {
  return type == NumType::kF32 ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::bf16;
}

// A logical rows x cols operand stored row-major (or transposed) with `ld`.
dnnl::memory::desc OperandDesc(int64_t rows, int64_t cols, const MatrixArg& arg) {
  const dnnl::memory::dims strides =
      arg.transposed ? dnnl::memory::dims{1, arg.ld} : dnnl::memory::dims{arg.ld, 1};
  return dnnl::memory::desc({rows, cols}, DnnlType(arg.type), strides);
}

// Everything that selects a distinct primitive, the thread count included: a
// oneDNN primitive divides its work for the threads there were when it was
// made (MatmulThreadsScope can lower them for a stretch of small products).
using PrimitiveKey =
    std::tuple<int64_t, int64_t, int64_t,               // m n k
               int, int64_t, bool, int, int64_t, bool,  // a, b
               int, int64_t, bool, float, bool, int>;   // c, bias, alpha, acc, threads

PrimitiveKey KeyOf(const MatmulArgs& x) {
  return PrimitiveKey(x.m, x.n, x.k, static_cast<int>(x.a.type), x.a.ld, x.a.transposed,
                      static_cast<int>(x.b.type), x.b.ld, x.b.transposed,
                      static_cast<int>(x.c_type), x.ldc, x.bias != nullptr, x.alpha, x.accumulate,
                      omp_get_max_threads());
}

struct CachedPrimitive {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c, bias, scratchpad;
  bool has_bias = false;
  std::string implementation;
};

// A primitive's operands as one thread binds them: dnnl::memory is a handle,
// so set_data_handle retargets these and the argument map built once with
// them (no map built per call). Per thread, so that threads may run products
// at once (attention's heads on the compute threads): a primitive may be
// executed by several threads at once, each with its own arguments and its
// own scratchpad. The scratchpad is ours (scratchpad_mode::user): oneDNN's
// own, in a build without DNNL_ENABLE_CONCURRENT_EXEC (Debian's), is one
// buffer that primitives share, and two heads' products running at once
// through it gave a different loss at every run.
struct BoundOperands {
  dnnl::memory a, b, c, bias, scratchpad;
  std::unordered_map<int, dnnl::memory> args;
};

class OneDnn {
 public:
  static OneDnn& Get() {
    static OneDnn* instance = new OneDnn();  // never destroyed: used until exit
    return *instance;
  }

  // Null when oneDNN has no implementation for this combination. Entries are
  // never removed: the pointer stays valid.
  CachedPrimitive* Find(const MatmulArgs& x) {
    std::lock_guard<std::mutex> lock(mu_);
    const PrimitiveKey key = KeyOf(x);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second.get();
    std::unique_ptr<CachedPrimitive> made = Make(x);
    CachedPrimitive* raw = made.get();
    cache_.emplace(key, std::move(made));
    return raw;
  }

  void Run(const CachedPrimitive& p, const MatmulArgs& x) {
    thread_local dnnl::stream stream(engine_);
    thread_local std::unordered_map<const CachedPrimitive*, BoundOperands> bound;
    thread_local std::vector<std::byte> scratchpad;  // the largest any product here needed
    const size_t scratchpad_bytes = p.scratchpad.get_size();
    if (scratchpad.size() < scratchpad_bytes) scratchpad.resize(scratchpad_bytes);
    auto [it, fresh] = bound.try_emplace(&p);
    BoundOperands& o = it->second;
    if (fresh) {
      o.a = dnnl::memory(p.a, engine_, nullptr);
      o.b = dnnl::memory(p.b, engine_, nullptr);
      o.c = dnnl::memory(p.c, engine_, nullptr);
      o.bias = dnnl::memory(p.bias, engine_, nullptr);
      o.scratchpad = dnnl::memory(p.scratchpad, engine_, nullptr);
      o.args = {{DNNL_ARG_SRC, o.a},
                {DNNL_ARG_WEIGHTS, o.b},
                {DNNL_ARG_DST, o.c},
                {DNNL_ARG_SCRATCHPAD, o.scratchpad}};
      if (p.has_bias) o.args.emplace(DNNL_ARG_BIAS, o.bias);
    }
    o.scratchpad.set_data_handle(scratchpad.data());
    o.a.set_data_handle(const_cast<void*>(x.a.data));
    o.b.set_data_handle(const_cast<void*>(x.b.data));
    o.c.set_data_handle(x.c);
    if (x.bias != nullptr) o.bias.set_data_handle(const_cast<float*>(x.bias));
    p.primitive.execute(stream, o.args);
    stream.wait();
  }

 private:
  OneDnn() : engine_(dnnl::engine::kind::cpu, 0) {}

  std::unique_ptr<CachedPrimitive> Make(const MatmulArgs& x) {
    try {
      const dnnl::memory::desc a_md = OperandDesc(x.m, x.k, x.a);
      const dnnl::memory::desc b_md = OperandDesc(x.k, x.n, x.b);
      const dnnl::memory::desc c_md({x.m, x.n}, DnnlType(x.c_type),
                                    dnnl::memory::dims{x.ldc, 1});
      const dnnl::memory::desc bias_md({1, x.n}, dnnl::memory::data_type::f32,
                                       dnnl::memory::dims{x.n, 1});
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // see BoundOperands
      if (x.alpha != 1.0f) attr.set_output_scales(0, {x.alpha});
      if (x.accumulate) {
        dnnl::post_ops ops;
        ops.append_sum(1.0f);
        attr.set_post_ops(ops);
      }
      const dnnl::matmul::desc desc = x.bias != nullptr
                                          ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                                          : dnnl::matmul::desc(a_md, b_md, c_md);
      const dnnl::matmul::primitive_desc pd(desc, attr, engine_);
      auto made = std::make_unique<CachedPrimitive>();
      made->primitive = dnnl::matmul(pd);
      made->a = a_md;
      made->b = b_md;
      made->c = c_md;
      made->bias = bias_md;
      made->scratchpad = pd.scratchpad_desc();
      made->has_bias = x.bias != nullptr;
      made->implementation = pd.impl_info_str();
      return made;
    } catch (const dnnl::error& e) {
      return nullptr;  // unsupported here: the caller widens to OpenBLAS
    }
  }

  dnnl::engine engine_;
  std::mutex mu_;  // guards cache_: tests run models on several threads
  std::map<PrimitiveKey, std::unique_ptr<CachedPrimitive>> cache_;
};

void OneDnnMatmul(const MatmulArgs& x) {
  OneDnn& dnn = OneDnn::Get();
  const CachedPrimitive* p = dnn.Find(x);
  if (p == nullptr) {
    OpenBlasMatmul(x);
    return;
  }
  dnn.Run(*p, x);
}

// Dense GPT-shaped fp32 operands for measurements and descriptions.
struct Sample {
  int64_t m, n, k;
  std::vector<float> a, b, c;
  std::vector<uint16_t> a16, b16;
  Sample(int64_t m_, int64_t n_, int64_t k_) : m(m_), n(n_), k(k_) {
    a.resize(m * k);
    b.resize(n * k);
    c.resize(m * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 37) % 101) / 101.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 53) % 97) / 97.0f;
    for (float v : a) a16.push_back(base::ToBf16Bits(v));
    for (float v : b) b16.push_back(base::ToBf16Bits(v));
  }
  MatmulArgs Args(NumType type) {
    MatmulArgs x;
    x.m = m, x.n = n, x.k = k;
    x.a = {type == NumType::kF32 ? static_cast<const void*>(a.data()) : a16.data(), type, k};
    x.b = {type == NumType::kF32 ? static_cast<const void*>(b.data()) : b16.data(), type, k,
           true};
    x.c = c.data();
    x.ldc = n;
    return x;
  }
};

// Seconds of one call of `backend` on the product `x`.
double TimeOnce(MatmulBackend backend, const MatmulArgs& x) {
  const Clock::time_point start = Clock::now();
  backend == MatmulBackend::kOneDnn ? OneDnnMatmul(x) : OpenBlasMatmul(x);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// oneDNN's name for an instruction set (dnnl_types.h), for messages.
const char* CpuIsaName(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "no vector extension";
  }
}

}  // namespace

void Matmul(const MatmulArgs& x) {
  if (x.m == 0 || x.n == 0) return;
  if (x.bias != nullptr && x.alpha != 1.0f) Die("alpha must be 1 when a bias is added");
  const Clock::time_point start = Clock::now();
  if (g_backend.load(std::memory_order_relaxed) == MatmulBackend::kOneDnn) {
    OneDnnMatmul(x);
  } else {
    OpenBlasMatmul(x);
  }
  int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  // The counters report wall time: a product that ran beside the team's other
  // threads' products (attention's heads) counts its share, as if the team
  // were equally busy.
  if (omp_in_parallel()) ns /= omp_get_num_threads();
  AddStats(ns, 2.0 * static_cast<double>(x.m) * x.n * x.k);
}

const char* MatmulBackendName(MatmulBackend backend) {
  return backend == MatmulBackend::kOneDnn ? "onednn" : "openblas";
}

absl::StatusOr<MatmulBackend> ParseMatmulBackend(absl::string_view name) {
  if (name == "onednn") return MatmulBackend::kOneDnn;
  if (name == "openblas") return MatmulBackend::kOpenBlas;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown matmul backend '", name, "'; use onednn or openblas"));
}

namespace {

// The flag's spellings, in the order its help lists them.
constexpr std::pair<MatmulBackendChoice, const char*> kChoiceNames[] = {
    {MatmulBackendChoice::kDefault, "default"},
    {MatmulBackendChoice::kOneDnn, "onednn"},
    {MatmulBackendChoice::kOpenBlas, "openblas"},
    {MatmulBackendChoice::kAuto, "auto"},
};

}  // namespace

const char* MatmulBackendChoiceName(MatmulBackendChoice choice) {
  for (const auto& [named, name] : kChoiceNames) {
    if (named == choice) return name;
  }
  return "unknown";
}

absl::StatusOr<MatmulBackendChoice> ParseMatmulBackendChoice(absl::string_view name) {
  for (const auto& [choice, spelled] : kChoiceNames) {
    if (name == spelled) return choice;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--matmul_backend=", name,
      " is not one of default (the machine's rule: the same bits every run), onednn, openblas, "
      "auto (timed at start-up: the bits can change between runs)"));
}

void SetMatmulBackend(MatmulBackend backend) { g_backend.store(backend); }
MatmulBackend CurrentMatmulBackend() { return g_backend.load(); }

DefaultBackendChoice DefaultMatmulBackend() {
  // oneDNN's ISA values are bit sets, each including the ones below it
  // (dnnl_types.h): avx2's bits are in every later x86 set.
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  const bool avx2_or_newer = (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2;
  DefaultBackendChoice choice;
  choice.backend = avx2_or_newer ? MatmulBackend::kOneDnn : MatmulBackend::kOpenBlas;
  choice.reason = absl::StrCat("oneDNN's instruction set here is ", CpuIsaName(isa),
                               avx2_or_newer ? " (AVX2 or newer)" : " (older than AVX2)");
  return choice;
}

BackendMeasurement MeasureMatmulBackends() {
  // Measured once per process, so every job a process runs (tests run
  // several) uses the same backend.
  static const BackendMeasurement measured = [] {
    Sample sample(256, 1536, 512);
    const MatmulArgs x = sample.Args(NumType::kF32);
    // Untimed: oneDNN's first call generates its kernel, OpenBLAS's
    // allocates; the next ones settle caches and thread pools.
    for (int i = 0; i < 3; ++i) {
      TimeOnce(MatmulBackend::kOneDnn, x);
      TimeOnce(MatmulBackend::kOpenBlas, x);
    }
    // Alternated, so a burst of load elsewhere hits both; the best of each.
    double best_onednn = 1e30, best_openblas = 1e30;
    for (int round = 0; round < 9; ++round) {
      const bool onednn_first = round % 2 == 0;
      const MatmulBackend first = onednn_first ? MatmulBackend::kOneDnn : MatmulBackend::kOpenBlas;
      const MatmulBackend second =
          onednn_first ? MatmulBackend::kOpenBlas : MatmulBackend::kOneDnn;
      const double t_first = TimeOnce(first, x);
      const double t_second = TimeOnce(second, x);
      best_onednn = std::min(best_onednn, onednn_first ? t_first : t_second);
      best_openblas = std::min(best_openblas, onednn_first ? t_second : t_first);
    }
    const double flops = 2.0 * sample.m * sample.n * sample.k;
    BackendMeasurement m;
    m.onednn_gflops = flops / best_onednn / 1e9;
    m.openblas_gflops = flops / best_openblas / 1e9;
    m.chosen = m.openblas_gflops > 1.2 * m.onednn_gflops ? MatmulBackend::kOpenBlas
                                                          : MatmulBackend::kOneDnn;
    return m;
  }();
  return measured;
}

std::string MatmulKernelDescription(MatmulBackend backend) {
  if (backend == MatmulBackend::kOpenBlas) {
    return absl::StrCat("openblas: ", openblas_get_config(), ", core ", openblas_get_corename(),
                        ", bf16 widened to fp32");
  }
  Sample sample(64, 64, 64);
  std::string f32, bf16;
  {
    const CachedPrimitive* p = OneDnn::Get().Find(sample.Args(NumType::kF32));
    f32 = p != nullptr ? p->implementation : "unsupported";
    p = OneDnn::Get().Find(sample.Args(NumType::kBF16));
    bf16 = p != nullptr ? p->implementation : "unsupported (widened to fp32 on OpenBLAS)";
  }
  const dnnl_version_t* v = dnnl_version();
  return absl::StrCat("onednn ", v->major, ".", v->minor, ".", v->patch, ": f32 ", f32,
                      ", bf16 ", bf16);
}

MatmulStats CurrentMatmulStats() {
  MatmulStats s;
  s.calls = g_calls.load();
  s.seconds = static_cast<double>(g_nanoseconds.load()) * 1e-9;
  s.flops = g_flops.load();
  return s;
}

void ResetMatmulStats() {
  g_calls.store(0);
  g_nanoseconds.store(0);
  g_flops.store(0);
}

void SetMatmulThreads(int threads) {
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
}

MatmulThreadsScope::MatmulThreadsScope(int threads) : saved_(omp_get_max_threads()) {
  omp_set_num_threads(threads);
}

MatmulThreadsScope::~MatmulThreadsScope() { omp_set_num_threads(saved_); }

}  // namespace fsdp
