#include "dispatcher/worker_provisioning.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dispatcher/assignment_policy.h"
#include "glog/logging.h"

namespace granary {

WorkerProvisioning::WorkerProvisioning(DispatcherCore* core, Env* env, int64_t period_ms,
                                       UnreadTasks unread)
    : core_(core), env_(env), period_ms_(period_ms), unread_(std::move(unread)) {}

void WorkerProvisioning::Set(std::unique_ptr<Provisioner> provisioner, int32_t min_workers,
                             int32_t max_workers) {
  absl::MutexLock lock(&mu_);
  provisioner_ = std::move(provisioner);
  min_workers_ = std::max(min_workers, 0);
  max_workers_ = std::max(max_workers, min_workers_);
  requested_workers_ = -1;
}

std::optional<int32_t> WorkerProvisioning::MaxWorkers() const {
  absl::MutexLock lock(&mu_);
  if (provisioner_ == nullptr) return std::nullopt;
  return max_workers_;
}

void WorkerProvisioning::Provision() {
  Provisioner* provisioner = nullptr;
  int32_t wanted = 0;
  std::vector<std::string> idle;
  if (!core_->CheckUsable().ok()) return;
  const bool ask = core_->Read([&](const DispatcherState& state) {
    const std::set<int64_t> unread = unread_();
    absl::MutexLock lock(&mu_);
    if (provisioner_ == nullptr) return false;
    provisioner = provisioner_.get();
    // A worker for every unfinished remote task of an unfinished epoch.
    int64_t tasks = 0;
    for (const auto& [key, epoch] : state.epochs()) {
      if (epoch.finished()) continue;
      for (int64_t id : epoch.task_ids()) {
        const TaskState* task = state.FindTask(id);
        tasks += task != nullptr && !task->finished() && !task->local();
      }
    }
    wanted = static_cast<int32_t>(std::clamp<int64_t>(tasks, min_workers_, max_workers_));
    const uint64_t now = env_->NowMicros();
    const uint64_t period_us = static_cast<uint64_t>(period_ms_) * 1000;
    if (wanted >= requested_workers_) lower_since_us_ = now;
    const bool retry = !provisioning_.ok() && now - last_provision_us_ >= period_us;
    // Shrinking waits until the count has stayed lower for three periods.
    const bool shrink = wanted < requested_workers_ && now - lower_since_us_ >= 3 * period_us;
    // Workers busy when a shrink was asked for are stopped once idle: asked again.
    int32_t live_remote = 0;
    for (const auto& [id, worker] : state.workers()) {
      // Standbys are not the provisioner's to stop (their own StatefulSet on Kubernetes).
      live_remote += !worker.lost() && !IsLocalWorker(worker) && !worker.standby();
    }
    const bool surplus = wanted < live_remote && now - last_provision_us_ >= 3 * period_us;
    if (!(wanted > requested_workers_ || shrink || retry || surplus)) return false;
    last_provision_us_ = now;
    asking_workers_ = wanted;
    // Idle: holding no unfinished task, nor a finished one its consumer still reads.
    std::set<std::string> serving;
    for (int64_t id : unread) {
      if (const TaskState* t = state.FindTask(id); t != nullptr) serving.insert(t->worker_id());
    }
    for (const auto& [id, worker] : state.workers()) {
      if (worker.lost() || IsLocalWorker(worker) || serving.count(id) > 0) continue;
      if (state.UnfinishedTasksOfWorker(id).empty()) idle.push_back(id);
    }
    return true;
  });
  if (!ask) return;
  // Outside the locks: a command may take seconds.
  const absl::Status status = provisioner->Resize(wanted, idle);
  absl::MutexLock lock(&mu_);
  asking_workers_ = -1;
  if (status.ok()) {
    if (wanted != requested_workers_) {
      LOG(INFO) << "provisioner " << provisioner->Describe() << ": " << wanted << " workers";
    }
    requested_workers_ = wanted;
  } else {
    LOG(ERROR) << "provisioner " << provisioner->Describe() << ": " << status;
  }
  provisioning_ = status;
}

void WorkerProvisioning::FillStatus(GetStatusResponse* response) const {
  absl::MutexLock lock(&mu_);
  if (provisioner_ == nullptr) return;
  // A request in flight (a local provisioner starting workers, a slow command) is shown as the
  // count requested: its workers may already be registering.
  const int32_t requested = ShownRequestedWorkers();
  response->set_provisioning(absl::StrCat(
      provisioner_->Describe(), ": ", requested, " workers requested (", min_workers_, "-",
      max_workers_, ")", asking_workers_ >= 0 ? ", the request in flight" : "",
      provisioning_.ok() ? "" : absl::StrCat("; last request failed: ", provisioning_.message())));
  response->set_desired_workers(requested);
}

void WorkerProvisioning::CollectMetrics(MetricSamples& out) const {
  absl::MutexLock lock(&mu_);
  if (provisioner_ == nullptr) return;
  out.AddGauge("granary_dispatcher_desired_workers",
               "Remote workers the provisioner was last asked for (autoscaling's target).", {},
               ShownRequestedWorkers());
}

}  // namespace granary
