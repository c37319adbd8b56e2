// File: fsdp/report/report_tables.h
//
// The memory report as CSV (every number, for scripts and the plot) and as
// Markdown (for docs/memory.md and reading). Bytes are per rank at peak.
//
// CSV columns, one row per ReportRow (measured columns empty when the point
// was not measured; `status` says why):
//   strategy,precision,ranks,group_size,layers,d_model,heads,vocab,seq_len,
//   micro_batch,activation_checkpointing (none, all, every:K),attention
//   (standard, flash),params,predicted_bytes,measured_bytes,measured_rss_bytes,
//   measured_rss_baseline_bytes,predicted_model_state_bytes,
//   predicted_<category>_bytes, measured_<category>_bytes for each
//   MemoryTracker category (parameters, gradients, optimizer_state,
//   activations, comm_buffers, workspace), predicted_master_parameters_bytes,
//   predicted_gathered_bytes,status
// predicted_bytes is the predicted peak of the total (the replayed step);
// measured_bytes the tracker's peak of the total; measured_rss_bytes the
// process's VmHWM.
#ifndef FSDP_REPORT_REPORT_TABLES_H_
#define FSDP_REPORT_REPORT_TABLES_H_

#include <string>

#include "fsdp/report/report_rows.h"

namespace fsdp {
namespace report {

std::string ReportCsv(const ReportData& data);

// A title, the per-point table (predicted, measured, their difference, peak
// RSS), and with a budget the largest fitting model and the longest fitting
// sequence per strategy, precision, activation mode and ranks.
std::string ReportMarkdown(const ReportData& data);

// The CSV header line (without newline), for readers and tests.
std::string ReportCsvHeader();

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_REPORT_TABLES_H_
