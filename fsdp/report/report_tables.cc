// File: fsdp/report/report_tables.cc
#include "fsdp/report/report_tables.h"

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "fsdp/plan/sharding_strategy.h"
#include "fsdp/report/byte_size.h"

namespace fsdp {
namespace report {
namespace {

constexpr MemoryCategory kCategories[] = {
    MemoryCategory::kParameters,  MemoryCategory::kGradients,   MemoryCategory::kOptimizerState,
    MemoryCategory::kActivations, MemoryCategory::kCommBuffers, MemoryCategory::kWorkspace};

// RFC 4180: quote a field holding a comma, quote or newline.
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}), "\"");
}

// "1.23e+07" style parameter counts for tables.
std::string Params(int64_t n) { return absl::StrFormat("%.3g", static_cast<double>(n)); }

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// A Markdown table of one text per (strategy, precision, activation mode)
// row and rank-count column, rows in the order first added.
class FitTable {
 public:
  void Add(proto::ShardingStrategy strategy, Precision precision, const ActivationMode& mode,
           int ranks, std::string text) {
    std::string name = plan::ShardingStrategyName(strategy);
    if (strategy == proto::HYBRID_SHARD) name += " (G=ranks/2)";
    const Key key{name, PrecisionName(precision), ActivationModeName(mode)};
    if (cells_.find(key) == cells_.end()) order_.push_back(key);
    cells_[key][ranks] = std::move(text);
    ranks_.insert(ranks);
  }

  std::string Markdown() const {
    std::string md = "| strategy | precision | activations |";
    for (int r : ranks_) absl::StrAppend(&md, " ", r, r == 1 ? " rank |" : " ranks |");
    absl::StrAppend(&md, "\n|---|---|---|");
    for (size_t i = 0; i < ranks_.size(); ++i) absl::StrAppend(&md, "---:|");
    absl::StrAppend(&md, "\n");
    for (const Key& key : order_) {
      absl::StrAppend(&md, "| ", std::get<0>(key), " | ", std::get<1>(key), " | ",
                      std::get<2>(key), " |");
      const std::map<int, std::string>& row = cells_.at(key);
      for (int r : ranks_) {
        auto it = row.find(r);
        absl::StrAppend(&md, " ", it == row.end() ? "-" : it->second, " |");
      }
      absl::StrAppend(&md, "\n");
    }
    return md;
  }

 private:
  using Key = std::tuple<std::string, std::string, std::string>;
  std::set<int> ranks_;
  std::map<Key, std::map<int, std::string>> cells_;
  std::vector<Key> order_;
};

}  // namespace

std::string ReportCsvHeader() {
  std::vector<std::string> columns = {
      "strategy",         "precision",          "ranks",
      "group_size",       "layers",             "d_model",
      "heads",            "vocab",              "seq_len",
      "micro_batch",      "activation_checkpointing", "attention",
      "params",           "predicted_bytes",
      "measured_bytes",   "measured_rss_bytes", "measured_rss_baseline_bytes",
      "predicted_model_state_bytes"};
  for (MemoryCategory c : kCategories) {
    columns.push_back(absl::StrCat("predicted_", MemoryCategoryName(c), "_bytes"));
    columns.push_back(absl::StrCat("measured_", MemoryCategoryName(c), "_bytes"));
  }
  columns.push_back("predicted_master_parameters_bytes");
  columns.push_back("predicted_gathered_bytes");
  columns.push_back("status");
  return absl::StrJoin(columns, ",");
}

std::string ReportCsv(const ReportData& data) {
  std::string csv = ReportCsvHeader() + "\n";
  for (const ReportRow& row : data.rows) {
    const MemoryPoint& p = row.point;
    const RankMemoryEstimate& e = row.predicted;
    const bool measured = row.measured.has_value();
    auto measured_field = [&](int64_t value) {
      return measured ? absl::StrCat(value) : std::string();
    };
    std::vector<std::string> fields = {
        plan::ShardingStrategyName(p.strategy),
        PrecisionName(p.precision),
        absl::StrCat(p.ranks),
        absl::StrCat(p.group_size),
        absl::StrCat(p.config.layers),
        absl::StrCat(p.config.d_model),
        absl::StrCat(p.config.heads),
        absl::StrCat(p.config.vocab),
        absl::StrCat(p.config.seq_len),
        absl::StrCat(p.micro_batch),
        ActivationCheckpointingName(p.config.activation_checkpoint_every),
        p.config.flash_attention ? "flash" : "standard",
        absl::StrCat(e.num_params),
        absl::StrCat(e.total_bytes()),
        measured_field(measured ? row.measured->peak_total_bytes : 0),
        measured_field(measured ? row.measured->peak_rss_bytes : 0),
        measured_field(measured ? row.measured->baseline_rss_bytes : 0),
        absl::StrCat(e.model_state_bytes())};
    for (MemoryCategory c : kCategories) {
      fields.push_back(absl::StrCat(e.tracker_bytes(c)));
      fields.push_back(measured_field(measured ? row.measured->peak(c) : 0));
    }
    fields.push_back(absl::StrCat(e.master_parameter_bytes));
    fields.push_back(absl::StrCat(e.gathered_bytes));
    fields.push_back(CsvField(row.status));
    absl::StrAppend(&csv, absl::StrJoin(fields, ","), "\n");
  }
  return csv;
}

