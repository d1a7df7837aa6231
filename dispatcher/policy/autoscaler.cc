#include "dispatcher/policy/autoscaler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace granary {
namespace {

ScalingDecision Remote(int32_t workers, std::string reason) {
  ScalingDecision d;
  d.remote_workers = workers;
  d.reason = std::move(reason);
  return d;
}

}  // namespace

std::optional<ScalingDecision> CachewAutoscaler::Observe(const JobMetrics& m) {
  const int32_t w = m.remote_workers;
  const double b = m.batch_s();
  if (b <= 0) return std::nullopt;
  const auto remember = [&] {
    last_workers_ = w;
    last_batch_s_ = b;
  };
  switch (phase_) {
    case Phase::kGrowing: {
      if (last_workers_ == 0 || last_workers_ != w - 1) {  // first observation, or a new base
        remember();
        if (w >= options_.max_workers) return std::nullopt;
        return Remote(w + 1, absl::StrFormat("cachew: probing %d workers", w + 1));
      }
      const double improvement = (last_batch_s_ - b) / last_batch_s_;
      if (improvement > options_.improve && w < options_.max_workers) {
        remember();
        return Remote(w + 1, absl::StrFormat("cachew: batch time improved %.1f%% > %.0f%%",
                                             100 * improvement, 100 * options_.improve));
      }
      // The last worker did not pay: back to the count before it, then try fewer.
      phase_ = Phase::kShrinking;
      last_workers_ = w - 1;
      return Remote(w - 1, absl::StrFormat("cachew: batch time improved only %.1f%%: remove it",
                                           100 * improvement));
    }
    case Phase::kShrinking: {
      if (w == last_workers_) {  // back at the base: measure it, then try one fewer
        remember();
        if (w <= 1) {
          phase_ = Phase::kStable;
          return std::nullopt;
        }
        return Remote(w - 1, "cachew: trying one worker fewer");
      }
      const double worsening = (b - last_batch_s_) / last_batch_s_;
      if (worsening < options_.worsen) {
        remember();
        if (w <= 1) {
          phase_ = Phase::kStable;
          return std::nullopt;
        }
        return Remote(w - 1, absl::StrFormat("cachew: batch time worsened %.1f%% < %.0f%%",
                                             100 * worsening, 100 * options_.worsen));
      }
      phase_ = Phase::kStable;
      stable_periods_ = 0;
      return Remote(w + 1, absl::StrFormat("cachew: batch time worsened %.1f%%: add it back",
                                           100 * worsening));
    }
    case Phase::kStable:
      if (++stable_periods_ < options_.recheck_every || w >= options_.max_workers) {
        return std::nullopt;
      }
      stable_periods_ = 0;
      phase_ = Phase::kGrowing;
      remember();
      return Remote(w + 1, "cachew: periodic re-check, probing one more");
  }
  return std::nullopt;
}

std::optional<ScalingDecision> ModelAutoscaler::Observe(const JobMetrics& m) {
  const int32_t w = m.remote_workers;
  if (m.step_s <= 0 || m.remote_worker_rate <= 0) return std::nullopt;  // not measured yet
  const double consumption = 1.0 / m.step_s;
  const double needed = consumption * (1 + options_.margin) / m.remote_worker_rate;
  const int32_t target =
      std::clamp<int32_t>(static_cast<int32_t>(std::ceil(needed - 1e-9)), 1, options_.max_workers);
  if (!jumped_) {
    jumped_ = true;
    if (target == w) return std::nullopt;
    return Remote(target, absl::StrFormat("model: the trainer takes %.1f batches/s, a worker "
                                          "makes %.1f: ceil(%.2f) = %d workers",
                                          consumption, m.remote_worker_rate, needed, target));
  }
  const double waiting = m.wait_fraction();
  if (waiting > options_.wait_tolerance && w < options_.max_workers) {
    return Remote(
        w + 1, absl::StrFormat("model: the trainer still waits %.0f%% of its time", 100 * waiting));
  }
  if (waiting <= options_.wait_tolerance && w > 1 &&
      (w - 1) * m.remote_worker_rate >= consumption * (1 + options_.margin)) {
    return Remote(w - 1, absl::StrFormat("model: %d workers make %.1f batches/s, enough for "
                                         "%.1f with the margin",
                                         w - 1, (w - 1) * m.remote_worker_rate, consumption));
  }
  return std::nullopt;
}

}  // namespace granary
