#include "dispatcher/state_invariants.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/cache_policy.h"
#include "common/deterministic_serialization.h"
#include "common/status_macros.h"
#include "dispatcher/assignment_policy.h"
#include "dispatcher/consumer_shares.h"
#include "dispatcher/request_limits.h"

namespace granary {
namespace {

template <typename... Args>
absl::Status Violation(const Args&... args) {
  return absl::DataLossError(absl::StrCat("dispatcher state is inconsistent: ", args...));
}

absl::Status CheckJob(const DispatcherState& state, const JobState& job) {
  if (job.job_id() < 1 || job.job_id() >= state.next_job_id()) {
    return Violation("job ", job.job_id(), " is not below next_job_id ", state.next_job_id());
  }
  if (state.FindDataset(job.dataset_id()) == nullptr) {
    return Violation("job ", job.job_id(), " reads dataset ", job.dataset_id(),
                     ", which does not exist");
  }
  if (const absl::Status valid = ValidateJobOptions(job.options()); !valid.ok()) {
    return Violation("job ", job.job_id(), ": ", valid.message());
  }
  if (job.options().num_consumers() < 1) return Violation("job ", job.job_id(), " has no consumer");
  if (job.has_cache_decision() && job.cache_decision().cache_point() != 0) {
    const std::vector<int> marks = MarkPoints(state.FindDataset(job.dataset_id())->pipeline());
    if (job.options().cache_policy() != CACHE_AUTO ||
        std::find(marks.begin(), marks.end(), job.cache_decision().cache_point()) == marks.end()) {
      return Violation("job ", job.job_id(), " decided to cache at op ",
                       job.cache_decision().cache_point(), ", which is not one of its marks");
    }
  }
  if (!job.name().empty() && state.FindJobByName(job.owner(), job.name()) != &job) {
    return Violation("job name '", job.name(), "' is used twice by owner '", job.owner(), "'");
  }
  std::set<int32_t> leased;
  for (const ConsumerLease& lease : job.leases()) {
    if (lease.consumer() < 0 || lease.consumer() >= job.options().num_consumers() ||
        !leased.insert(lease.consumer()).second) {
      return Violation("job ", job.job_id(), " of ", job.options().num_consumers(),
                       " consumers lists a lease of consumer ", lease.consumer(),
                       " that is out of range or listed twice");
    }
    if (lease.generation() < 1) {
      return Violation("job ", job.job_id(), " consumer ", lease.consumer(),
                       " has a lease of generation ", lease.generation());
    }
    if (lease.reader_id().empty() && !lease.description().empty()) {
      return Violation("job ", job.job_id(), " consumer ", lease.consumer(),
                       " has a released lease that describes a holder");
    }
  }
  for (int64_t e = 0; e < job.epochs_started(); ++e) {
    if (state.FindEpoch(job.job_id(), e) == nullptr) {
      return Violation("job ", job.job_id(), " started ", job.epochs_started(),
                       " epochs but epoch ", e, " does not exist");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTask(const DispatcherState& state, const TaskState& task) {
  if (task.task_id() < 1 || task.task_id() >= state.next_task_id()) {
    return Violation("task ", task.task_id(), " is not below next_task_id ", state.next_task_id());
  }
  // That its epoch lists it is checked with the epochs.
  if (state.FindEpoch(task.job_id(), task.epoch()) == nullptr) {
    return Violation("task ", task.task_id(), " belongs to job ", task.job_id(), " epoch ",
                     task.epoch(), ", which does not exist");
  }
  if (!task.worker_id().empty()) {
    const WorkerState* worker = state.FindWorker(task.worker_id());
    if (worker == nullptr || worker->lost()) {
      return Violation("task ", task.task_id(), " is assigned to worker ", task.worker_id(),
                       ", which is ", worker == nullptr ? "unknown" : "lost");
    }
    if (task.generation() < 1) {
      return Violation("task ", task.task_id(), " is assigned at generation ", task.generation());
    }
    if (IsLocalWorker(*worker) && !(task.local() && IsLocalTo(*worker, task))) {
      return Violation("task ", task.task_id(), " of job ", task.job_id(), " consumer ",
                       task.consumer(), " runs on worker ", task.worker_id(),
                       ", which is local to job ", worker->local_job_id(), " consumer ",
                       worker->local_consumer());
    }
  }
  if (task.finished() && task.num_elements() < 0) {
    return Violation("task ", task.task_id(), " finished with ", task.num_elements(), " elements");
  }
  if (task.read_stride() > 1 &&
      (task.read_offset() < 0 || task.read_offset() >= task.read_stride())) {
    return Violation("task ", task.task_id(), " reads offset ", task.read_offset(),
                     " of stride ", task.read_stride());
  }
  if (task.copy_of() != 0) {
    const TaskState* original = state.FindTask(task.copy_of());
    if (original == nullptr || original->job_id() != task.job_id() ||
        original->epoch() != task.epoch() || !task.draining() ||
        original->leased_size() != task.leased_size()) {
      return Violation("task ", task.task_id(), " is a copy of task ", task.copy_of(),
                       ", which is not a task of its epoch holding the same splits, or it leases");
    }
  }
  return absl::OkStatus();
}

// An equal-shares epoch's shares partition its plan, the splits each has to lease ascending,
// with the splits leased from them adding up to next_split.
absl::Status CheckShares(const DispatcherState& state, const std::string& name,
                         const EpochState& epoch) {
  if (epoch.shares_size() == 0) return absl::OkStatus();
  // Dealt for the consumers the job had then (an elastic resume changes the count later).
  for (int64_t id : epoch.task_ids()) {
    const TaskState* task = state.FindTask(id);
    if (task != nullptr && task->consumer() >= epoch.shares_size()) {
      return Violation(name, " has ", epoch.shares_size(), " shares, but task ", id,
                       " reads for consumer ", task->consumer());
    }
  }
  std::vector<int64_t> dealt;
  int64_t leased = 0;
  for (int c = 0; c < epoch.shares_size(); ++c) {
    const ConsumerShare& share = epoch.shares(c);
    if (share.leased() < 0 || share.leased() > share.plan_index_size() ||
        !std::is_sorted(share.plan_index().begin() + share.leased(), share.plan_index().end())) {
      return Violation(name, " consumer ", c, "'s share is out of order or leased ", share.leased(),
                       " of its ", share.plan_index_size(), " splits");
    }
    dealt.insert(dealt.end(), share.plan_index().begin(), share.plan_index().end());
    leased += share.leased();
  }
  std::sort(dealt.begin(), dealt.end());
  for (int64_t i = 0; i < static_cast<int64_t>(dealt.size()); ++i) {
    if (dealt[i] != i || dealt.size() != static_cast<size_t>(epoch.plan_size())) {
      return Violation(name, "'s shares deal ", dealt.size(), " indices for ", epoch.plan_size(),
                       " splits: not each split once");
    }
  }
  if (leased != epoch.next_split()) {
    return Violation(name, "'s shares leased ", leased, " splits, but next_split is ",
                     epoch.next_split());
  }
  return absl::OkStatus();
}

absl::Status CheckEpoch(const DispatcherState& state, const EpochState& epoch) {
  const std::string name = absl::StrCat("job ", epoch.job_id(), " epoch ", epoch.epoch());
  const JobState* job = state.FindJob(epoch.job_id());
  if (job == nullptr) return Violation(name, " belongs to no job");
  if (epoch.epoch() < 0 || epoch.epoch() >= job->epochs_started()) {
    return Violation(name, " exists but the job started ", job->epochs_started(), " epochs");
  }
  if (epoch.next_split() < 0 || epoch.next_split() > epoch.plan_size()) {
    return Violation(name, " leased ", epoch.next_split(), " of its ", epoch.plan_size(),
                     " splits");
  }
  std::set<std::pair<int32_t, int32_t>> slots;
  std::vector<std::string> leased;
  bool all_finished = true;
  for (int64_t id : epoch.task_ids()) {
    const TaskState* task = state.FindTask(id);
    if (task == nullptr || task->job_id() != epoch.job_id() || task->epoch() != epoch.epoch()) {
      return Violation(name, " lists task ", id, ", which is not one of its tasks");
    }
    if (task->consumer() < 0 || task->consumer() >= job->options().num_consumers() ||
        !slots.emplace(task->consumer(), task->slot()).second) {
      return Violation(name, " task ", id, " has consumer ", task->consumer(), " slot ",
                       task->slot(), ": out of range or taken twice");
    }
    // A copy holds its original's splits again (elastic resume): the plan leased them once.
    if (task->copy_of() == 0) {
      for (const Split& split : task->leased()) leased.push_back(SerializeDeterministically(split));
    }
    all_finished = all_finished && task->finished();
  }
  RETURN_IF_ERROR(CheckShares(state, name, epoch));
  std::vector<std::string> planned;
  for (int64_t i : LeasedPlanIndices(epoch)) {
    planned.push_back(SerializeDeterministically(epoch.plan(i)));
  }
  std::sort(leased.begin(), leased.end());
  std::sort(planned.begin(), planned.end());
  if (leased != planned) {
    return Violation(name, ": its tasks hold ", leased.size(), " leased splits that are not the ",
                     planned.size(), " the plan leased (a split leased twice, or lost)");
  }
  if (epoch.finished() != (all_finished && epoch.task_ids_size() > 0)) {
    return Violation(name, " is marked ", epoch.finished() ? "" : "not ", "finished, but ",
                     all_finished ? "all" : "not all", " of its tasks are");
  }
  const EpochCache& cache = epoch.cache();
  if (!epoch.finished() && cache.mode() != EpochCache::COMPUTE &&
      state.FindCache(cache.cache_key()) == nullptr) {
    return Violation(name, " uses cache ", cache.cache_key(), ", which does not exist");
  }
  return absl::OkStatus();
}

absl::Status CheckCache(const DispatcherState& state, const CacheState& cache) {
  const EpochState* put = state.FindEpoch(cache.put_job_id(), cache.put_epoch());
  if (!cache.complete()) {
    if (put == nullptr || put->finished() || put->cache().mode() != EpochCache::PUT ||
        put->cache().cache_key() != cache.cache_key()) {
      return Violation("cache ", cache.cache_key(), " is incomplete but job ", cache.put_job_id(),
                       " epoch ", cache.put_epoch(), " is not writing it");
    }
    return absl::OkStatus();
  }
  if (put == nullptr) return absl::OkStatus();  // The Put job was retired.
  std::vector<std::string> expected;
  int64_t elements = 0;
  for (int64_t id : put->task_ids()) {
    for (const CacheChunk& chunk : state.FindTask(id)->cache_chunks()) {
      expected.push_back(SerializeDeterministically(chunk));
      elements += chunk.num_elements();
    }
  }
  std::vector<std::string> manifest;
  int64_t bytes = 0;
  for (const CacheChunk& chunk : cache.chunks()) {
    manifest.push_back(SerializeDeterministically(chunk));
    bytes += chunk.bytes();
  }
  if (manifest != expected || elements != cache.num_elements() || bytes != cache.bytes()) {
    return Violation("cache ", cache.cache_key(), ": its manifest is not the chunks of job ",
                     cache.put_job_id(), " epoch ", cache.put_epoch(), "'s tasks");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckStateInvariants(const DispatcherState& state) {
  for (const auto& [id, job] : state.jobs()) RETURN_IF_ERROR(CheckJob(state, job));
  // Tasks before epochs: an epoch's check reads its tasks' fields.
  for (const auto& [id, task] : state.tasks()) RETURN_IF_ERROR(CheckTask(state, task));
  size_t listed = 0;
  for (const auto& [key, epoch] : state.epochs()) {
    RETURN_IF_ERROR(CheckEpoch(state, epoch));
    listed += epoch.task_ids_size();
  }
  // Each epoch lists only its own tasks, each once: the counts match if every task is listed.
  if (listed != state.tasks().size()) {
    return Violation("the epochs list ", listed, " tasks, but ", state.tasks().size(), " exist");
  }
  for (const auto& [key, cache] : state.caches()) RETURN_IF_ERROR(CheckCache(state, cache));
  // The index by worker agrees with the tasks.
  std::map<std::string, std::vector<int64_t>> unfinished;
  for (const auto& [id, task] : state.tasks()) {
    if (!task.finished()) unfinished[task.worker_id()].push_back(id);
  }
  unfinished[""];
  for (const auto& [id, worker] : state.workers()) unfinished[id];
  for (const auto& [worker, ids] : unfinished) {
    std::vector<int64_t> indexed;
    for (const TaskState* task : state.UnfinishedTasksOfWorker(worker)) {
      indexed.push_back(task->task_id());
    }
    if (indexed != ids) {
      return Violation("the index lists ", indexed.size(), " unfinished tasks of worker '", worker,
                       "', the tasks say ", ids.size());
    }
  }
  for (const auto& [id, worker] : state.workers()) {
    if (worker.incarnation() < 1) {
      return Violation("worker ", id, " has incarnation ", worker.incarnation());
    }
  }
  return absl::OkStatus();
}

}  // namespace granary
