#include "dispatcher/policy_runner.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "dispatcher/assignment_policy.h"
#include "dispatcher/policy/autoscaler.h"
#include "dispatcher/policy/placement.h"
#include "dispatcher/request_limits.h"
#include "glog/logging.h"

namespace granary {

PolicyRunner::PolicyRunner(DispatcherCore* core, const WorkerProvisioning* provisioning,
                           Prices prices)
    : core_(core), provisioning_(provisioning), prices_(prices) {}

JobMetricsCollector::ReaderIncrease PolicyRunner::ReaderTotals(int64_t job, int32_t consumer,
                                                               int64_t delivered, int64_t wait_us,
                                                               int64_t step_us) {
  absl::MutexLock lock(&mu_);
  return metrics_.ReaderTotals(job, consumer, delivered, wait_us, step_us);
}

void PolicyRunner::ProducerTotals(int64_t job, int64_t task, bool local, int64_t produced,
                                  int64_t busy_us) {
  absl::MutexLock lock(&mu_);
  metrics_.ProducerTotals(job, task, local, produced, busy_us);
}

void PolicyRunner::ForgetTask(int64_t job, int64_t task) {
  absl::MutexLock lock(&mu_);
  metrics_.ForgetTask(job, task);
}

void PolicyRunner::Forget(int64_t job) {
  absl::MutexLock lock(&mu_);
  metrics_.Forget(job);
  policies_.erase(job);
  settling_.erase(job);
}

std::unique_ptr<ResourcePolicy> PolicyRunner::NewPolicy(const DispatcherState& state,
                                                        const JobState& job) const {
  const JobOptions& o = job.options();
  // As many local workers as every consumer has live; as many remote ones as the provisioner
  // may start (or are live now).
  std::map<int32_t, int32_t> local_per_consumer;
  int32_t remote = 0;
  for (const auto& [id, w] : state.workers()) {
    if (w.lost()) continue;
    if (w.local_job_id() == job.job_id()) ++local_per_consumer[w.local_consumer()];
    if (!IsLocalWorker(w) && !w.standby()) ++remote;
  }
  const int32_t max_remote = std::max(provisioning_->MaxWorkers().value_or(remote), 1);
  int32_t max_local = 0;
  if (static_cast<int32_t>(local_per_consumer.size()) == std::max(o.num_consumers(), 1)) {
    max_local = INT32_MAX;
    for (const auto& [consumer, n] : local_per_consumer) max_local = std::min(max_local, n);
  }
  if (o.autoscale() == AUTOSCALE_CACHEW) {
    return std::make_unique<CachewAutoscaler>(CachewOptions{.max_workers = max_remote});
  }
  if (o.autoscale() == AUTOSCALE_MODEL) {
    return std::make_unique<ModelAutoscaler>(ModelOptions{.max_workers = max_remote});
  }
  PlacementOptions options;
  options.prices = prices_;
  options.max_local = max_local;
  options.max_remote = max_remote;
  if (o.placement() == PLACEMENT_PECAN) return std::make_unique<PecanPlacement>(options);
  return std::make_unique<ModelPlacement>(options);
}

absl::Status PolicyRunner::RunPolicies() {
  std::vector<Update> steps;
  RETURN_IF_ERROR(core_->CheckUsable());
  core_->Read([&](const DispatcherState& state) {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, job] : state.jobs()) {
      const JobOptions& o = job.options();
      if (o.autoscale() == AUTOSCALE_NONE && o.placement() == PLACEMENT_STATIC) continue;
      // Only while an epoch is handing out splits: a step changes nothing else now, and an
      // epoch's tail (workers ending one by one) says nothing of the rates.
      bool running = false;
      for (int64_t e = 0; e < job.epochs_started(); ++e) {
        const EpochState* epoch = state.FindEpoch(id, e);
        running = running || (epoch != nullptr && HandsOutSplits(*epoch));
      }
      if (!running) continue;
      std::optional<JobMetrics> metrics = metrics_.Take(id, kMinElementsPerDecision);
      if (!metrics.has_value()) continue;
      // The period after a step mixes the counts before and after it (joining workers start,
      // shed ones drain): it is not shown to the policy.
      if (settling_.erase(id) > 0) continue;
      metrics->local_workers = o.num_local_slots();
      metrics->remote_workers =
          o.num_local_slots() > 0 ? o.num_worker_slots() : std::max(o.num_worker_slots(), 1);
      std::unique_ptr<ResourcePolicy>& policy = policies_[id];
      if (policy == nullptr) policy = NewPolicy(state, job);
      const std::optional<ScalingDecision> decision = policy->Observe(*metrics);
      if (!decision.has_value()) continue;
      // An autoscaler decides remote workers only.
      const int32_t local =
          o.placement() == PLACEMENT_STATIC ? o.num_local_slots() : decision->local_workers;
      if (decision->remote_workers == metrics->remote_workers && local == o.num_local_slots()) {
        continue;
      }
      if (!ValidateScaling(id, decision->remote_workers, local, o.num_consumers()).ok()) continue;
      Update& step = steps.emplace_back();
      step.mutable_scale_job()->set_job_id(id);
      step.mutable_scale_job()->set_num_worker_slots(decision->remote_workers);
      step.mutable_scale_job()->set_num_local_slots(local);
      step.mutable_scale_job()->set_reason(decision->reason.substr(0, kMaxScalingReasonBytes));
      settling_.insert(id);
    }
  });
  for (const Update& step : steps) {
    const absl::Status proposed = core_->Propose(step, [&](const DispatcherState&) {
      LOG(INFO) << "job " << step.scale_job().job_id() << ": " << step.scale_job().reason()
                << " -> " << step.scale_job().num_worker_slots() << " remote + "
                << step.scale_job().num_local_slots() << " local tasks per consumer";
    });
    // A step the state refuses now (the job was retired meanwhile) is dropped.
    if (absl::IsUnavailable(proposed)) return proposed;
  }
  return absl::OkStatus();
}

}  // namespace granary
