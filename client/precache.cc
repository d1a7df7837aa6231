#include "client/precache.h"

#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace granary {
namespace {

// Reads `reader` to its end; the number of elements.
absl::StatusOr<int64_t> Drain(EpochReader& reader) {
  int64_t elements = 0;
  ReceivedElement element;
  for (bool end = false;;) {
    RETURN_IF_ERROR(reader.Next(&element, &end));
    if (end) return elements;
    ++elements;
  }
}

}  // namespace

std::string PrecacheJobName(const std::string& dataset_id, JobCachePolicy policy, uint64_t seed) {
  return absl::StrCat("precache/", JobCachePolicyName(policy), "/", seed, "/", dataset_id);
}

absl::StatusOr<PrecacheResult> RunPrecache(const PrecacheCalls& calls, absl::Duration timeout,
                                           absl::Duration poll, absl::Duration reread_after) {
  const absl::Time deadline = absl::Now() + timeout;
  PrecacheResult result;
  // Epochs of the precache job this call read to their end, and when.
  std::map<int64_t, absl::Time> read;
  for (bool first_look = true;; first_look = false) {
    absl::StatusOr<GetOrCreateJobResponse> job = calls.look();
    if (!job.ok()) return job.status();
    if (job->cache_key().empty()) {
      return absl::InvalidArgumentError(
          "precache: the job would cache nothing (cache_policy compute, or a pipeline without "
          "the mark to cache at)");
    }
    result.cache_key = job->cache_key();
    const std::string what = absl::StrCat("precache: cache ", job->cache_key());
    int64_t epoch = -1;  // the epoch to read this round; -1: wait
    if (!job->has_cache()) {
      epoch = job->epochs_started();
    } else if (job->cache().invalid()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " is invalid (", job->cache().invalid_reason(),
                       "); the dispatcher remakes it once it is evicted"));
    } else if (job->cache().complete()) {
      result.already_complete = first_look;
      result.num_elements = job->cache().num_elements();
      return result;
    } else if (job->cache().put_job_id() == job->job_id()) {
      const auto it = read.find(job->cache().put_epoch());
      if (it == read.end() || absl::Now() - it->second >= reread_after) {
        epoch = job->cache().put_epoch();
      }
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": not complete after ", absl::FormatDuration(timeout)));
    }
    if (epoch < 0) {
      absl::SleepFor(poll);
      continue;
    }
    absl::StatusOr<std::unique_ptr<EpochReader>> reader = calls.read_epoch(job->job_id(), epoch);
    if (!reader.ok()) return reader.status();
    absl::StatusOr<int64_t> elements = Drain(**reader);
    if (!elements.ok()) {
      return absl::Status(elements.status().code(),
                          absl::StrCat(what, ": reading epoch ", epoch,
                                       " of the precache job: ", elements.status().message()));
    }
    result.elements_read += *elements;
    read[epoch] = absl::Now();
  }
}

}  // namespace granary