std::string ReportMarkdown(const ReportData& data) {
  std::string md = absl::StrCat("# Memory per rank: predicted and measured\n\n", data.title,
                                "\n\nBytes per rank at peak, in MiB. *predicted* is the "
                                "predicted peak of the total (docs/memory.md); *measured* is the "
                                "MemoryTracker's peak of the tracked total; *RSS* is the rank "
                                "process's peak resident set (VmHWM), which also holds the "
                                "binary, UCX, OpenBLAS and the allocator's slack; *RSS - base* "
                                "subtracts the resident set before the model was built.\n\n");
  absl::StrAppend(&md,
                  "| strategy | precision | ranks | params | seq_len | activations | "
                  "predicted MiB | measured MiB | measured / predicted | RSS MiB | "
                  "RSS - base MiB | status |\n",
                  "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n");
  for (const ReportRow& row : data.rows) {
    const MemoryPoint& p = row.point;
    std::string strategy = plan::ShardingStrategyName(p.strategy);
    if (p.strategy == proto::HYBRID_SHARD) absl::StrAppend(&strategy, " (G=", p.group_size, ")");
    std::string measured = "-", ratio = "-", rss = "-", rss_delta = "-";
    if (row.measured.has_value()) {
      const RankMeasurement& m = *row.measured;
      measured = Mib(m.peak_total_bytes);
      ratio = absl::StrFormat("%.4f", static_cast<double>(m.peak_total_bytes) /
                                          static_cast<double>(row.predicted.total_bytes()));
      rss = Mib(m.peak_rss_bytes);
      rss_delta = Mib(m.peak_rss_bytes - m.baseline_rss_bytes);
    }
    absl::StrAppend(&md, "| ", strategy, " | ", PrecisionName(p.precision), " | ", p.ranks,
                    " | ", Params(row.predicted.num_params), " | ", p.config.seq_len, " | ",
                    ActivationModeName(ActivationModeOf(p.config)), " | ",
                    Mib(row.predicted.total_bytes()), " | ", measured, " | ", ratio, " | ", rss,
                    " | ", rss_delta, " | ", absl::StrReplaceAll(row.status, {{"|", "/"}}),
                    " |\n");
  }
  if (data.budget_bytes > 0 && !data.fits.empty()) {
    // Columns: the rank counts present; rows: strategy x precision.
    FitTable table;
    for (const FitRow& fit : data.fits) {
      table.Add(fit.strategy, fit.precision, fit.mode, fit.ranks,
                fit.largest.has_value()
                    ? absl::StrCat(Params(fit.largest->estimate.num_params), " (d_model ",
                                   fit.largest->config.d_model, ", ", fit.largest->config.layers,
                                   " layers)")
                    : std::string("none"));
    }
    absl::StrAppend(&md, "\n## Largest model within ", FormatBytes(data.budget_bytes), " (",
                    FormatGigabytes(data.budget_bytes),
                    ") per rank\n\nParameters of the largest model of the sweep's GPT family "
                    "(layers = d_model / 32, any d_model multiple of 32) whose predicted peak "
                    "fits the budget, per activation mode.\n\n",
                    table.Markdown());
  }
  if (data.budget_bytes > 0 && !data.seq_len_fits.empty()) {
    FitTable table;
    for (const SeqLenFitRow& fit : data.seq_len_fits) {
      table.Add(fit.strategy, fit.precision, fit.mode, fit.ranks,
                !fit.longest.has_value()
                    ? std::string("none")
                    : absl::StrCat(fit.longest->at_search_limit ? ">= " : "",
                                   fit.longest->seq_len));
    }
    const GptConfig& m = data.seq_len_model;
    absl::StrAppend(&md, "\n## Longest sequence within ", FormatBytes(data.budget_bytes),
                    " per rank\n\nThe longest seq_len (tokens per sequence, micro_batch ",
                    data.seq_len_micro_batch, ") whose predicted peak fits the budget, for the "
                    "GPT layers=", m.layers, " d_model=", m.d_model, " heads=", m.heads,
                    " vocab=", m.vocab, " (its position embedding grows with seq_len).\n\n",
                    table.Markdown());
  }
  return md;
}

}  // namespace report
}  // namespace fsdp
