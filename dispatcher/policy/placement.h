// AutoPlacement (issue 17, JobSpec.placement = auto): where a job's workers run — on the
// trainer's host (local workers: its spare cores are paid for already, but they share them with
// the trainer) or remote (they cost money) — decided from the job's metrics. Two rules:
//
//  * PecanPlacement — Pecan's, the baseline, one worker per decision: add local workers while
//    the trainer still waits for data and its step time grows by at most 10% over its step
//    with none (a local worker that slows it more is removed); then add remote workers while
//    each one's cost is repaid by the trainer time it saves (`Prices`); when stable, shed a
//    remote worker whose saving no longer pays (and put it back if it did pay).
//  * ModelPlacement — Granary's: its first decision probes local workers (free ones, even when
//    the trainer is fed: they may replace remote ones) together with the remote count the
//    measured worker rate calls for; it averages the trainer's step over `measure_periods`
//    periods to measure the slowdown per local worker, then jumps to the local count the 10%
//    bound allows and the remote count that minimizes the cost per batch among those within 5%
//    of the best batch time — computed from the measured rates — then corrects by one remote
//    worker while the trainer still waits. Converges in ≤ 3 decisions.
//
// Both are ResourcePolicies (resource_policy.h). Thread-compatible.
#ifndef GRANARY_DISPATCHER_POLICY_PLACEMENT_H_
#define GRANARY_DISPATCHER_POLICY_PLACEMENT_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "dispatcher/policy/job_metrics.h"
#include "dispatcher/policy/resource_policy.h"
#include "dispatcher/policy/scaling_decision.h"

namespace granary {

struct PlacementOptions {
  int32_t max_local = 2;
  int32_t max_remote = 8;
  double slowdown_limit = 0.10;  // the trainer's step may grow this much for local workers
  double wait_tolerance = 0.05;  // a trainer waiting less than this fraction is fed
  double time_tolerance = 0.05;  // "nearly the best" batch time
  int recheck_every = 10;        // PecanPlacement: stable periods between re-checks
  int measure_periods = 2;       // ModelPlacement: periods its slowdown measurement averages
  Prices prices;
};

// The cost of one batch: the trainer's time for it at its price, and every remote worker's.
double CostPerBatch(double batch_s, int32_t remote_workers, const Prices& prices);

struct PlacementChoice {
  int32_t remote = 0;
  int32_t local = 0;
  double batch_s = 0;
  double cost_per_batch = 0;
};

// Among remote in [0, max_remote] and local in [0, max_local], the placement of least cost per
// batch whose batch time — `batch_s(remote, local)` — is within options.time_tolerance of the
// best. With the true batch times of every static configuration this is the oracle the policies
// are measured against; ModelPlacement applies it to the batch times its measurements predict.
PlacementChoice CheapestNearBest(const std::function<double(int32_t, int32_t)>& batch_s,
                                 int32_t max_remote, int32_t max_local,
                                 const PlacementOptions& options);

class PecanPlacement : public ResourcePolicy {
 public:
  explicit PecanPlacement(const PlacementOptions& options = {}) : options_(options) {}
  std::optional<ScalingDecision> Observe(const JobMetrics& metrics) override;

 private:
  enum class Phase { kLocal, kRemote, kStable, kShedProbe };
  const PlacementOptions options_;
  Phase phase_ = Phase::kLocal;
  double base_step_s_ = 0;  // the trainer's step with no local worker
  bool has_last_ = false;
  double last_batch_s_ = 0;
  int32_t last_remote_ = 0;
  int stable_periods_ = 0;
};

class ModelPlacement : public ResourcePolicy {
 public:
  explicit ModelPlacement(const PlacementOptions& options = {}) : options_(options) {}
  std::optional<ScalingDecision> Observe(const JobMetrics& metrics) override;

 private:
  enum class Phase { kStart, kMeasure, kCorrect };
  // The cheapest placement near the best batch time the rates in `m` predict, for local
  // workers slowing the trainer's step `per_local` each and at most `max_local` of them.
  PlacementChoice Choose(const JobMetrics& m, double per_local, int32_t max_local) const;

  const PlacementOptions options_;
  Phase phase_ = Phase::kStart;
  double base_step_s_ = 0;  // the trainer's step with no local worker
  double measured_step_s_ = 0;
  int measured_periods_ = 0;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_POLICY_PLACEMENT_H_
