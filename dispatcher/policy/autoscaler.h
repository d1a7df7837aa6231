// Autoscaling (issue 17, JobSpec.autoscale): how many workers a job should have, decided from
// its metrics, one observation per measurement period. Two rules behind one interface:
//
//  * CachewAutoscaler — Cachew's published rule, the baseline: add one worker while the
//    trainer's batch time improves by more than 7%; once an added worker does not pay, remove
//    it and keep removing while the batch time worsens by less than 3% (a removal that costs
//    more is undone); when stable, probe one more every `recheck_every` periods. One decision
//    per worker added.
//  * ModelAutoscaler — Granary's: from the measured rates (the trainer consumes 1/step_s
//    batches/s, a worker makes remote_worker_rate) it jumps straight to
//    ceil(consumption × (1 + margin) / per-worker rate), then corrects by one while the trainer
//    still waits for data or a worker is spare. Converges in ≤ 3 decisions.
//
// Both are ResourcePolicies (resource_policy.h) deciding remote workers only.
// Thread-compatible.
#ifndef GRANARY_DISPATCHER_POLICY_AUTOSCALER_H_
#define GRANARY_DISPATCHER_POLICY_AUTOSCALER_H_

#include <cstdint>
#include <optional>

#include "dispatcher/policy/job_metrics.h"
#include "dispatcher/policy/resource_policy.h"
#include "dispatcher/policy/scaling_decision.h"

namespace granary {

struct CachewOptions {
  double improve = 0.07;  // add another while the batch time improves by more than this
  double worsen = 0.03;   // remove another while it worsens by less than this
  int recheck_every = 10;
  int32_t max_workers = 64;
};

class CachewAutoscaler : public ResourcePolicy {
 public:
  explicit CachewAutoscaler(const CachewOptions& options = {}) : options_(options) {}
  std::optional<ScalingDecision> Observe(const JobMetrics& metrics) override;

 private:
  enum class Phase { kGrowing, kShrinking, kStable };
  const CachewOptions options_;
  Phase phase_ = Phase::kGrowing;
  // The observation the next one is compared with.
  int32_t last_workers_ = 0;
  double last_batch_s_ = 0;
  int stable_periods_ = 0;
};

struct ModelOptions {
  double margin = 0.05;          // capacity above the trainer's consumption
  double wait_tolerance = 0.05;  // a trainer waiting less than this fraction is fed
  int32_t max_workers = 64;
};

class ModelAutoscaler : public ResourcePolicy {
 public:
  explicit ModelAutoscaler(const ModelOptions& options = {}) : options_(options) {}
  std::optional<ScalingDecision> Observe(const JobMetrics& metrics) override;

 private:
  const ModelOptions options_;
  bool jumped_ = false;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_POLICY_AUTOSCALER_H_
