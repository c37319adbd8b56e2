// File: fsdp/run/metrics_writer.cc
#include "fsdp/run/metrics_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace fsdp {

std::string StepMetricsJson(const StepMetrics& m) {
  return absl::StrFormat(
      "{\"step\":%d,\"loss\":%.9g,\"lr\":%.9g,\"tokens_per_s\":%.6g,\"peak_bytes\":%d,"
      "\"comm_wait_s\":%.6g,\"matmul_s\":%.6g,\"matmul_flops\":%.6g,\"page_faults\":%d,"
      "\"tokens\":%d%s%s%s}",
      m.step, m.loss, m.lr, m.tokens_per_s, m.peak_bytes, m.comm_wait_s, m.matmul_s, m.matmul_flops,
      m.page_faults, m.tokens,
      m.has_val_loss ? absl::StrFormat(",\"val_loss\":%.9g", m.val_loss) : "",
      m.has_noise_scale ? absl::StrFormat(",\"gradient_noise_scale\":%.6g,\"noise_batch\":%d",
                                          m.noise_scale, m.noise_batch)
                        : "",
      m.has_straggler
          ? absl::StrFormat(",\"straggler_rank\":%d,\"straggler_phase\":%s,"
                            "\"straggler_vs_fastest\":%.4g,\"straggler_vs_own_best\":%.4g",
                            m.straggler_rank, nlohmann::json(m.straggler_phase).dump(),
                            m.straggler_vs_fastest, m.straggler_vs_own_best) +
                (m.straggler_unit.empty() ? std::string()
                                          : absl::StrCat(",\"straggler_unit\":",
                                                         nlohmann::json(m.straggler_unit).dump()))
          : "");
}

std::string ValMetricsJson(int step, int64_t tokens, double val_loss) {
  return absl::StrFormat("{\"step\":%d,\"tokens\":%d,\"val_loss\":%.9g}", step, tokens, val_loss);
}

std::string FinalMetricsJson(const FinalMetrics& m) {
  return absl::StrFormat(
      "{\"final\":true,\"steps\":%d,\"loss\":%.9g,\"param_sha256\":\"%s\",\"world_size\":%d,"
      "\"strategy\":\"%s\",\"tokens_per_s\":%.6g,\"comm_wait_share\":%.6g,"
      "\"matmul_share\":%.6g,\"matmul_gflops\":%.6g,\"optimizer_share\":%.6g,"
      "\"compute_threads\":%d,\"peak_bytes\":%d,\"matmul_backend\":%s,\"matmul_kernels\":%s%s%s}",
      m.steps, m.loss, m.param_sha256, m.world_size, m.strategy, m.tokens_per_s, m.comm_wait_share,
      m.matmul_share, m.matmul_gflops, m.optimizer_share, m.compute_threads, m.peak_bytes,
      nlohmann::json(m.matmul_backend).dump(), nlohmann::json(m.matmul_kernels).dump(),
      m.has_noise_scale
          ? absl::StrFormat(",\"gradient_noise_scale\":%.6g,\"gradient_noise_scale_stderr\":%.6g,"
                            "\"noise_steps\":%d,\"noise_batch\":%d",
                            m.noise_scale, m.noise_scale_stderr, m.noise_steps, m.noise_batch)
          : "",
      m.rank_skew.empty() ? ""
                          : absl::StrCat(",\"rank_skew\":", nlohmann::json(m.rank_skew).dump()));
}

std::string ResumedMetricsJson(int step) {
  return absl::StrFormat("{\"step\":%d,\"resumed\":true}", step);
}

absl::StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::Open(const std::string& path,
                                                                   Mode mode) {
  const int flags =
      O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (mode == Mode::kContinue ? O_APPEND : O_TRUNC);
  const int fd = open(path.c_str(), flags, 0644);
  if (fd < 0) {
    const int error = errno;
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot open --metrics_out file '", path, "' for writing: ", std::strerror(error),
        error == ELOOP ? " (it is a symbolic link, which is not followed: name the file itself)"
                       : ""));
  }
  std::FILE* file = fdopen(fd, mode == Mode::kContinue ? "a" : "w");
  if (file == nullptr) {
    const int error = errno;
    close(fd);
    return absl::InternalError(
        absl::StrCat("cannot open --metrics_out file '", path, "': ", std::strerror(error)));
  }
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(path, file));
}

MetricsWriter::~MetricsWriter() { std::fclose(file_); }

absl::Status MetricsWriter::WriteLine(absl::string_view json) {
  if (std::fwrite(json.data(), 1, json.size(), file_) != json.size() ||
      std::fputc('\n', file_) == EOF || std::fflush(file_) != 0) {
    return absl::InternalError(
        absl::StrCat("writing metrics file '", path_, "' failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace fsdp
