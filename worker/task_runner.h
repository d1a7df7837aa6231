// TaskRunner: runs one task's pipeline on a worker and serves its elements by index
// (DESIGN.md §4). It coordinates three parts, as tf.data service's worker does: the task's
// ElementWindow (element_window.h), the producer thread that owns the current TaskRun
// (task_run.h: the iterator, its checkpoints and RunHooks), and the GetElements requests.
//
// On the first request (DESIGN.md §4.3: tasks are restored lazily), a producer thread starts a
// run and pulls its elements (splits leased from the dispatcher), numbers them 0, 1, 2, ..., and
// appends each — its wire image, written once (transport/element_image.h), and its XXH3 — to
// the window. GetElements(from_index) acknowledges everything before from_index (dropping it
// from the window) and answers elements from_index, from_index + 1, ... by reference: the
// answer's payloads are the window's images (transport/elements_reply.h). The producer stops
// while the window holds `window_bytes` or more (backpressure from a slow client), so memory
// stays bounded by about one window plus one element.
//
// Resuming (§4.3): a request past what has been produced (a restarted worker, a takeover) makes
// the producer compute and discard elements up to from_index, counted as recomputed. A request
// below the window (a client resuming from an older position) restarts the task from index 0 —
// the stream is a pure function of the pipeline, the seed and the task's journaled split
// sequence, so the recomputed elements are identical — and discards up to from_index. A run
// starts from its newest checkpoint at or before the index it must reach (TaskRun).
//
// A run that failed with Internal, ResourceExhausted or Unavailable — what a failing or full disk
// under its cache or checkpoints, or an unreachable cache tier, gives — is answered once with
// its error and started again the same way at the next request (the storage may be back); a
// failure that persists fails the new run too (issue 33).
//
// Every `checkpoint_interval_ms` (on the Env's clock) the producer has the run checkpoint
// itself between two elements. When the iterator ends, the run's hooks finish (a cache-writing
// task commits its chunks) and `on_finished(num_elements, cache_chunks)` is called once from
// the producer thread. Thread-safe.
#ifndef GRANARY_WORKER_TASK_RUNNER_H_
#define GRANARY_WORKER_TASK_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint_store.h"
#include "common/env.h"
#include "pipeline/pipeline.h"
#include "proto/dispatcher.pb.h"
#include "proto/worker.pb.h"
#include "security/confined_env.h"
#include "transport/buffer_pool.h"
#include "transport/elements_reply.h"
#include "worker/dispatcher_connection.h"
#include "worker/element_window.h"
#include "worker/run_hooks.h"
#include "worker/task_run.h"
#include "worker/worker_metrics.h"

namespace granary {

struct TaskRunnerOptions {
  // Payload bytes the window may hold before the producer waits.
  int64_t window_bytes = 256 << 20;
  // Splits leased per GetSplits call.
  int64_t lease_size = 4;
  // How long GetElements waits for an element before answering with none.
  int64_t poll_timeout_ms = 500;
  // Files, and the clock of checkpoint intervals and split-lease back-off (the poll timeout is a
  // real-time wait).
  Env* env = Env::Default();
  // Where the pipeline's sources may read (security/data_roots.h): with a value, they read
  // through a ConfinedEnv over `env` allowing these roots and the task's cache root; none:
  // anywhere `env` reaches (in-process use).
  std::optional<DataRoots> data_roots;
  // Where checkpoints go; null = no checkpoints. Must outlive the runner.
  CheckpointStore* checkpoints = nullptr;
  int64_t checkpoint_interval_ms = 1000;
  // Where element images are allocated. Must outlive the runner.
  BufferPool* pool = BufferPool::Default();
  // Where runners count what they serve, recompute, restore and checkpoint; null: nowhere.
  // Must outlive the runner.
  WorkerMetrics* metrics = nullptr;
};

// A task whose pipeline has a trainer-side tail (pipeline/trainer_tail.h) its reader may run
// instead (JobOptions.tail). The runner decides at its first request, and keeps the choice: the
// reader runs the tail when that request says it can (runs_trainer_tail) and `when` is
// TAIL_CLIENT, or TAIL_AUTO and it reads by bytes (no shared-memory session). A later request
// that cannot run it (another reader of a shared task) is refused with FailedPrecondition. It then
// runs `pipeline` (the pipeline without the tail) and answers every request with `tail`
// (GetElementsResponse.trainer_tail). A pipeline that fails to build leaves the tail on the worker
// (logged). Its checkpoints say which pipeline took them (TaskRunSpec.trainer_tail), so a restarted
// runner never restores the other's state.
struct TrainerTailOffer {
  Tail when = TAIL_AUTO;
  TrainerTailDef tail;
  // Builds (or finds) the pipeline without the tail.
  std::function<absl::StatusOr<std::shared_ptr<const Pipeline>>()> pipeline;
};

class TaskRunner {
 public:
  // Produces nothing until the first GetElements. `pipeline` and `dispatcher` must outlive the
  // runner; `hooks` makes each run's RunHooks (null: none).
  using OnFinished =
      std::function<void(int64_t num_elements, const std::vector<CacheChunk>& cache_chunks)>;

