// WorkerImpl: a worker's logic, in plain C++ (the gRPC face is grpc_worker_service.h).
//
// It registers with the dispatcher (a new incarnation of its worker id), then heartbeats every
// `heartbeat_interval_ms`: the answer lists the tasks it should run, and it starts a TaskRunner
// for each new (task, generation), replaces a runner whose task came back at another
// generation, and stops runners of tasks no longer listed (taken away, or read to the end by
// their consumer). Runners produce only once a client asks (TaskRunner), so a listed task costs
// nothing until then. A dispatcher that does not answer stalls nothing: the
// runners keep serving and leasing retries with backoff; a dispatcher that no longer knows this
// incarnation (it declared it lost) makes the worker register again.
//
// A standby worker is registered as such and holds no task until the dispatcher moves one to it.
// A local worker (issue 17; `local_job_id`) runs on a trainer's host and gets only the local
// tasks of that trainer's consumer. A worker a provisioner started (`take_over_load`) takes a
// task from the most loaded worker when it joins.
// Thread-safe.
#ifndef GRANARY_WORKER_WORKER_IMPL_H_
#define GRANARY_WORKER_WORKER_IMPL_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "obs/metrics.h"
#include "pipeline/core/autotuner.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/udf.h"
#include "proto/worker.pb.h"
#include "security/capability.h"
#include "transport/element_server.h"
#include "transport/elements_reply.h"
#include "worker/dispatcher_connection.h"
#include "worker/task_runner.h"

namespace granary {

// How a worker serves clients on its own host (Pecan's "local" workers, DESIGN.md §9).
enum class LocalTransport {
  kAuto,  // shared memory when this host offers it (memfd, Unix sockets), else TCP
  kShm,   // shared memory, or the worker does not start
  kTcp,   // every client over TCP
};

// Parses "auto" | "shm" | "tcp"; InvalidArgument naming the value otherwise.
absl::StatusOr<LocalTransport> ParseLocalTransport(absl::string_view name);

struct WorkerOptions {
  std::string worker_id;
  // The address clients reach this worker at, as registered with the dispatcher.
  std::string address;
  // With shared memory, element images live in memfd segments and a client on this host maps
  // them instead of receiving their bytes (transport/shm_server.h); remote clients get TCP.
  LocalTransport local_transport = LocalTransport::kAuto;
  // With shared memory: elements at least this large go by segment (smaller ones by bytes:
  // each pooled segment is a memfd, a file descriptor of the worker's).
  int64_t shm_min_bytes = kPooledBytes;
  bool standby = false;
  // Non-zero: local to consumer `local_consumer` of job `local_job_id` (RegisterWorkerRequest).
  int64_t local_job_id = 0;
  int32_t local_consumer = 0;
  bool take_over_load = false;
  // A real-time wait between heartbeats (it ends early when the worker stops); the worker's
  // other timers (registration deadline, back-offs) run on runner.env's clock.
  int heartbeat_interval_ms = 200;
  // If > 0, every parallel_map of the pipelines this worker runs uses this many threads.
  int parallel_map_threads = 0;
  // How the pipelines' tuned stages (num_threads 0, buffer_size 0) are tuned: their memory
  // budget and bounds (pipeline/core/autotuner.h).
  AutotuneOptions autotune;
  // Where tasks' checkpoints go; empty = none. The worker opens the store when it registers,
  // for the dispatcher's cluster (CheckpointOptions.owner): runner.checkpoints is its to set.
  std::string checkpoint_dir;
  int checkpoints_kept = 3;
  // A pipeline no task here runs any more is kept this long, with its UDFs' state — a Python
  // UDF's helper processes, warm with the function's imports — for the next epoch's tasks; then
  // it is dropped (the dispatcher sends it again when a task needs it). 0: dropped at once.
  int64_t idle_pipeline_ms = 60000;
  TaskRunnerOptions runner;
  // Serve GetElements only against a valid capability (security/capability.h) under the key
  // the dispatcher sends at registration and heartbeat: on with TLS (SECURITY.md).
  bool require_capabilities = false;
  // Must outlive the worker.
  const PipelineRegistries* registries = nullptr;
};

// Heartbeats are at least this far apart (those on demand and the loop's).
inline constexpr int64_t kMinHeartbeatIntervalMs = 10;

class WorkerImpl {
 public:
  // Starts serving shared memory (per options.local_transport; FailedPrecondition when kShm and
  // this host cannot), registers (retrying up to `register_timeout_ms` while the dispatcher is
  // unreachable, or refuses the id because a live worker holds it at another address: a worker
  // restarted at a new address gets it once the old registration has timed out, a second worker
  // with the same id never does and fails with AlreadyExists naming the other's address) and
  // starts heartbeating.
  static absl::StatusOr<std::unique_ptr<WorkerImpl>> Start(
      const WorkerOptions& options, std::unique_ptr<DispatcherConnection> dispatcher,
      int64_t register_timeout_ms = 30000);
  ~WorkerImpl();

  //   NotFound: the task does not run here; FailedPrecondition: it runs at another generation.
  absl::Status GetElements(const GetElementsRequest& request, ElementsReply* reply);
  // For /metrics: the gauges of the moment — tasks held, each task's window fill — from
  // GetStatus (the counters are WorkerMetrics', updated as things happen).
  void CollectMetrics(MetricSamples& out) const;
  // The worker's status with every task it holds, or — given a `viewer` client that is not one
  // of the dispatcher's admin_clients — only the tasks whose TaskDef.readers name it (or are
  // empty: a job without owner), so a client sees no other client's tasks. The totals (of
  // checkpoints, the buffer pool) count every task.
  absl::Status GetStatus(GetWorkerStatusResponse* response,
                         const std::optional<std::string>& viewer = std::nullopt) const;

