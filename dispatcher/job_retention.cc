#include "dispatcher/job_retention.h"

#include <utility>

#include "common/status_macros.h"
#include "glog/logging.h"

namespace granary {

JobRetention::JobRetention(DispatcherCore* core, Env* env, int64_t retention_ms,
                           OnRetired on_retired)
    : core_(core), env_(env), retention_ms_(retention_ms), on_retired_(std::move(on_retired)) {}

void JobRetention::MarkAllActive(const DispatcherState& state) {
  const uint64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  for (const auto& [id, job] : state.jobs()) last_active_[id] = now;
}

void JobRetention::MarkActive(int64_t job_id) {
  const uint64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  last_active_[job_id] = now;
}

std::optional<uint64_t> JobRetention::LastActive(int64_t job_id) const {
  absl::MutexLock lock(&mu_);
  const auto active = last_active_.find(job_id);
  if (active == last_active_.end()) return std::nullopt;
  return active->second;
}

absl::Status JobRetention::RetireIdleJobs() {
  RETURN_IF_ERROR(core_->CheckUsable());
  // Job ids and their tasks.
  using IdleJobs = std::vector<std::pair<int64_t, std::vector<int64_t>>>;
  const IdleJobs idle = core_->Read([&](const DispatcherState& state) {
    IdleJobs found;
    const uint64_t now = env_->NowMicros();
    const uint64_t retention = static_cast<uint64_t>(retention_ms_) * 1000;
    absl::MutexLock lock(&mu_);
    for (const auto& [id, job] : state.jobs()) {
      auto active = last_active_.find(id);
      if (active != last_active_.end() && now - active->second <= retention) continue;
      std::vector<int64_t> tasks;
      bool finished = true;
      for (int64_t e = 0; e < job.epochs_started() && finished; ++e) {
        const EpochState* epoch = state.FindEpoch(id, e);
        finished = epoch != nullptr && epoch->finished();
        if (finished) tasks.insert(tasks.end(), epoch->task_ids().begin(), epoch->task_ids().end());
      }
      if (finished) found.emplace_back(id, std::move(tasks));
    }
    return found;
  });
  for (const auto& [job_id, tasks] : idle) {
    Update update;
    update.mutable_retire_job()->set_job_id(job_id);
    // A job that started a new epoch meanwhile makes the state refuse the update: it stays.
    const absl::Status proposed =
        core_->Propose(update, [&, job = job_id, &tasks = tasks](const DispatcherState&) {
          LOG(INFO) << "job " << job << " idle for over " << retention_ms_
                    << " ms with every epoch finished: retired";
          {
            absl::MutexLock lock(&mu_);
            last_active_.erase(job);
          }
          on_retired_(job, tasks);
        });
    if (absl::IsUnavailable(proposed)) return proposed;
  }
  return absl::OkStatus();
}

}  // namespace granary
