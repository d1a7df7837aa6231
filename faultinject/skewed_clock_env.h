// SkewedClockEnv: an Env whose clock (NowMicros, SleepForMicros) runs fast, slow or jumps forward
// as a control file says — the chaos harness's clock_skew scenario (issue 33, fault class 4),
// for every timer that goes through the Env: worker liveness, job retention, checkpoint
// intervals, register and RPC back-offs, the client's stall timeout. Files go to the base Env.
//
// The control file holds "RATE" or "RATE JUMP_SECONDS": from the moment the file is seen, the
// clock advances RATE seconds per second of the base clock (RATE > 0, e.g. "2" or "0.5"), and it
// has jumped forward JUMP_SECONDS in all (a total: raising it from 60 to 90 jumps 30 s more;
// lowering it never moves the clock back). The clock never goes backward and never skips at a
// rate change. The file is re-read at most every 100 ms of the base clock; while it is absent the
// clock keeps its last rate (1 at first); a malformed one is ignored with a warning naming it.
// Each change is logged (a warning). SleepForMicros(m) sleeps m / RATE of the base clock.
// Thread-safe.
#ifndef GRANARY_FAULTINJECT_SKEWED_CLOCK_ENV_H_
#define GRANARY_FAULTINJECT_SKEWED_CLOCK_ENV_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/env_wrapper.h"

namespace granary {

// Names the control file of the process's SkewedClockEnv (DefaultEnvOrSkewedClock).
inline constexpr char kSkewedClockEnvironmentVariable[] = "GRANARY_CHAOS_CLOCK";

// One reading of a control file.
struct ClockSkew {
  double rate = 1;
  double jump_seconds = 0;
};

// Parses "RATE" or "RATE JUMP_SECONDS"; InvalidArgument naming `text` and what is wrong
// (not numbers, RATE <= 0, JUMP_SECONDS < 0, more than two fields).
absl::StatusOr<ClockSkew> ParseClockSkew(const std::string& text);

class SkewedClockEnv : public EnvWrapper {
 public:
  // `base` must outlive this Env.
  SkewedClockEnv(Env* base, std::string control_path);

  uint64_t NowMicros() override;
  void SleepForMicros(uint64_t micros) override;

 private:
  // Re-reads the control file if it is due; REQUIRES mu_.
  void MaybeReread(uint64_t base_now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The skewed clock at base time `base_now`; REQUIRES mu_.
  uint64_t SkewedAt(uint64_t base_now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string control_path_;
  absl::Mutex mu_;
  // The clock is anchor_skewed_ + skew_.rate × (base − anchor_base_).
  uint64_t anchor_base_ ABSL_GUARDED_BY(mu_);
  uint64_t anchor_skewed_ ABSL_GUARDED_BY(mu_);
  ClockSkew skew_ ABSL_GUARDED_BY(mu_);
  uint64_t last_read_base_ ABSL_GUARDED_BY(mu_) = 0;
  bool read_once_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_warning_ ABSL_GUARDED_BY(mu_);
};

// Env::Default(), or — when GRANARY_CHAOS_CLOCK is set — one process-wide SkewedClockEnv over it
// reading that file.
Env* DefaultEnvOrSkewedClock();

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_SKEWED_CLOCK_ENV_H_
