// File: base/gnuplot.cc
#include "base/gnuplot.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "base/subprocess.h"

namespace base {
namespace {

constexpr char kNotInstalled[] =
    "gnuplot is not installed; run tools/setup.sh (it installs gnuplot-nox)";

// Runs `gnuplot script_path` to completion or until the plot's timeout.
absl::Status RunGnuplot(const std::string& script_path, const GnuplotPlot& plot) {
  ProcessOptions options;
  options.timeout = plot.timeout;
  absl::StatusOr<int> code = RunProcess({"gnuplot", script_path}, options);
  if (absl::IsNotFound(code.status())) return absl::FailedPreconditionError(kNotInstalled);
  if (absl::IsDeadlineExceeded(code.status())) {
    return absl::DeadlineExceededError(absl::StrCat(
        "gnuplot did not finish ", plot.png_path, " within ", absl::FormatDuration(plot.timeout),
        "; the script is ", plot.script_path));
  }
  if (!code.ok()) return code.status();
  if (*code == 127) return absl::FailedPreconditionError(kNotInstalled);
  if (*code != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed on ", plot.script_path, " (status ",
                                            *code, "); see its message above"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckGnuplotText(absl::string_view text, absl::string_view what) {
  for (char c : text) {
    const unsigned char byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      std::string shown;
      for (char d : text) {
        const unsigned char b = static_cast<unsigned char>(d);
        shown += (b < 0x20 || b == 0x7f) ? absl::StrFormat("\\x%02x", b) : std::string(1, d);
      }
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s '%s' holds a control character (byte 0x%02x); a gnuplot script cannot carry it: "
          "choose one without",
          what, shown, byte));
    }
  }
  return absl::OkStatus();
}

std::string GnuplotQuoted(absl::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "''"}}), "'");
}

absl::Status DrawWithGnuplot(const GnuplotPlot& plot,
                             const std::function<std::string(const std::string& output)>& script_for) {
  FSDP_RETURN_IF_ERROR(CheckGnuplotText(plot.png_path, "the plot's path"));
  FSDP_RETURN_IF_ERROR(CheckGnuplotText(plot.script_output, "the plot's output name"));
  FSDP_RETURN_IF_ERROR(WriteFileAtomically(
      plot.script_path, script_for(plot.script_output.empty() ? plot.png_path : plot.script_output)));
  // gnuplot opens the temporary file by name and truncates it: the same
  // inode, so Publish's fsync through our descriptor covers what it wrote.
  FSDP_ASSIGN_OR_RETURN(PendingFile png, PendingFile::Create(plot.png_path, "plot"));
  FSDP_ASSIGN_OR_RETURN(PendingFile run_script,
                        PendingFile::Create(plot.script_path, "gnuplot script"));
  FSDP_RETURN_IF_ERROR(run_script.Write(script_for(png.temp_path())));
  // Run it under its temporary name; never published, removed on return.
  FSDP_RETURN_IF_ERROR(RunGnuplot(run_script.temp_path(), plot));
  return png.Publish();
}

}  // namespace base
