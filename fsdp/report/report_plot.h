// File: fsdp/report/report_plot.h
//
// A self-contained gnuplot script (data inline as datablocks) that draws
// per-rank peak memory against parameter count for one precision: one panel
// per rank count, one colour per strategy, predicted dashed, measured solid
// with points, log-log axes; with a budget, a horizontal budget line and a
// marker where each strategy's predicted curve crosses it (the largest
// family model that fits, FitRow). A second script draws the peak against
// sequence length per activation mode. The memory_report example writes the
// scripts next to the PNGs and runs `gnuplot <script>`.
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

// The sequence-length plot (pngcairo, 1400x600): the rows of a sequence-length
// sweep (one model, strategy, rank count and precision; data.rows) against
// seq_len, one colour per activation mode, predicted dashed and measured
// solid; left the per-rank peak of the total, right the activations and
// workspace alone (the part the modes change). With a budget, its line on
// the left and a marker per mode at the longest sequence that fits
// (data.seq_len_fits of the rows' strategy, precision and ranks).
std::string SeqLenGnuplotScript(const ReportData& data, const std::string& png_path);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_REPORT_PLOT_H_
