#include "dispatcher/reader_leases.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace granary {

ReaderLeases::ReaderLeases(DispatcherCore* core, Env* env, int64_t timeout_ms)
    : core_(core), env_(env), timeout_ms_(timeout_ms) {}

void ReaderLeases::SeeAll(const DispatcherState& state) {
  const uint64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  for (const auto& [id, job] : state.jobs()) {
    for (const ConsumerLease& lease : job.leases()) {
      if (!lease.reader_id().empty()) last_heard_[{id, lease.consumer(), lease.reader_id()}] = now;
    }
  }
}

absl::Status ReaderLeases::Claim(const ClaimConsumerRequest& request,
                                 ClaimConsumerResponse* response) {
  const std::string consumer_name =
      absl::StrCat("consumer ", request.consumer(), " of job ", request.job_id());
  std::string old_holder;
  const absl::Status claimed = core_->Propose([&](const DispatcherState& state)
                                                  -> absl::StatusOr<Update> {
    Update update;
    ClaimConsumerUpdate& claim = *update.mutable_claim_consumer();
    claim.set_job_id(request.job_id());
    claim.set_consumer(request.consumer());
    claim.set_reader_id(request.reader_id());
    claim.set_description(request.description());
    const JobState* job = state.FindJob(request.job_id());
    const ConsumerLease* lease =
        job == nullptr ? nullptr : DispatcherState::FindLease(*job, request.consumer());
    if (lease == nullptr || lease->reader_id().empty() ||
        lease->reader_id() == request.reader_id()) {
      return update;  // Free, or the reader's own (AlreadyExists, answered below).
    }
    const uint64_t now = env_->NowMicros();
    absl::MutexLock lock(&mu_);
    const auto heard = last_heard_.find({request.job_id(), request.consumer(), lease->reader_id()});
    const uint64_t last = heard == last_heard_.end() ? 0 : heard->second;
    const int64_t silent_ms = static_cast<int64_t>((now - last) / 1000);
    if (request.takeover() || silent_ms > timeout_ms_) {
      LOG(INFO) << consumer_name << ": reader " << request.reader_id() << " ("
                << request.description() << ") takes over from reader " << lease->reader_id()
                << " (" << lease->description() << ", generation " << lease->generation()
                << ", silent for " << silent_ms << " ms"
                << (request.takeover() ? ", explicit takeover)" : ", lease expired)");
      claim.set_takeover(true);
      old_holder = lease->reader_id();
      return update;
    }
    // Is the holder live? Only its heartbeats since this reader first asked can tell.
    PruneAsked(now);
    uint64_t& asked = first_asked_[{request.job_id(), request.consumer(), request.reader_id()}];
    if (asked == 0) asked = now;
    if (last <= asked) {
      return absl::UnavailableError(absl::StrCat(
          consumer_name, " is held by reader ", lease->reader_id(), " (", lease->description(),
          ", generation ", lease->generation(), "), not heard from since reader ",
          request.reader_id(), " first asked ", (now - asked) / 1000, " ms ago (silent for ",
          silent_ms, " ms): if it is gone, its lease expires in ", timeout_ms_ - silent_ms,
          " ms and a claim then is granted; ask again"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        consumer_name, " is read by reader ", lease->reader_id(), " (", lease->description(),
        ", generation ", lease->generation(), "), last heard from ", silent_ms,
        " ms ago; its lease expires after ", timeout_ms_, " ms of silence, in ",
        timeout_ms_ - silent_ms,
        " ms. One reader per consumer: if that reader is gone, wait for the expiry or take "
        "over explicitly (takeover=True in Python, --takeover for granary run), which fences "
        "it"));
  });
  // A retried claim of the holder (also after a dispatcher restart) is granted as it stands.
  if (!claimed.ok() && claimed.code() != absl::StatusCode::kAlreadyExists) return claimed;
  response->set_generation(core_->Read([&](const DispatcherState& state) -> int64_t {
    const JobState* job = state.FindJob(request.job_id());
    const ConsumerLease* lease =
        job == nullptr ? nullptr : DispatcherState::FindLease(*job, request.consumer());
    return lease == nullptr ? 0 : lease->generation();
  }));
  absl::MutexLock lock(&mu_);
  first_asked_.erase({request.job_id(), request.consumer(), request.reader_id()});
  if (!old_holder.empty()) last_heard_.erase({request.job_id(), request.consumer(), old_holder});
  last_heard_[{request.job_id(), request.consumer(), request.reader_id()}] = env_->NowMicros();
  return absl::OkStatus();
}

absl::Status ReaderLeases::Release(const ReleaseConsumerRequest& request) {
  Update update;
  ReleaseConsumerUpdate& release = *update.mutable_release_consumer();
  release.set_job_id(request.job_id());
  release.set_consumer(request.consumer());
  release.set_reader_id(request.reader_id());
  RETURN_IF_ERROR(core_->Propose(update));
  absl::MutexLock lock(&mu_);
  last_heard_.erase({request.job_id(), request.consumer(), request.reader_id()});
  return absl::OkStatus();
}

absl::Status ReaderLeases::CheckHolder(const JobState& job, int32_t consumer,
                                       const std::string& reader_id) {
  const ConsumerLease* lease = DispatcherState::FindLease(job, consumer);
  if (lease == nullptr) return absl::OkStatus();
  if (lease->reader_id().empty() || lease->reader_id() != reader_id) {
    return absl::AbortedError(absl::StrCat(
        "consumer ", consumer, " of job ", job.job_id(),
        lease->reader_id().empty()
            ? absl::StrCat(" was released (generation ", lease->generation(), ")")
            : absl::StrCat(" was taken over by reader ", lease->reader_id(), " (",
                           lease->description(), ", generation ", lease->generation(), ")"),
        ": reader ", reader_id.empty() ? "(no reader id)" : reader_id,
        " does not hold it and may not read it (fenced)"));
  }
  absl::MutexLock lock(&mu_);
  last_heard_[{job.job_id(), consumer, reader_id}] = env_->NowMicros();
  return absl::OkStatus();
}

void ReaderLeases::Forget(int64_t job_id) {
  absl::MutexLock lock(&mu_);
  last_heard_.erase(last_heard_.lower_bound({job_id, INT32_MIN, ""}),
                    last_heard_.lower_bound({job_id + 1, INT32_MIN, ""}));
  first_asked_.erase(first_asked_.lower_bound({job_id, INT32_MIN, ""}),
                     first_asked_.lower_bound({job_id + 1, INT32_MIN, ""}));
}

void ReaderLeases::PruneAsked(uint64_t now) {
  const uint64_t keep_us = 2 * static_cast<uint64_t>(timeout_ms_) * 1000;
  for (auto it = first_asked_.begin(); it != first_asked_.end();) {
    it = now - it->second > keep_us ? first_asked_.erase(it) : std::next(it);
  }
}

}  // namespace granary
