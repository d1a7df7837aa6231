// Which worker runs which task: the dispatcher's placement policy, as pure functions of the
// live workers and their loads so that DispatcherState::Apply stays deterministic.
#ifndef GRANARY_DISPATCHER_ASSIGNMENT_POLICY_H_
#define GRANARY_DISPATCHER_ASSIGNMENT_POLICY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/dispatcher_state.pb.h"

namespace granary {

// Workers for `num_tasks` new tasks of an epoch: round-robin over the live, non-standby
// workers in id order (standbys hold no tasks until one fails over to them). All "" (to be
// assigned when a worker registers) when there is none.
std::vector<std::string> AssignNewTasks(const std::map<std::string, WorkerState>& workers,
                                        int64_t num_tasks);

// The worker to take over a task from a lost one: an idle live standby if there is one
// (lowest id), else the least-loaded live worker (ties: lowest id); "" when none is alive.
// `loads` holds every live worker's number of unfinished tasks.
std::string ChooseTakeover(const std::map<std::string, WorkerState>& workers,
                           const std::map<std::string, int64_t>& loads);

}  // namespace granary

#endif  // GRANARY_DISPATCHER_ASSIGNMENT_POLICY_H_
