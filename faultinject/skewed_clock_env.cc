#include "faultinject/skewed_clock_env.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"

namespace granary {
namespace {

constexpr uint64_t kRereadMicros = 100'000;

}  // namespace

absl::StatusOr<ClockSkew> ParseClockSkew(const std::string& text) {
  const std::vector<std::string> fields =
      absl::StrSplit(text, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  const auto bad = [&text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "clock skew '", text, "': ", why, " (expected \"RATE\" or \"RATE JUMP_SECONDS\")"));
  };
  if (fields.empty() || fields.size() > 2) return bad("not one or two fields");
  ClockSkew skew;
  if (!absl::SimpleAtod(fields[0], &skew.rate) || !std::isfinite(skew.rate)) {
    return bad("RATE is not a number");
  }
  if (skew.rate <= 0) return bad("RATE must be > 0");
  if (fields.size() == 2) {
    if (!absl::SimpleAtod(fields[1], &skew.jump_seconds) || !std::isfinite(skew.jump_seconds)) {
      return bad("JUMP_SECONDS is not a number");
    }
    if (skew.jump_seconds < 0) return bad("JUMP_SECONDS must be >= 0");
  }
  return skew;
}

SkewedClockEnv::SkewedClockEnv(Env* base, std::string control_path)
    : EnvWrapper(base), control_path_(std::move(control_path)) {
  const uint64_t now = base->NowMicros();
  absl::MutexLock lock(&mu_);
  anchor_base_ = now;
  anchor_skewed_ = now;
}

uint64_t SkewedClockEnv::SkewedAt(uint64_t base_now) const {
  const uint64_t elapsed = base_now > anchor_base_ ? base_now - anchor_base_ : 0;
  return anchor_skewed_ + static_cast<uint64_t>(skew_.rate * static_cast<double>(elapsed));
}

void SkewedClockEnv::MaybeReread(uint64_t base_now) {
  if (read_once_ && base_now < last_read_base_ + kRereadMicros) return;
  read_once_ = true;
  last_read_base_ = base_now;
  absl::StatusOr<std::string> text = ReadFileToString(base(), control_path_);
  if (!text.ok()) return;  // Absent (not written yet): the last rate holds.
  absl::StatusOr<ClockSkew> skew = ParseClockSkew(*text);
  if (!skew.ok()) {
    const std::string warning = absl::StrCat(control_path_, ": ", skew.status().message());
    if (warning != last_warning_) LOG(WARNING) << warning << "; the clock keeps its last rate";
    last_warning_ = warning;
    return;
  }
  if (skew->rate == skew_.rate && skew->jump_seconds <= skew_.jump_seconds) return;
  const uint64_t now = SkewedAt(base_now);
  const double jump = std::max(0.0, skew->jump_seconds - skew_.jump_seconds);
  LOG(WARNING) << "chaos clock (" << control_path_ << "): the Env clock runs at " << skew->rate
               << "x from now on, jumping " << jump << " s forward";
  anchor_base_ = base_now;
  anchor_skewed_ = now + static_cast<uint64_t>(jump * 1e6);
  skew_.rate = skew->rate;
  skew_.jump_seconds = std::max(skew_.jump_seconds, skew->jump_seconds);
}

uint64_t SkewedClockEnv::NowMicros() {
  const uint64_t base_now = base()->NowMicros();
  absl::MutexLock lock(&mu_);
  MaybeReread(base_now);
  return SkewedAt(base_now);
}

void SkewedClockEnv::SleepForMicros(uint64_t micros) {
  double rate;
  {
    const uint64_t base_now = base()->NowMicros();
    absl::MutexLock lock(&mu_);
    MaybeReread(base_now);
    rate = skew_.rate;
  }
  base()->SleepForMicros(static_cast<uint64_t>(static_cast<double>(micros) / rate));
}

Env* DefaultEnvOrSkewedClock() {
  static Env* const env = [] {
    const char* path = std::getenv(kSkewedClockEnvironmentVariable);
    if (path == nullptr || *path == '\0') return Env::Default();
    return static_cast<Env*>(new SkewedClockEnv(Env::Default(), path));
  }();
  return env;
}

}  // namespace granary
