#include "common/failpoint.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/failpoints.h"

namespace granary {
namespace failpoint_internal {
std::atomic<bool> armed{false};
}  // namespace failpoint_internal

namespace {

struct Arming {
  enum class Action { kCrash, kError, kDelay } action = Action::kCrash;
  int64_t delay_ms = 0;
  int64_t fire_on_hit = 0;  // 0: every hit.
  int64_t hits = 0;
};

absl::Mutex mu;
std::map<std::string, Arming>& Armed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  static auto* armed = new std::map<std::string, Arming>();
  return *armed;
}

// The N of "prefix(N)" in `text`, which must be exactly that.
bool ParseCall(absl::string_view text, absl::string_view prefix, int64_t* n) {
  if (!absl::ConsumePrefix(&text, prefix) || !absl::ConsumePrefix(&text, "(") ||
      !absl::ConsumeSuffix(&text, ")")) {
    return false;
  }
  return absl::SimpleAtoi(text, n) && *n >= 0;
}

absl::Status ParseArming(absl::string_view entry, std::string* name, Arming* arming) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("failpoint entry '", entry, "': ", why));
  };
  const size_t eq = entry.find('=');
  if (eq == absl::string_view::npos) return bad("expected name=action");
  *name = std::string(entry.substr(0, eq));
  bool known = false;
  std::vector<std::string> names;
  for (const Failpoint* point : kAllFailpoints) {
    known = known || *name == point->name;
    names.push_back(point->name);
  }
  if (!known) {
    return bad(absl::StrCat("unknown failpoint '", *name, "' (known: ", absl::StrJoin(names, ", "),
                            ")"));
  }
  absl::string_view action = entry.substr(eq + 1);
  if (absl::StartsWith(action, "after(")) {
    const size_t colon = action.find("):");
    if (colon == absl::string_view::npos ||
        !ParseCall(action.substr(0, colon + 1), "after", &arming->fire_on_hit) ||
        arming->fire_on_hit < 1) {
      return bad("expected after(N):action with N >= 1");
    }
    action.remove_prefix(colon + 2);
  }
  if (action == "crash") {
    arming->action = Arming::Action::kCrash;
  } else if (action == "error") {
    arming->action = Arming::Action::kError;
  } else if (ParseCall(action, "delay", &arming->delay_ms)) {
    arming->action = Arming::Action::kDelay;
  } else {
    return bad(absl::StrCat("unknown action '", action, "' (crash, error or delay(MS))"));
  }
  return absl::OkStatus();
}

// Async-signal-safe enough for a process about to _exit: one write(2), no allocation.
void WriteToStderr(const std::string& line) {
  const ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace

namespace failpoint_internal {

absl::Status HitArmed(const Failpoint& point) {
  Arming fired;
  int64_t hit;
  {
    absl::MutexLock lock(&mu);
    auto it = Armed().find(point.name);
    if (it == Armed().end()) return absl::OkStatus();
    hit = ++it->second.hits;
    if (it->second.fire_on_hit != 0 && hit != it->second.fire_on_hit) return absl::OkStatus();
    fired = it->second;
  }
  switch (fired.action) {
    case Arming::Action::kCrash:
      WriteToStderr(absl::StrCat("granary failpoint ", point.name, " fired: crash (hit ", hit,
                                 ")\n"));
      ::_exit(kFailpointCrashExitCode);
    case Arming::Action::kError:
      WriteToStderr(absl::StrCat("granary failpoint ", point.name, " fired: error (hit ", hit,
                                 ")\n"));
      return absl::InternalError(absl::StrCat("failpoint ", point.name, " (", point.where, ")"));
    case Arming::Action::kDelay:
      WriteToStderr(absl::StrCat("granary failpoint ", point.name, " fired: delay ",
                                 fired.delay_ms, " ms (hit ", hit, ")\n"));
      absl::SleepFor(absl::Milliseconds(fired.delay_ms));
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace failpoint_internal

namespace {

absl::Status ParseSpec(absl::string_view spec, std::map<std::string, Arming>* parsed) {
  for (absl::string_view entry : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::string name;
    Arming arming;
    if (absl::Status status = ParseArming(entry, &name, &arming); !status.ok()) return status;
    (*parsed)[name] = arming;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFailpointSpec(absl::string_view spec) {
  std::map<std::string, Arming> parsed;
  return ParseSpec(spec, &parsed);
}

absl::Status ConfigureFailpoints(absl::string_view spec) {
  std::map<std::string, Arming> parsed;
  if (absl::Status status = ParseSpec(spec, &parsed); !status.ok()) return status;
  absl::MutexLock lock(&mu);
  Armed() = std::move(parsed);
  failpoint_internal::armed.store(!Armed().empty(), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status ConfigureFailpointsFromEnvironment() {
  const char* spec = std::getenv(kFailpointsEnvironmentVariable);
  if (spec == nullptr) return absl::OkStatus();
  const absl::Status status = ConfigureFailpoints(spec);
  if (status.ok()) return status;
  return absl::InvalidArgumentError(
      absl::StrCat(kFailpointsEnvironmentVariable, ": ", status.message()));
}

}  // namespace granary
