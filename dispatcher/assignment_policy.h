// Which worker runs which task: the dispatcher's placement policy, as pure functions of the
// live workers and their loads so that DispatcherState::Apply stays deterministic.
//
// Two kinds of worker (issue 17): remote workers run every job's remote tasks; a local worker
// (WorkerState.local_job_id) sits on one trainer's host and runs only the local tasks
// (TaskState.local) of that trainer's consumer of that job. A local task whose consumer has no
// live local worker runs on a remote one, so that losing the trainer's host's workers never
// stalls its epoch.
#ifndef GRANARY_DISPATCHER_ASSIGNMENT_POLICY_H_
#define GRANARY_DISPATCHER_ASSIGNMENT_POLICY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/dispatcher_state.pb.h"

namespace granary {

inline bool IsLocalWorker(const WorkerState& worker) { return worker.local_job_id() != 0; }

// Whether `worker` is local to `task`'s consumer.
inline bool IsLocalTo(const WorkerState& worker, const TaskState& task) {
  return worker.local_job_id() == task.job_id() && worker.local_consumer() == task.consumer();
}

// Workers for `num_tasks` new remote tasks of an epoch: round-robin over the live, non-standby
// remote workers in id order (standbys hold no tasks until one fails over to them). All "" (to
// be assigned when a worker registers) when there is none.
std::vector<std::string> AssignNewTasks(const std::map<std::string, WorkerState>& workers,
                                        int64_t num_tasks);

// The worker to run `task` (new, or taken over from a lost worker): for a local task, the
// least-loaded live worker local to its consumer (ties: lowest id), if any; otherwise an idle
// live remote standby (lowest id), else the least-loaded live remote worker (ties: lowest id);
// "" when none is alive. `loads` holds every live worker's number of unfinished tasks.
std::string ChooseWorker(const std::map<std::string, WorkerState>& workers,
                         const std::map<std::string, int64_t>& loads, const TaskState& task);

}  // namespace granary

#endif  // GRANARY_DISPATCHER_ASSIGNMENT_POLICY_H_
