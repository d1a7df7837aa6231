// Failpoints: named places in Granary's code where a fault can be injected at run time
// (DESIGN.md §6). The catalogue of places is common/failpoints.h.
//
// A process arms them from its environment at start (granary's main calls
// ConfigureFailpointsFromEnvironment):
//   GRANARY_FAILPOINTS=name=action[,name=action…]
// with one action per failpoint:
//   crash          print "granary failpoint NAME fired: crash (hit N)" to stderr and _exit at
//                  once with kFailpointCrashExitCode — no destructors, no flushing, like a
//                  SIGKILL at exactly that line
//   error          the site fails with an Internal error naming the failpoint
//   delay(MS)      the site sleeps MS milliseconds, then goes on
// and an optional prefix after(N): (e.g. `after(3):crash`) making the action fire exactly once,
// on the N-th hit. Without it the action fires on every hit. Every firing is logged to stderr
// as "granary failpoint NAME fired: …", so a harness can count them in the process's log.
//
// Cost when no failpoint is armed: one relaxed atomic load per hit. Thread-safe.
#ifndef GRANARY_COMMON_FAILPOINT_H_
#define GRANARY_COMMON_FAILPOINT_H_

#include <atomic>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace granary {

// A place where faults can be injected: its name (used in GRANARY_FAILPOINTS) and what has
// just happened when it is hit.
struct Failpoint {
  const char* name;
  const char* where;
};

// The exit code of a process that crashed at a failpoint.
inline constexpr int kFailpointCrashExitCode = 86;
// The environment variable ConfigureFailpointsFromEnvironment reads.
inline constexpr char kFailpointsEnvironmentVariable[] = "GRANARY_FAILPOINTS";

namespace failpoint_internal {
extern std::atomic<bool> armed;
absl::Status HitArmed(const Failpoint& point);
}  // namespace failpoint_internal

// Passes the failpoint: OK, unless an `error` action fires (then the error to return). A `crash`
// action does not return; `delay` returns OK after sleeping.
inline absl::Status HitFailpoint(const Failpoint& point) {
  if (ABSL_PREDICT_TRUE(!failpoint_internal::armed.load(std::memory_order_relaxed))) {
    return absl::OkStatus();
  }
  return failpoint_internal::HitArmed(point);
}

// Replaces the armed set with `spec` (the GRANARY_FAILPOINTS syntax; empty disarms all) and
// resets hit counts. InvalidArgument naming the entry for an unknown failpoint or a bad action;
// the armed set is then left as it was.
absl::Status ConfigureFailpoints(absl::string_view spec);
// Whether ConfigureFailpoints(spec) would succeed, without arming anything.
absl::Status CheckFailpointSpec(absl::string_view spec);
// ConfigureFailpoints($GRANARY_FAILPOINTS) if the variable is set; errors name the variable.
absl::Status ConfigureFailpointsFromEnvironment();

}  // namespace granary

#endif  // GRANARY_COMMON_FAILPOINT_H_
