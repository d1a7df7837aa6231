#include "dispatcher/worker_liveness.h"

#include "common/history_log.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace granary {

WorkerLiveness::WorkerLiveness(DispatcherCore* core, Env* env, int64_t timeout_ms)
    : core_(core), env_(env), timeout_ms_(timeout_ms) {}

void WorkerLiveness::SeeAll(const DispatcherState& state) {
  const uint64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  for (const auto& [id, worker] : state.workers()) {
    if (!worker.lost()) last_seen_[id] = now;
  }
}

void WorkerLiveness::Seen(const std::string& worker_id) {
  const uint64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  last_seen_[worker_id] = now;
}

std::optional<uint64_t> WorkerLiveness::LastSeen(const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  const auto seen = last_seen_.find(worker_id);
  if (seen == last_seen_.end()) return std::nullopt;
  return seen->second;
}

bool WorkerLiveness::HeardWithinLocked(const std::string& worker_id, uint64_t now) const {
  const auto seen = last_seen_.find(worker_id);
  return seen != last_seen_.end() &&
         now - seen->second <= static_cast<uint64_t>(timeout_ms_) * 1000;
}

bool WorkerLiveness::HeardWithin(const std::string& worker_id, uint64_t now) const {
  absl::MutexLock lock(&mu_);
  return HeardWithinLocked(worker_id, now);
}

std::vector<std::string> WorkerLiveness::LiveWorkers(const DispatcherState& state,
                                                     uint64_t now) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> live;
  for (const auto& [id, seen] : last_seen_) {
    const WorkerState* worker = state.FindWorker(id);
    if (worker != nullptr && !worker->lost() && HeardWithinLocked(id, now)) live.push_back(id);
  }
  return live;
}

absl::Status WorkerLiveness::CheckLiveness() {
  RETURN_IF_ERROR(core_->CheckUsable());
  const std::vector<Update> losses = core_->Read([&](const DispatcherState& state) {
    std::vector<Update> silent;
    const uint64_t now = env_->NowMicros();
    absl::MutexLock lock(&mu_);
    for (const auto& [id, worker] : state.workers()) {
      if (worker.lost() || last_seen_.count(id) == 0 || HeardWithinLocked(id, now)) continue;
      Update& update = silent.emplace_back();
      update.mutable_worker_lost()->set_worker_id(id);
      update.mutable_worker_lost()->set_incarnation(worker.incarnation());
    }
    return silent;
  });
  for (const Update& update : losses) {
    LOG(WARNING) << "worker " << update.worker_lost().worker_id() << " incarnation "
                 << update.worker_lost().incarnation() << " silent for over " << timeout_ms_
                 << " ms: declared lost, tasks reassigned";
    // A worker that re-registered meanwhile makes the state refuse the update (a stale
    // incarnation): nothing to do.
    const absl::Status proposed = core_->Propose(update);
    if (proposed.ok()) {
      GRANARY_HISTORY_RECORD("worker_lost", "ok", "worker=", update.worker_lost().worker_id(),
                             " incarnation=", update.worker_lost().incarnation());
    }
    if (absl::IsUnavailable(proposed)) return proposed;
  }
  return absl::OkStatus();
}

}  // namespace granary
