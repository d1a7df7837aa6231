// A resource policy (issue 17): decides, from a job's metrics one measurement period at a
// time, how many workers the job should have and where — the autoscalers (autoscaler.h) decide
// remote workers only, the placements (placement.h) local and remote ones. Implementations are
// deterministic functions of the observations they were shown (no clock, no randomness): the
// dispatcher journals each decision before acting on it (DESIGN.md §9), so a restart replays
// the decisions. Thread-compatible.
#ifndef GRANARY_DISPATCHER_POLICY_RESOURCE_POLICY_H_
#define GRANARY_DISPATCHER_POLICY_RESOURCE_POLICY_H_

#include <optional>

#include "dispatcher/policy/job_metrics.h"
#include "dispatcher/policy/scaling_decision.h"

namespace granary {

class ResourcePolicy {
 public:
  virtual ~ResourcePolicy() = default;
  // The decision after `metrics` (measured at the job's current worker counts, which it
  // carries), or nullopt to keep them.
  virtual std::optional<ScalingDecision> Observe(const JobMetrics& metrics) = 0;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_POLICY_RESOURCE_POLICY_H_
