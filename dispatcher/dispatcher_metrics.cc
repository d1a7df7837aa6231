// DispatcherImpl::CollectMetrics: the dispatcher's /metrics, computed from its state and
// heartbeat measurements at each scrape (the journal's own instruments are Journal's).
#include "absl/strings/str_cat.h"
#include "dispatcher/dispatcher_impl.h"

namespace granary {
namespace {

MetricLabels JobLabel(int64_t job) { return {{"job", absl::StrCat(job)}}; }

}  // namespace

bool DispatcherImpl::JobOver(const DispatcherState& state, const JobState& job,
                             uint64_t now) const {
  for (int64_t e = 0; e < job.epochs_started(); ++e) {
    const EpochState* epoch = state.FindEpoch(job.job_id(), e);
    if (epoch == nullptr || !epoch->finished()) return false;
    for (int64_t task : epoch->task_ids()) {
      if (unread_finished_.count(task)) return false;
    }
  }
  if (job.options().num_epochs() > 0 && job.epochs_started() >= job.options().num_epochs()) {
    return true;
  }
  const std::optional<uint64_t> active = retention_.LastActive(job.job_id());
  return !active.has_value() || now - *active > JobActivityTracker::kWindowUs;
}

void DispatcherImpl::CollectMetrics(MetricSamples& out) const {
  WithState([&](const DispatcherState& state)
                ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { CollectMetrics(state, out); });
}

void DispatcherImpl::CollectMetrics(const DispatcherState& state, MetricSamples& out) const {
  const uint64_t now = options_.env->NowMicros();

  // Workers: live, lost, silent (not yet declared lost), standby (live and idle by choice).
  int64_t live = 0, lost = 0, silent = 0, standby = 0, local = 0;
  for (const auto& [id, worker] : state.workers()) {
    if (worker.lost()) {
      ++lost;
      continue;
    }
    if (!liveness_.HeardWithin(id, now)) {
      ++silent;
      continue;
    }
    ++live;
    if (worker.standby()) ++standby;
    if (worker.local_job_id() != 0) ++local;
  }
  constexpr char kWorkers[] = "Registered workers by state (standby and local are live ones).";
  out.AddGauge("granary_dispatcher_workers", kWorkers, {{"state", "live"}}, live);
  out.AddGauge("granary_dispatcher_workers", kWorkers, {{"state", "lost"}}, lost);
  out.AddGauge("granary_dispatcher_workers", kWorkers, {{"state", "silent"}}, silent);
  out.AddGauge("granary_dispatcher_workers", kWorkers, {{"state", "standby"}}, standby);
  out.AddGauge("granary_dispatcher_workers", kWorkers, {{"state", "local"}}, local);
  out.AddCounter("granary_dispatcher_duplicate_workers_refused_total",
                 "RegisterWorker calls refused because a live worker holds the id at another "
                 "address (two workers started with the same --worker_id).",
                 {}, counters_.duplicate_workers_refused);
  out.AddCounter("granary_dispatcher_tasks_moved_total",
                 "Tasks given to another worker (a lost worker's, a scaling step's, a takeover).",
                 {}, state.task_moves() - counters_.task_moves_at_open);

  // Jobs that are not over: what their trainers received and waited, their epochs, the
  // policies' decisions.
  for (const JobActivity& job : activity_.Jobs(now)) {
    const JobState* job_state = state.FindJob(job.job_id());
    if (job_state == nullptr || JobOver(state, *job_state, now)) continue;
    const MetricLabels labels = JobLabel(job.job_id());
    out.AddCounter("granary_job_elements_delivered_total",
                   "Elements the job's trainers received (client heartbeats).", labels,
                   job.delivered());
    out.AddCounter("granary_job_trainer_wait_seconds_total",
                   "Time the job's trainers waited in Next() for elements.", labels,
                   job.wait_us() * 1e-6);
    out.AddCounter("granary_job_trainer_step_seconds_total",
                   "Time the job's trainers spent between Next() calls (their steps).", labels,
                   job.step_us() * 1e-6);
    out.AddGauge("granary_job_throughput_elements_per_second",
                 "Elements delivered per second over the last heartbeats.", labels,
                 job.elements_per_second());
    out.AddGauge("granary_job_trainer_wait_seconds_per_element",
                 "The trainers' wait per element (per batch, for a batched pipeline) over the "
                 "last heartbeats.",
                 labels, job.wait_seconds_per_element());
  }
  for (const auto& [id, job] : state.jobs()) {
    if (JobOver(state, job, now)) continue;
    const MetricLabels labels = JobLabel(id);
    out.AddCounter("granary_job_epochs_started_total", "Epochs started of the job.", labels,
                   job.epochs_started());
    out.AddCounter("granary_job_scaling_steps_total",
                   "Scaling steps applied to the job (autoscaling, placement, granary scale).",
                   labels, job.scaling_steps());
    MetricLabels remote = labels, local_slots = labels;
    remote.emplace_back("kind", "remote");
    local_slots.emplace_back("kind", "local");
    constexpr char kSlots[] =
        "Tasks per consumer the job runs (AutoPlacement's split: remote and local workers).";
    out.AddGauge("granary_job_slots_per_consumer", kSlots, remote,
                 job.options().num_worker_slots());
    out.AddGauge("granary_job_slots_per_consumer", kSlots, local_slots,
                 job.options().num_local_slots());
    if (job.has_cache_decision()) {
      out.AddGauge("granary_job_cache_point",
                   "cache_policy auto's decision: ops in the cached prefix (0: compute).", labels,
                   job.cache_decision().cache_point());
    }
  }
  int64_t running_epochs = 0, running_tasks = 0, unassigned_tasks = 0;
  for (const auto& [key, epoch] : state.epochs()) {
    if (!epoch.finished()) ++running_epochs;
  }
  for (const auto& [id, task] : state.tasks()) {
    if (task.finished()) continue;
    ++running_tasks;
    if (task.worker_id().empty()) ++unassigned_tasks;
  }
  out.AddGauge("granary_dispatcher_running_epochs", "Epochs started and not finished.", {},
               running_epochs);
  out.AddGauge("granary_dispatcher_running_tasks",
               "Tasks not finished, by whether a worker has them.", {{"assigned", "yes"}},
               running_tasks - unassigned_tasks);
  out.AddGauge("granary_dispatcher_running_tasks",
               "Tasks not finished, by whether a worker has them.", {{"assigned", "no"}},
               unassigned_tasks);
  constexpr char kEpochs[] = "Epochs started by this process, by how they use the cache.";
  out.AddCounter("granary_dispatcher_epochs_started_total", kEpochs, {{"cache", "compute"}},
                 counters_.epochs_started[EpochCache::COMPUTE]);
  out.AddCounter("granary_dispatcher_epochs_started_total", kEpochs, {{"cache", "put"}},
                 counters_.epochs_started[EpochCache::PUT]);
  out.AddCounter("granary_dispatcher_epochs_started_total", kEpochs, {{"cache", "get"}},
                 counters_.epochs_started[EpochCache::GET]);

  cache_->CollectMetrics(state, out);

  // Autoscaling's target and the journal's head.
  provisioning_.CollectMetrics(out);
  out.AddGauge("granary_journal_applied_seq", "Sequence number of the last record applied.", {},
               static_cast<double>(state.applied_seq()));
}

}  // namespace granary
