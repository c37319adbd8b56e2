// File: base/gnuplot.h
//
// Draws a PNG with gnuplot, published like any other file (atomic_file.h):
// the script is written beside the PNG for a person to rerun, a copy of it
// that names a temporary output is run (killed after a deadline), and the
// finished PNG is renamed into place. So the PNG is whole or untouched.
//
//   base::GnuplotPlot plot;
//   plot.png_path = "run/curves.png";
//   plot.script_path = "run/curves.png.gp";
//   FSDP_RETURN_IF_ERROR(base::DrawWithGnuplot(
//       plot, [&](const std::string& output) { return MyScript(data, output); }));
#ifndef BASE_GNUPLOT_H_
#define BASE_GNUPLOT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace base {

struct GnuplotPlot {
  std::string png_path;     // where the PNG goes
  std::string script_path;  // the script kept for people (written atomically)
  // The output the kept script names; png_path when empty. (A report kept in
  // one directory names its PNG relative to it, to be rerun from there.)
  std::string script_output;
  absl::Duration timeout = absl::Minutes(5);
};

// [Note: text in a gnuplot script] A label or path goes into a script as a
// single-quoted string, where '' stands for a quote and nothing else is
// special, so a quote cannot end it early; but a newline would end the line,
// and what follows would run as a command of its own (`system(...)`
// included). So every text a script carries is checked first: one with a
// control character is refused, naming what it was.

// InvalidArgument "<what> '<text>' holds a control character (byte 0x0a);
// a gnuplot script cannot carry it: choose one without" for a byte below
// 0x20 or 0x7f; OK otherwise.
absl::Status CheckGnuplotText(absl::string_view text, absl::string_view what);

// `text` as a gnuplot single-quoted string ('' for each quote). Check it
// with CheckGnuplotText first.
std::string GnuplotQuoted(absl::string_view text);

// `script_for(output)` is the gnuplot script that draws into `output`.
// The PNG's path and the output the kept script names are checked with
// CheckGnuplotText before anything is written.
// Errors: FailedPrecondition when gnuplot is not installed (tools/setup.sh
// installs gnuplot-nox); DeadlineExceeded naming the PNG and the script when
// it runs past the timeout; Internal when it fails (its own message is on
// stderr); a write or rename error naming the path.
absl::Status DrawWithGnuplot(const GnuplotPlot& plot,
                             const std::function<std::string(const std::string& output)>& script_for);

}  // namespace base

#endif  // BASE_GNUPLOT_H_