  TaskRunner(const TaskDef& def, std::shared_ptr<const Pipeline> pipeline,
             DispatcherConnection* dispatcher, const TaskRunnerOptions& options,
             OnFinished on_finished, RunHooksFactory hooks = nullptr,
             std::optional<TrainerTailOffer> tail = std::nullopt);
  ~TaskRunner();
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  const TaskDef& def() const { return spec_.def; }

  // REQUIRES: request.generation() == def().generation() (WorkerImpl checks it).
  // Aborted, before anything is acknowledged, for a request of a lower reader_generation than
  // one this runner has served: that reader was taken over (fenced).
  absl::Status GetElements(const GetElementsRequest& request, ElementsReply* reply)
      ABSL_LOCKS_EXCLUDED(mu_);
  TaskStatus Status() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the task has ended and the client acknowledged every element.
  bool FullyAcknowledged() const ABSL_LOCKS_EXCLUDED(mu_);
  // How the last answer went ("shm" or "tcp"), for Status().
  void NoteTransport(const char* transport) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts `elements`, just sent to the reader, as served (an index this runner never sent) or
  // resent (WorkerMetrics).
  void NoteSent(const std::vector<ReplyElement>& elements) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void StartProducer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At the first request: whether the reader runs the trainer-side tail (TrainerTailOffer).
  void ChooseTail(const GetElementsRequest& first) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopProducer() ABSL_LOCKS_EXCLUDED(mu_);
  // The producer thread of run `run_id`.
  void Produce(int64_t run_id);
  bool IsCurrent(int64_t run_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return run_ == run_id && !stopping_;
  }
  // At the iterator's end: the run's hooks finish, then the task is reported finished.
  void Finish(TaskRun& run, int64_t num_elements);
  void Acknowledge(int64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The sources' Env when options.data_roots confines them (spec_.env points at it).
  const std::unique_ptr<ConfinedEnv> confined_env_;
  // Set here, and by ChooseTail before the first run starts (then read-only).
  TaskRunSpec spec_;
  std::shared_ptr<const Pipeline> pipeline_;
  std::optional<TrainerTailOffer> tail_offer_;
  // The serialized TrainerTailDef every answer carries when the reader runs the tail; else empty.
  std::string trainer_tail_ ABSL_GUARDED_BY(mu_);
  const TaskRunnerOptions options_;
  const OnFinished on_finished_;

  // Held through each GetElements call (one at a time per task), before mu_.
  absl::Mutex request_mu_;
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(request_mu_);
  // The highest GetElementsRequest.reader_generation served.
  int64_t reader_generation_ ABSL_GUARDED_BY(request_mu_) = 0;
  // Incremented for each fresh start of the producer; a producer of an older run exits.
  int64_t run_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  ElementWindow window_ ABSL_GUARDED_BY(mu_);
  // Index of the next element the producer makes.
  int64_t produced_ ABSL_GUARDED_BY(mu_) = 0;
  // The producer discards (as recomputed) elements below this index.
  int64_t discard_below_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t recomputed_ ABSL_GUARDED_BY(mu_) = 0;
  // Elements the producer made (recomputed ones too), and the time it was busy making them.
  int64_t made_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t busy_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t recomputed_reported_ ABSL_GUARDED_BY(mu_) = 0;
  // Highest from_index seen since the current run started (a restart below the window resets
  // it): everything below it is acknowledged.
  int64_t acknowledged_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool finish_reported_ ABSL_GUARDED_BY(mu_) = false;
  int64_t restored_from_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t checkpoints_written_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t checkpoint_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_checkpoint_index_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t checkpoint_stall_us_ ABSL_GUARDED_BY(mu_) = 0;
  const char* transport_ ABSL_GUARDED_BY(mu_) = "";
  // One past the highest index sent to the reader (NoteSent).
  int64_t sent_end_ ABSL_GUARDED_BY(mu_) = 0;
  // The job's counters in options_.metrics; null without.
  const WorkerMetrics::Job* const metrics_;
  std::thread producer_;
};

}  // namespace granary

#endif  // GRANARY_WORKER_TASK_RUNNER_H_
