// File: fsdp/report/report_plot.h
//
// A self-contained gnuplot script (data inline as datablocks) that draws
// per-rank peak memory against parameter count for one precision: one panel
// per rank count, one colour per strategy, predicted dashed, measured solid
// with points, log-log axes; with a budget, a horizontal budget line and a
// marker where each strategy's predicted curve crosses it (the largest
// family model that fits, FitRow). The memory_report example writes the
// script next to the PNG and runs `gnuplot <script>`.
//
//   FSDP_RETURN_IF_ERROR(WriteFileAtomically("memory_fp32.gp",
//       ReportGnuplotScript(data, Precision::kFp32, "memory_fp32.png")));
#ifndef FSDP_REPORT_REPORT_PLOT_H_
#define FSDP_REPORT_REPORT_PLOT_H_

#include <string>

#include "fsdp/report/report_rows.h"

namespace fsdp {
namespace report {

// The script writes `png_path` (pngcairo, 1400x1000). Rows of other
// precisions are ignored; an empty selection still gives a valid script.
std::string ReportGnuplotScript(const ReportData& data, Precision precision,
                                const std::string& png_path);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_REPORT_PLOT_H_
