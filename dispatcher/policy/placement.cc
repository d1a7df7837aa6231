#include "dispatcher/policy/placement.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace granary {
namespace {

ScalingDecision Place(int32_t remote, int32_t local, std::string reason) {
  ScalingDecision d;
  d.remote_workers = remote;
  d.local_workers = local;
  d.reason = std::move(reason);
  return d;
}

}  // namespace

double CostPerBatch(double batch_s, int32_t remote_workers, const Prices& prices) {
  return batch_s / 3600 * (prices.trainer_per_hour + remote_workers * prices.worker_per_hour);
}

PlacementChoice CheapestNearBest(const std::function<double(int32_t, int32_t)>& batch_s,
                                 int32_t max_remote, int32_t max_local,
                                 const PlacementOptions& options) {
  double best = std::numeric_limits<double>::infinity();
  for (int32_t local = 0; local <= max_local; ++local) {
    for (int32_t remote = 0; remote <= max_remote; ++remote) {
      best = std::min(best, batch_s(remote, local));
    }
  }
  PlacementChoice choice;
  choice.cost_per_batch = std::numeric_limits<double>::infinity();
  for (int32_t local = 0; local <= max_local; ++local) {
    for (int32_t remote = 0; remote <= max_remote; ++remote) {
      const double b = batch_s(remote, local);
      if (b > best * (1 + options.time_tolerance)) continue;
      const double cost = CostPerBatch(b, remote, options.prices);
      if (cost < choice.cost_per_batch) choice = {remote, local, b, cost};
    }
  }
  return choice;
}

std::optional<ScalingDecision> PecanPlacement::Observe(const JobMetrics& m) {
  const int32_t r = m.remote_workers;
  const int32_t l = m.local_workers;
  const double b = m.batch_s();
  if (b <= 0 || m.step_s <= 0) return std::nullopt;
  const bool waits = m.wait_fraction() > options_.wait_tolerance;
  switch (phase_) {
    case Phase::kLocal:
      if (l == 0) base_step_s_ = m.step_s;
      if (l > 0 && m.step_s > base_step_s_ * (1 + options_.slowdown_limit)) {
        phase_ = Phase::kRemote;
        has_last_ = false;
        return Place(
            r, l - 1,
            absl::StrFormat("pecan: local workers slow the trainer %.0f%% > "
                            "%.0f%%: remove one",
                            100 * (m.step_s / base_step_s_ - 1), 100 * options_.slowdown_limit));
      }
      if (waits && l < options_.max_local) {
        return Place(r, l + 1, "pecan: the trainer waits; one more local worker");
      }
      phase_ = Phase::kRemote;
      has_last_ = false;
      [[fallthrough]];
    case Phase::kRemote: {
      if (!has_last_ || last_remote_ != r - 1) {
        has_last_ = true;
        last_remote_ = r;
        last_batch_s_ = b;
        if (waits && r < options_.max_remote) {
          return Place(r + 1, l, "pecan: the trainer waits; probing one more remote worker");
        }
        phase_ = Phase::kStable;
        return std::nullopt;
      }
      const double saved = CostPerBatch(last_batch_s_ - b, 0, options_.prices);  // trainer time
      const double paid = b / 3600 * options_.prices.worker_per_hour;
      if (saved > paid) {
        last_remote_ = r;
        last_batch_s_ = b;
        if (waits && r < options_.max_remote) {
          return Place(r + 1, l, "pecan: the last remote worker paid; one more");
        }
        phase_ = Phase::kStable;
        return std::nullopt;
      }
      phase_ = Phase::kStable;
      stable_periods_ = 0;
      return Place(r - 1, l, "pecan: the last remote worker did not pay; remove it");
    }
    case Phase::kStable:
      if (++stable_periods_ < options_.recheck_every || r == 0) return std::nullopt;
      stable_periods_ = 0;
      phase_ = Phase::kShedProbe;
      last_remote_ = r;
      last_batch_s_ = b;
      return Place(r - 1, l, "pecan: re-check, does the last remote worker still pay?");
    case Phase::kShedProbe: {
      phase_ = Phase::kStable;
      const double lost = CostPerBatch(b - last_batch_s_, 0, options_.prices);
      const double saved = last_batch_s_ / 3600 * options_.prices.worker_per_hour;
      if (lost > saved) return Place(r + 1, l, "pecan: it paid; put it back");
      return std::nullopt;
    }
  }
  return std::nullopt;
}

PlacementChoice ModelPlacement::Choose(const JobMetrics& m, double per_local,
                                       int32_t max_local) const {
  const double local_rate = m.local_worker_rate > 0 ? m.local_worker_rate : m.remote_worker_rate;
  const auto predicted = [&](int32_t remote, int32_t local) {
    const double step = base_step_s_ * (1 + per_local * local);
    const double supply = local * local_rate + remote * m.remote_worker_rate;
    return supply <= 0 ? std::numeric_limits<double>::infinity() : std::max(step, 1 / supply);
  };
  return CheapestNearBest(predicted, options_.max_remote, max_local, options_);
}

std::optional<ScalingDecision> ModelPlacement::Observe(const JobMetrics& m) {
  const int32_t r = m.remote_workers;
  const int32_t l = m.local_workers;
  if (m.step_s <= 0 || m.remote_worker_rate <= 0) return std::nullopt;
  switch (phase_) {
    case Phase::kStart: {
      base_step_s_ = m.step_s;
      phase_ = Phase::kMeasure;
      if (options_.max_local == 0 || l > 0) break;
      // Probe local workers — free ones, even when the trainer is fed, since they may replace
      // remote ones — together with the remote count the measured rates call for if local
      // workers cost the trainer nothing: the probe then runs near where the job will stay.
      PlacementChoice probe = Choose(m, 0, options_.max_local);
      probe.local = std::max(probe.local, 1);
      return Place(probe.remote, probe.local,
                   absl::StrFormat("model: probing %d local workers to measure their slowdown, "
                                   "%d remote at %.1f batches/s each",
                                   probe.local, probe.remote, m.remote_worker_rate));
    }
    case Phase::kMeasure:
      break;
    case Phase::kCorrect:
      if (m.wait_fraction() > options_.wait_tolerance && r < options_.max_remote) {
        return Place(r + 1, l,
                     absl::StrFormat("model: the trainer still waits %.0f%% of its time",
                                     100 * m.wait_fraction()));
      }
      return std::nullopt;
  }
  // kMeasure: the step time with `l` local workers, averaged over options_.measure_periods
  // periods (one period's step time is too noisy for a few percent of slowdown).
  measured_step_s_ += m.step_s;
  if (++measured_periods_ < options_.measure_periods) return std::nullopt;
  phase_ = Phase::kCorrect;
  const double step_s = measured_step_s_ / measured_periods_;
  // Linear slowdown per local worker; local workers only as far as the trainer's step may grow.
  const double per_local = l > 0 ? std::max(0.0, step_s / base_step_s_ - 1) / l : 0;
  int32_t max_local = 0;
  for (int32_t k = 1; l > 0 && k <= options_.max_local; ++k) {
    if (per_local * k <= options_.slowdown_limit) max_local = k;
  }
  const PlacementChoice choice = Choose(m, per_local, max_local);
  if (choice.remote == r && choice.local == l) return std::nullopt;
  return Place(choice.remote, choice.local,
               absl::StrFormat("model: %d local (%.1f%% slowdown each), %d remote workers: "
                               "%.2f ms per batch at $%.4f per 1000 batches",
                               choice.local, 100 * per_local, choice.remote, 1e3 * choice.batch_s,
                               1e3 * choice.cost_per_batch));
}

}  // namespace granary
