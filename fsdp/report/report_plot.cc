// File: fsdp/report/report_plot.cc
#include "fsdp/report/report_plot.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/gnuplot.h"
#include "fsdp/plan/sharding_strategy.h"

namespace fsdp {
namespace report {
namespace {

// One colour per strategy, the same in every panel and both precisions.
const char* StrategyColour(proto::ShardingStrategy strategy) {
  switch (strategy) {
    case proto::NO_SHARD:
      return "#d62728";  // red
    case proto::SHARD_OPTIMIZER:
      return "#ff7f0e";  // orange
    case proto::SHARD_GRAD_OP:
      return "#2ca02c";  // green
    case proto::FULL_SHARD:
      return "#1f77b4";  // blue
    case proto::HYBRID_SHARD:
      return "#9467bd";  // purple
    default:
      return "#7f7f7f";
  }
}

// A datablock: "$name << EOD", one "x y" line per point sorted by x, "EOD".
std::string Datablock(const std::string& name, std::vector<std::pair<double, double>> points) {
  std::sort(points.begin(), points.end());
  std::string block = absl::StrCat("$", name, " << EOD\n");
  for (const auto& [x, y] : points) absl::StrAppend(&block, absl::StrFormat("%.6g %.6g\n", x, y));
  absl::StrAppend(&block, "EOD\n");
  return block;
}

// Where the predicted curve crosses the budget: log-log interpolation
// between the largest family model that fits and the next one (which does
// not); the largest fitting model itself when there is no next one.
double BudgetCrossingParams(const FittingModel& fit, int64_t budget_bytes) {
  const double x0 = static_cast<double>(fit.estimate.num_params);
  const double y0 = static_cast<double>(fit.estimate.total_bytes());
  if (fit.next_num_params <= 0 || fit.next_total_bytes <= y0) return x0;
  const double x1 = static_cast<double>(fit.next_num_params);
  const double y1 = static_cast<double>(fit.next_total_bytes);
  const double t = (std::log(static_cast<double>(budget_bytes)) - std::log(y0)) /
                   (std::log(y1) - std::log(y0));
  return std::exp(std::log(x0) + t * (std::log(x1) - std::log(x0)));
}

// Text for gnuplot's enhanced mode inside single quotes: '_' and '^' would
// start sub- and superscripts, braces group, '@' overprints.
std::string GpText(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '_' || c == '^' || c == '{' || c == '}' || c == '@') out += '\\';
    if (c == '\'') {
      out += "''";
      continue;
    }
    out += c;
  }
  return out;
}

// `text` (already GpText-escaped, '\n' for a line break) inside a gnuplot
// double-quoted string, where backslashes are escapes of their own.
std::string DoubleQuoted(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "'";
    } else {
      out += c;
    }
  }
  return out;
}

// One colour per activation mode in the sequence-length plot.
const char* ModeColour(const ActivationMode& mode) {
  const std::string name = ActivationModeName(mode);
  if (name == "none") return "#d62728";           // red
  if (name == "every:2") return "#ff7f0e";        // orange
  if (name == "all") return "#1f77b4";            // blue
  if (name == "flash") return "#2ca02c";          // green
  if (name == "all+flash") return "#9467bd";      // purple
  if (name == "every:2+flash") return "#8c564b";  // brown
  return "#7f7f7f";
}

// A gnuplot identifier for a mode: "every:2+flash" -> "every2_flash".
std::string ModeId(const ActivationMode& mode) {
  std::string id;
  for (char c : ActivationModeName(mode)) {
    if (c == ':') continue;
    id += c == '+' ? '_' : c;
  }
  return id;
}

}  // namespace

