// ManualClockEnv: an Env whose clock only moves when told to; files go to a base Env. For
// tests of timeouts (the failure detector) that must not depend on the machine's speed.
// Thread-safe.
#ifndef GRANARY_TESTING_MANUAL_CLOCK_ENV_H_
#define GRANARY_TESTING_MANUAL_CLOCK_ENV_H_

#include <atomic>

#include "common/env_wrapper.h"

namespace granary {

class ManualClockEnv : public EnvWrapper {
 public:
  explicit ManualClockEnv(Env* base, uint64_t start_micros = 1'000'000)
      : EnvWrapper(base), now_(start_micros) {}

  void AdvanceMicros(uint64_t micros) { now_ += micros; }

  uint64_t NowMicros() override { return now_; }
  // Advances the clock instead of sleeping.
  void SleepForMicros(uint64_t micros) override { AdvanceMicros(micros); }

 private:
  std::atomic<uint64_t> now_;
};

}  // namespace granary

#endif  // GRANARY_TESTING_MANUAL_CLOCK_ENV_H_
