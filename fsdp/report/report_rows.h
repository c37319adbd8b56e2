// File: fsdp/report/report_rows.h
//
// The memory report's data: one row per configuration (predicted, and
// measured when the runtime could train it), and with a budget the largest
// model, and the longest sequence, that fit it per strategy, precision,
// rank count and activation mode. report_tables.h renders it as CSV and
// Markdown, report_plot.h as gnuplot scripts.
#ifndef FSDP_REPORT_REPORT_ROWS_H_
#define FSDP_REPORT_REPORT_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fsdp/report/activation_mode.h"
#include "fsdp/report/budget.h"
#include "fsdp/report/memory_estimate.h"
#include "fsdp/report/rank_measurement.h"

namespace fsdp {
namespace report {

struct ReportRow {
  MemoryPoint point;
  RankMemoryEstimate predicted;
  std::optional<RankMeasurement> measured;  // the maximum over the job's ranks
  // "measured", or why not: "not measured: <runtime error>", "skipped: ...".
  std::string status;
};

struct FitRow {
  proto::ShardingStrategy strategy = proto::NO_SHARD;
  Precision precision = Precision::kFp32;
  int ranks = 1;
  int group_size = 0;
  ActivationMode mode;
  std::optional<FittingModel> largest;  // nullopt: nothing in the family fits
};

// The longest sequence of one model (SeqLenFits::model) within the budget.
struct SeqLenFitRow {
  proto::ShardingStrategy strategy = proto::NO_SHARD;
  Precision precision = Precision::kFp32;
  int ranks = 1;
  int group_size = 0;
  ActivationMode mode;
  std::optional<FittingSeqLen> longest;  // nullopt: not even one token fits
};

struct ReportData {
  std::string title;          // e.g. "full sweep, vocab=2048 seq_len=128 micro_batch=2"
  std::vector<ReportRow> rows;
  int64_t budget_bytes = 0;   // 0 = no budget
  std::vector<FitRow> fits;   // empty without a budget
  // The longest sequences of seq_len_model (its seq_len unused) at
  // seq_len_micro_batch; empty without a budget.
  GptConfig seq_len_model;
  int seq_len_micro_batch = 0;
  std::vector<SeqLenFitRow> seq_len_fits;
};

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_REPORT_ROWS_H_
