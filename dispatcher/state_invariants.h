// The invariants of the dispatcher's durable state, in the spirit of LogCabin's
// RaftConsensusInvariants: what must hold after every Apply, whatever the updates were.
//
// Checked on every snapshot load (an inconsistent snapshot is DataLoss, never an exception
// from a lookup later) and, in tests, after every Apply (DispatcherOptions.check_invariants).
#ifndef GRANARY_DISPATCHER_STATE_INVARIANTS_H_
#define GRANARY_DISPATCHER_STATE_INVARIANTS_H_

#include "absl/status/status.h"
#include "dispatcher/dispatcher_state.h"

namespace granary {

// OK when `state` is consistent; else DataLoss naming the first violation found:
//  - ids: every job and task id is below next_job_id / next_task_id; job names are unique;
//  - references resolve: a job's dataset, an epoch's job and tasks, a task's epoch (which lists
//    it) and worker (known, and not lost), an unfinished caching epoch's cache (a finished
//    one's may have been evicted since);
//  - jobs: options within the request limits, at least one consumer, epochs 0..epochs_started-1
//    exist; every (consumer, slot) of an epoch has one task, of a consumer the job has;
//  - splits: the tasks of an epoch hold exactly the plan's first next_split splits between
//    them, each once (no split leased twice in an epoch, none lost);
//  - an epoch is finished exactly when all its tasks are; a finished task has >= 0 elements and
//    an assigned task a generation >= 1;
//  - the index of unfinished tasks by worker agrees with the tasks;
//  - caches: an incomplete cache is being written by an unfinished PUT epoch; a complete cache's
//    manifest is the chunks of its Put epoch's tasks, in task order, if that job still exists,
//    and its bytes theirs; a cache_policy auto job's decision caches at one of its marks or
//    nowhere.
absl::Status CheckStateInvariants(const DispatcherState& state);

}  // namespace granary

#endif  // GRANARY_DISPATCHER_STATE_INVARIANTS_H_
