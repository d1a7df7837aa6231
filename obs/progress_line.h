// ProgressLine: how a long `granary` command (datagen, local, run, chaos --soak) shows its
// progress. On a terminal, one line that rewrites itself in place ("\r" + erase to the end),
// redrawn at most every 100 ms; otherwise (a log file, a pipe, CI) plain lines, at most one per
// `plain_every` and the first only after one `plain_every`, so logs stay readable. Clear() (and the
// destructor) erase a terminal's progress line, so the command's own output that follows starts on
// a clean line. Thread-compatible.
#ifndef GRANARY_OBS_PROGRESS_LINE_H_
#define GRANARY_OBS_PROGRESS_LINE_H_

#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace granary {

class ProgressLine {
 public:
  // `tty`: whether `out` is a terminal (ProgressLine::IsTerminal(out) for the real answer).
  ProgressLine(std::FILE* out, bool tty, absl::Duration plain_every = absl::Seconds(10));
  // Progress on stderr, rewriting itself when stderr is a terminal.
  ProgressLine();
  ~ProgressLine();

  // Shows `text` now if the last redraw (or plain line) is old enough; `now` for tests.
  void Update(absl::string_view text, absl::Time now = absl::Now());
  // Erases the progress line from a terminal (nothing to do for plain lines).
  void Clear();

  static bool IsTerminal(std::FILE* out);

 private:
  std::FILE* const out_;
  const bool tty_;
  const absl::Duration every_;
  absl::Time last_;
  bool drawn_ = false;  // a progress line is on the terminal, not ended by a newline
};

}  // namespace granary

#endif  // GRANARY_OBS_PROGRESS_LINE_H_
