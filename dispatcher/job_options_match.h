// Whether a request to open an existing job agrees with the job (issue 34): every option that
// defines its data or its policies must be what the job has — an option that differs is
// refused, never ignored.
#ifndef GRANARY_DISPATCHER_JOB_OPTIONS_MATCH_H_
#define GRANARY_DISPATCHER_JOB_OPTIONS_MATCH_H_

#include "absl/status/status.h"
#include "proto/dispatcher_state.pb.h"

namespace granary {

// OK when `requested` (GetOrCreateJobRequest.options of an open of `job`) has every JobOptions
// field as the job has it; else InvalidArgument naming the first field that differs and both
// values: "job 'resnet' has num_consumers 2; this request gives 4". Compared as the job was
// created: num_consumers 0 is 1 (CreateJobUpdate makes it so), `readers` is a set, and
// num_worker_slots / num_local_slots are those the job was created with
// (JobState.created_num_worker_slots), not those scaling steps set since — so a trainer
// restarted with its original spec still opens the job — and are not compared for a job of a
// snapshot that predates them.
absl::Status CheckJobOptionsMatch(const JobState& job, const JobOptions& requested);

}  // namespace granary

#endif  // GRANARY_DISPATCHER_JOB_OPTIONS_MATCH_H_
