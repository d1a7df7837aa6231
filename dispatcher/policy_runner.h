// PolicyRunner: the resource policies' loop (issue 17). It keeps the heartbeats' counters per
// job (job_metrics_collector.h) and each autoscaled or placed job's policy
// (policy/resource_policy.h) — neither journaled: their decisions are, and a restarted
// dispatcher measures and decides afresh — and turns a policy's decision into a scaling step
// proposed to the core (ScaleJobUpdate, with the decision's reason).
//
// A new resource policy goes into dispatcher/policy/ (a pure function of a job's metrics) and
// is chosen for a job by NewPolicy here.
//
// Thread-safe. Lock order: the core's lock, then mu_, then WorkerProvisioning's.
#ifndef GRANARY_DISPATCHER_POLICY_RUNNER_H_
#define GRANARY_DISPATCHER_POLICY_RUNNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/job_metrics_collector.h"
#include "dispatcher/policy/resource_policy.h"
#include "dispatcher/worker_provisioning.h"

namespace granary {

class PolicyRunner {
 public:
  // `core` and `provisioning` (whose maximum bounds the remote workers a policy may ask for)
  // must outlive the runner; `prices` are what placement policies weigh.
  PolicyRunner(DispatcherCore* core, const WorkerProvisioning* provisioning, Prices prices);

  // The heartbeats' counters (JobMetricsCollector's).
  JobMetricsCollector::ReaderIncrease ReaderTotals(int64_t job, int32_t consumer, int64_t delivered,
                                                   int64_t wait_us, int64_t step_us)
      ABSL_LOCKS_EXCLUDED(mu_);
  void ProducerTotals(int64_t job, int64_t task, bool local, int64_t produced, int64_t busy_us)
      ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetTask(int64_t job, int64_t task) ABSL_LOCKS_EXCLUDED(mu_);
  // A retired job: its counters and policy go.
  void Forget(int64_t job) ABSL_LOCKS_EXCLUDED(mu_);

  // One pass: for each job with JobOptions.autoscale or placement whose running epoch still
  // hands out splits, its metrics since the last pass go to its policy, and a decision becomes
  // a proposed scaling step; the job's next period is then skipped (it mixes the counts before
  // and after the step). Unavailable once the core stopped.
  absl::Status RunPolicies() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The policy JobOptions.autoscale or .placement names for `job`, sized by the workers live
  // now (or the provisioner's maximum).
  std::unique_ptr<ResourcePolicy> NewPolicy(const DispatcherState& state,
                                            const JobState& job) const;

  DispatcherCore* const core_;
  const WorkerProvisioning* const provisioning_;
  const Prices prices_;

  absl::Mutex mu_;
  JobMetricsCollector metrics_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::unique_ptr<ResourcePolicy>> policies_ ABSL_GUARDED_BY(mu_);
  // Jobs scaled in the last pass: their next period is skipped.
  std::set<int64_t> settling_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_POLICY_RUNNER_H_