std::string ReportGnuplotScript(const ReportData& data, Precision precision,
                                const std::string& png_path) {
  // Curves per (ranks, strategy): predicted and measured points.
  struct Curves {
    std::vector<std::pair<double, double>> predicted, measured;
    std::vector<std::pair<double, double>> crossing;
  };
  std::map<int, std::map<proto::ShardingStrategy, Curves>> panels;
  for (const ReportRow& row : data.rows) {
    if (row.point.precision != precision) continue;
    Curves& curves = panels[row.point.ranks][row.point.strategy];
    const double params = static_cast<double>(row.predicted.num_params);
    curves.predicted.push_back({params, static_cast<double>(row.predicted.total_bytes())});
    if (row.measured.has_value()) {
      curves.measured.push_back({params, static_cast<double>(row.measured->peak_total_bytes)});
    }
  }
  if (data.budget_bytes > 0) {
    for (const FitRow& fit : data.fits) {
      if (fit.precision != precision || !fit.largest.has_value()) continue;
      auto panel = panels.find(fit.ranks);
      if (panel == panels.end()) continue;
      auto curves = panel->second.find(fit.strategy);
      if (curves == panel->second.end()) continue;
      curves->second.crossing.push_back(
          {BudgetCrossingParams(*fit.largest, data.budget_bytes),
           static_cast<double>(data.budget_bytes)});
    }
  }

  std::string script = absl::StrCat(
      "# Generated by //examples:memory_report (fsdp/report/report_plot.cc); run: gnuplot <this>\n",
      "set terminal pngcairo size 1400,1000 enhanced font 'sans,10'\n", "set output ",
      base::GnuplotQuoted(png_path), "\n");
  std::string blocks, plots;
  bool any_measured = false;
  for (const auto& [ranks, by_strategy] : panels) {
    for (const auto& [strategy, curves] : by_strategy) any_measured |= !curves.measured.empty();
  }
  for (const auto& [ranks, by_strategy] : panels) {
    std::vector<std::string> items;
    for (const auto& [strategy, curves] : by_strategy) {
      const std::string name = plan::ShardingStrategyName(strategy);
      const std::string id = absl::StrCat("r", ranks, "_", name);
      const char* colour = StrategyColour(strategy);
      blocks += Datablock(id + "_predicted", curves.predicted);
      items.push_back(absl::StrCat("$", id, "_predicted using 1:2 with lines dt 2 lw 2 lc rgb '",
                                   colour, "' title '", GpText(name), " predicted'"));
      if (!curves.measured.empty()) {
        blocks += Datablock(id + "_measured", curves.measured);
        items.push_back(absl::StrCat("$", id,
                                     "_measured using 1:2 with linespoints dt 1 lw 2 pt 7 ps 1.2 "
                                     "lc rgb '",
                                     colour, "' title '", GpText(name), " measured'"));
      }
      if (!curves.crossing.empty()) {
        blocks += Datablock(id + "_crossing", curves.crossing);
        items.push_back(absl::StrCat("$", id, "_crossing using 1:2 with points pt 9 ps 2.5 lc rgb '",
                                     colour, "' notitle"));
      }
    }
    if (data.budget_bytes > 0) {
      items.push_back(absl::StrFormat(
          "%.6g with lines dt 4 lw 2 lc rgb 'black' title 'budget %s per rank (triangles: "
          "largest model that fits)'",
          static_cast<double>(data.budget_bytes), FormatBytes(data.budget_bytes)));
    }
    absl::StrAppend(&plots, "set title '", ranks, ranks == 1 ? " rank" : " ranks", "'\nplot ");
    for (size_t i = 0; i < items.size(); ++i) {
      absl::StrAppend(&plots, i == 0 ? "" : ", \\\n     ", items[i]);
    }
    absl::StrAppend(&plots, "\n");
  }
  // Two lines: what is drawn, then the sweep.
  const std::string title =
      absl::StrCat(GpText(absl::StrCat("Peak memory per rank against model size, ",
                                        PrecisionName(precision),
                                        any_measured
                                            ? " Adam: predicted dashed, measured solid"
                                            : " Adam: predicted only (nothing measured)")),
                   "\n", GpText(data.title));
  const int num_panels = std::max<int>(1, static_cast<int>(panels.size()));
  const int columns = num_panels == 1 ? 1 : 2;
  const int layout_rows = (num_panels + columns - 1) / columns;
  absl::StrAppend(&script, blocks,
                  "set logscale xy\n"
                  "set format x '10^{%L}'\n"
                  "set format y '%.0s %cB'\n"
                  "set xlabel 'parameters'\n"
                  "set ylabel 'peak bytes per rank'\n"
                  "set grid xtics ytics mxtics mytics lc rgb '#dddddd'\n"
                  "set key bottom right font ',8'\n",
                  "set multiplot layout ", layout_rows, ",", columns,
                  " title \"", DoubleQuoted(title), "\" font ',12'\n");
  if (panels.empty()) {
    absl::StrAppend(&script, "set title 'no points'\nplot [1:10] 1 notitle\n");
  }
  absl::StrAppend(&script, plots, "unset multiplot\n");
  return script;
}

