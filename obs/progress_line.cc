#include "obs/progress_line.h"

#include <unistd.h>

namespace granary {

ProgressLine::ProgressLine(std::FILE* out, bool tty, absl::Duration plain_every)
    : out_(out),
      tty_(tty),
      every_(tty ? absl::Milliseconds(100) : plain_every),
      // Plain lines start after a first period: a short command prints none.
      last_(tty ? absl::InfinitePast() : absl::Now()) {}

ProgressLine::ProgressLine() : ProgressLine(stderr, IsTerminal(stderr)) {}

ProgressLine::~ProgressLine() { Clear(); }

bool ProgressLine::IsTerminal(std::FILE* out) { return isatty(fileno(out)) == 1; }

void ProgressLine::Update(absl::string_view text, absl::Time now) {
  if (now - last_ < every_) return;
  last_ = now;
  if (tty_) {
    // Back to the line's start, the text, then erase what a longer earlier text left.
    std::fprintf(out_, "\r%.*s\x1b[K", static_cast<int>(text.size()), text.data());
    drawn_ = true;
  } else {
    std::fprintf(out_, "%.*s\n", static_cast<int>(text.size()), text.data());
  }
  std::fflush(out_);
}

void ProgressLine::Clear() {
  if (!drawn_) return;
  std::fputs("\r\x1b[K", out_);
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace granary