  int64_t incarnation() const;

 private:
  // Keeps the key of a dispatcher answer (an empty one changes nothing).
  void UpdateCapabilityKey(const std::string& bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK unless options_.require_capabilities and `capability` is not the dispatcher's for
  // `def`'s job, task, consumer and generation (PermissionDenied), or no key is known yet
  // (Unavailable).
  absl::Status CheckCapability(const TaskDef& def, const std::string& capability)
      ABSL_LOCKS_EXCLUDED(mu_);
  WorkerImpl(const WorkerOptions& options, std::unique_ptr<DispatcherConnection> dispatcher);
  absl::Status Register();
  // One heartbeat: reconciles the runners with the dispatcher's list.
  absl::Status Heartbeat();
  void HeartbeatLoop();
  // Whether the last heartbeat's answer held tasks back (WorkerHeartbeatResponse.more).
  bool MoreTasks() const ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<TaskRunner> FindRunner(int64_t task_id) const ABSL_LOCKS_EXCLUDED(mu_);
  // Why a task assigned here cannot run here (its code, "task N cannot run on worker W: …"), or
  // nullopt when it can (or is not assigned here).
  std::optional<absl::Status> UnbuildableTaskError(int64_t task_id) const ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::shared_ptr<const Pipeline>> PipelineFor(const TaskDef& def)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The offer of task `def`'s trainer-side tail to its reader (TrainerTailOffer); nullopt when
  // its pipeline (which pipelines_ holds) has none or its job keeps the tail on the worker.
  std::optional<TrainerTailOffer> TrainerTailOfferFor(const TaskDef& def)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReportFinished(const TaskDef& def, int64_t num_elements,
                      const std::vector<CacheChunk>& cache_chunks);
  // A heartbeat's CacheProfileRequest: profiled on profile_thread_ unless a profile runs already
  // (the dispatcher asks again while it has no report). Called by heartbeats only.
  void StartCacheProfile(const CacheProfileRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // Profiles the pipeline (cache/cache_profiler.h) and reports it with ReportCacheProfile.
  void ProfileCache(const CacheProfileRequest& request);

  const WorkerOptions options_;
  const std::unique_ptr<DispatcherConnection> dispatcher_;

  // Serializes heartbeats; held before mu_.
  absl::Mutex heartbeat_mu_;
  // On options_.runner.env's clock; none before the first heartbeat.
  std::optional<uint64_t> last_heartbeat_micros_ ABSL_GUARDED_BY(heartbeat_mu_);

  // The element transport the worker serves (transport/transport_registry.h): "shm" per
  // options_.local_transport, else "tcp". Set by Start; declared before runners_, which hold
  // images of its pool.
  std::unique_ptr<ElementServer> element_server_;

  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(heartbeat_mu_);
  int64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  // The dispatcher's cluster, from the last registration. Declared before runners_: the
  // runners use the store.
  std::string cluster_id_ ABSL_GUARDED_BY(mu_);
  // The dispatcher's capability key, from its latest answer that had one.
  std::optional<CapabilityKey> capability_key_ ABSL_GUARDED_BY(mu_);
  // The dispatcher's admin_clients, from its latest answer: GetStatus shows them every task.
  std::vector<std::string> admin_clients_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<CheckpointStore> checkpoints_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::shared_ptr<TaskRunner>> runners_ ABSL_GUARDED_BY(mu_);
  // Checkpoint counters of the runners already dropped (GetStatus adds the live ones).
  GetWorkerStatusResponse retired_totals_ ABSL_GUARDED_BY(mu_);
  // Compiled pipelines by TaskDef.pipeline_key (a dataset's pipeline, or an epoch's cache
  // rewrite of it; reordered by AutoOrder, under a key of its own, for a job with auto_order):
  // those the runners use, and those no runner has used for less than idle_pipeline_ms.
  // Heartbeats tell the dispatcher which are held, so that each is sent once.
  // A pipeline built at its first use, then shared: the one without a trainer-side tail, which
  // only tasks whose reader runs the tail need (TrainerTailOffer).
  struct LazyPipeline {
    PipelineDef def;
    PipelineOptions options;
    absl::Mutex mu;
    std::shared_ptr<const Pipeline> built ABSL_GUARDED_BY(mu);
  };
  struct HeldPipeline {
    std::shared_ptr<const Pipeline> pipeline;
    // When the heartbeat found no runner using it (env clock, µs); -1 while one does.
    int64_t idle_since_us = -1;
    // The pipeline's trainer-side tail (pipeline/trainer_tail.h) and the pipeline without it;
    // unset and null when it has none.
    std::optional<TrainerTailDef> tail;
    std::shared_ptr<LazyPipeline> without_tail;
  };
  std::map<std::string, HeldPipeline> pipelines_ ABSL_GUARDED_BY(mu_);
  // Tasks assigned here whose pipeline this worker cannot build (a UDF it lacks or does not
  // allow): by task id, the generation and why. GetElements answers their readers with it; the
  // other tasks run.
  struct UnbuildableTask {
    int64_t generation = 0;
    absl::Status why;
  };
  std::map<int64_t, UnbuildableTask> unbuildable_tasks_ ABSL_GUARDED_BY(mu_);
  bool more_tasks_ ABSL_GUARDED_BY(mu_) = false;

  absl::Notification stopping_;
  std::thread heartbeat_thread_;
  // Set while profile_thread_ profiles.
  std::atomic<bool> profiling_{false};
  std::thread profile_thread_;
};

}  // namespace granary

#endif  // GRANARY_WORKER_WORKER_IMPL_H_
