// The bounds the dispatcher puts on everything a client or worker can ask it to hold: every
// count, size and id in a request is checked against these before the request's update is
// journaled (issue 13, defect 1: a journaled update must always apply), and DispatcherState
// checks them again when it applies a record, so that a record journaled by an older version
// without the checks replays as a refused no-op instead of an exception.
//
// The limits are generous for any training job (thousands of trainer processes, thousands of
// workers) and small enough that the state one request implies stays in the megabytes.
#ifndef GRANARY_DISPATCHER_REQUEST_LIMITS_H_
#define GRANARY_DISPATCHER_REQUEST_LIMITS_H_

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/dispatcher_state.pb.h"

namespace granary {

// Per-client limits (SECURITY.md; flags of `granary dispatcher`): each refusal is
// ResourceExhausted naming the flag. The job and reader limits count what a client owns, so
// they apply to authenticated clients (an unauthenticated dispatcher has no owners).
struct ClientLimits {
  // Live (not retired) jobs one client owns (--max_jobs_per_client).
  int64_t jobs = 64;
  // Consumers summed over the live jobs one client owns: the trainer processes it may have
  // reading at once (--max_readers_per_client).
  int64_t readers = 1024;
  // A registered pipeline's serialized size and op count, for every client
  // (--max_pipeline_bytes, --max_pipeline_ops).
  int64_t pipeline_bytes = 4 << 20;
  int64_t pipeline_ops = 1024;
};

// Trainer processes of one job.
inline constexpr int32_t kMaxConsumers = 4096;
// Tasks per consumer and epoch (JobOptions.num_worker_slots).
inline constexpr int32_t kMaxWorkerSlots = 4096;
// Tasks of one epoch: consumers x slots. An epoch whose slots come from the number of live
// workers (num_worker_slots 0) gets at most this many tasks: slots are capped at
// kMaxTasksPerEpoch / consumers.
inline constexpr int64_t kMaxTasksPerEpoch = 65536;
// Splits handed out by one GetSplits (a larger `max` is answered with this many).
inline constexpr int64_t kMaxSplitsPerLease = 4096;
// A worker heartbeat's answer carries at most this many task definitions and this many bytes
// of pipelines (more = true then: the worker asks again at once). One pipeline larger than
// the budget is sent alone.
inline constexpr int kMaxTaskDefsPerHeartbeat = 4096;
inline constexpr int64_t kMaxHeartbeatPipelineBytes = 16 << 20;
// Tasks per consumer (remote and local together) a scaling step may set for a job of
// `consumers` consumers: at most kMaxWorkerSlots, and no more than kMaxTasksPerEpoch over all
// its consumers.
inline int64_t MaxWorkerSlots(int32_t consumers) {
  return std::min<int64_t>(kMaxWorkerSlots, kMaxTasksPerEpoch / std::max(consumers, 1));
}
// OK when a scaling step to `remote` remote and `local` local tasks per consumer is in range
// for a job of `consumers` consumers: each at least 0, together at least 1 and at most
// MaxWorkerSlots(consumers). Else InvalidArgument naming the job and the counts.
absl::Status ValidateScaling(int64_t job_id, int64_t remote, int64_t local, int32_t consumers);
// Bytes of a job name, a worker id and a worker address.
inline constexpr int64_t kMaxNameBytes = 1024;
// Elements a job's trainers must have received in a policy period before its policy decides.
inline constexpr int64_t kMinElementsPerDecision = 5;
// Bytes of a scaling step's reason kept in the job's state (JobState.last_scaling).
inline constexpr int64_t kMaxScalingReasonBytes = 1024;
// Clients a job's ACL may name (JobOptions.readers).
inline constexpr int kMaxJobReaders = 64;

// OK when `options` are within the limits above; else InvalidArgument naming the field, its
// value and the limit.
absl::Status ValidateJobOptions(const JobOptions& options);

// OK when `value` (a job name, worker id or address; `what` names it) is at most kMaxNameBytes.
absl::Status ValidateName(absl::string_view what, absl::string_view value);

// Characters of a worker's shared-memory socket nonce (RegisterWorkerRequest.shm_nonce).
inline constexpr int kMaxShmNonceChars = 32;
// OK when `nonce` is empty (no shared memory) or up to kMaxShmNonceChars lowercase hex digits;
// else InvalidArgument naming the nonce and the rule.
absl::Status ValidateShmNonce(absl::string_view nonce);

}  // namespace granary

#endif  // GRANARY_DISPATCHER_REQUEST_LIMITS_H_