std::string SeqLenGnuplotScript(const ReportData& data, const std::string& png_path) {
  // Curves per mode, in the order the modes first appear.
  struct Curves {
    ActivationMode mode;
    std::vector<std::pair<double, double>> total_predicted, total_measured;
    std::vector<std::pair<double, double>> activations_predicted, activations_measured;
    std::vector<std::pair<double, double>> longest;
  };
  std::vector<Curves> curves;
  auto curves_of = [&curves](const ActivationMode& mode) -> Curves& {
    for (Curves& c : curves) {
      if (c.mode == mode) return c;
    }
    curves.push_back(Curves{mode});
    return curves.back();
  };
  for (const ReportRow& row : data.rows) {
    Curves& c = curves_of(ActivationModeOf(row.point.config));
    const double t = row.point.config.seq_len;
    const RankMemoryEstimate& e = row.predicted;
    c.total_predicted.push_back({t, static_cast<double>(e.total_bytes())});
    c.activations_predicted.push_back(
        {t, static_cast<double>(e.activation_bytes + e.workspace_bytes)});
    if (row.measured.has_value()) {
      const RankMeasurement& m = *row.measured;
      c.total_measured.push_back({t, static_cast<double>(m.peak_total_bytes)});
      c.activations_measured.push_back(
          {t, static_cast<double>(m.peak(MemoryCategory::kActivations) +
                                  m.peak(MemoryCategory::kWorkspace))});
    }
  }
  if (data.budget_bytes > 0 && !data.rows.empty()) {
    const MemoryPoint& swept = data.rows.front().point;
    for (const SeqLenFitRow& fit : data.seq_len_fits) {
      if (fit.strategy != swept.strategy || fit.precision != swept.precision ||
          fit.ranks != swept.ranks || !fit.longest.has_value()) {
        continue;
      }
      for (Curves& c : curves) {
        if (c.mode == fit.mode) {
          c.longest.push_back({static_cast<double>(fit.longest->seq_len),
                               static_cast<double>(fit.longest->estimate.total_bytes())});
        }
      }
    }
  }
  bool any_measured = false;
  for (const Curves& c : curves) any_measured |= !c.total_measured.empty();

  std::string blocks, total_items, activation_items;
  auto add = [&](std::string& items, const std::string& id,
                 const std::vector<std::pair<double, double>>& points, const std::string& style,
                 const std::string& title) {
    if (points.empty()) return;
    blocks += Datablock(id, points);
    absl::StrAppend(&items, items.empty() ? "" : ", \\\n     ", "$", id, " using 1:2 ", style,
                    title.empty() ? " notitle" : absl::StrCat(" title '", GpText(title), "'"));
  };
  for (const Curves& c : curves) {
    const std::string id = ModeId(c.mode);
    const std::string name = ActivationModeName(c.mode);
    const std::string colour = ModeColour(c.mode);
    const std::string dashed = absl::StrCat("with lines dt 2 lw 2 lc rgb '", colour, "'");
    const std::string solid =
        absl::StrCat("with linespoints dt 1 lw 2 pt 7 ps 1.2 lc rgb '", colour, "'");
    add(total_items, id + "_total_predicted", c.total_predicted, dashed, name + " predicted");
    add(total_items, id + "_total_measured", c.total_measured, solid, name + " measured");
    add(total_items, id + "_longest", c.longest,
        absl::StrCat("with points pt 9 ps 2.5 lc rgb '", colour, "'"), "");
    add(activation_items, id + "_activations_predicted", c.activations_predicted, dashed,
        name + " predicted");
    add(activation_items, id + "_activations_measured", c.activations_measured, solid,
        name + " measured");
  }
  if (data.budget_bytes > 0) {
    absl::StrAppend(&total_items, total_items.empty() ? "" : ", \\\n     ",
                    absl::StrFormat("%.6g with lines dt 4 lw 2 lc rgb 'black' title 'budget %s "
                                    "per rank (triangles: longest sequence that fits)'",
                                    static_cast<double>(data.budget_bytes),
                                    GpText(FormatBytes(data.budget_bytes))));
  }
  const std::string title = absl::StrCat(
      GpText(absl::StrCat("Peak memory per rank against sequence length, per activation mode: ",
                          any_measured ? "predicted dashed, measured solid"
                                       : "predicted only (nothing measured)")),
      "\n", GpText(data.title));
  std::string script = absl::StrCat(
      "# Generated by //examples:memory_report (fsdp/report/report_plot.cc); run: gnuplot <this>\n",
      "set terminal pngcairo size 1400,600 enhanced font 'sans,10'\n", "set output ",
      base::GnuplotQuoted(png_path), "\n", blocks,
      "set logscale xy 2\n"
      "set logscale y 10\n"
      "set format y '%.0s %cB'\n"
      "set xlabel 'seq\\_len (tokens per sequence)'\n"
      "set grid xtics ytics mytics lc rgb '#dddddd'\n"
      "set multiplot layout 1,2 title \"",
      DoubleQuoted(title), "\" font ',12'\n");
  if (curves.empty()) {
    absl::StrAppend(&script, "set title 'no points'\nplot [1:10] 1 notitle\nunset multiplot\n");
    return script;
  }
  // The curves rise to the right: the key goes where they are not.
  absl::StrAppend(&script, "set title 'peak of the total per rank'\nset ylabel 'bytes per rank'\n",
                  "set key bottom right font ',8'\nplot ", total_items, "\n",
                  "set title 'activations + workspace per rank'\n",
                  "set key top left font ',8'\nplot ", activation_items, "\nunset multiplot\n");
  return script;
}

}  // namespace report
}  // namespace fsdp
