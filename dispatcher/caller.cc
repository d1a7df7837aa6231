#include "dispatcher/caller.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace granary {

absl::Status CheckJobAccess(const JobState& job, const Caller& caller) {
  if (!caller.authenticated || job.owner().empty() || job.owner() == caller.client) {
    return absl::OkStatus();
  }
  const auto& readers = job.options().readers();
  if (std::find(readers.begin(), readers.end(), caller.client) != readers.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "job ", job.job_id(), job.name().empty() ? "" : absl::StrCat(" ('", job.name(), "')"),
      " belongs to client '", job.owner(), "', and client '", caller.client,
      "' is not among its readers"));
}

DispatcherStateProto VisibleState(const DispatcherStateProto& state, const Caller& caller) {
  if (!caller.authenticated || caller.admin) return state;
  DispatcherStateProto visible = state;
  visible.clear_datasets();
  visible.clear_jobs();
  visible.clear_epochs();
  visible.clear_tasks();
  visible.clear_caches();
  std::set<int64_t> jobs;
  std::set<std::string> datasets;
  for (const JobState& job : state.jobs()) {
    if (!CheckJobAccess(job, caller).ok()) continue;
    jobs.insert(job.job_id());
    datasets.insert(job.dataset_id());
    *visible.add_jobs() = job;
  }
  for (const DatasetState& dataset : state.datasets()) {
    if (datasets.count(dataset.dataset_id())) *visible.add_datasets() = dataset;
  }
  for (const EpochState& epoch : state.epochs()) {
    if (jobs.count(epoch.job_id())) *visible.add_epochs() = epoch;
  }
  for (const TaskState& task : state.tasks()) {
    if (jobs.count(task.job_id())) *visible.add_tasks() = task;
  }
  for (const CacheState& cache : state.caches()) {
    if (jobs.count(cache.put_job_id())) *visible.add_caches() = cache;
  }
  return visible;
}

}  // namespace granary
