// TaskRunner: runs one task's pipeline on a worker and serves its elements by index
// (DESIGN.md §4).
//
// On the first request (DESIGN.md §4.3: tasks are restored lazily), a producer thread pulls
// elements from the task's iterator (splits leased from the
// dispatcher), numbers them 0, 1, 2, ..., serializes each with its XXH64 and appends it to the
// window: the elements produced but not yet acknowledged. GetElements(from_index) acknowledges
// everything before from_index (dropping it from the window) and answers elements from_index,
// from_index + 1, ... The producer stops while the window holds `window_bytes` or more
// (backpressure from a slow client), so memory stays bounded by about one window plus one
// element.
//
// Resuming (§4.3): a request past what has been produced (a restarted worker, a takeover) makes
// the producer compute and discard elements up to from_index, counted as recomputed. A request
// below the window (a client resuming from an older position) restarts the task from index 0 —
// the stream is a pure function of the pipeline, the seed and the task's journaled split
// sequence, so the recomputed elements are identical — and discards up to from_index.
//
// Checkpoints (DESIGN.md §5, with a CheckpointStore): every `checkpoint_interval_ms` the producer
// saves the iterator's state between two elements — the pipeline is quiet there, no lock is
// held — and hands it to a writer thread, so the pipeline is held up only for the Save itself
// (reported as checkpoint_stall_us). A runner starting for a request at from_index restores the
// newest checkpoint with index <= from_index (any generation: the stream does not depend on who
// computes it) and recomputes only from there; a corrupt checkpoint is skipped for an older
// one or index 0. Checkpoints only make recovery faster; correctness never depends on one.
//
// Cache-writing tasks (TaskDef.cache_dir set, DESIGN.md §5): each run of the iterator gets a
// CachePut (checkpoint/cache_put.h) behind its cache_write op. A checkpoint syncs the chunks
// its Save sealed, is written, and then commits them; a restore rolls that commit forward and
// drops what was written after. At the end the runner seals and commits the rest before
// reporting the task finished with its chunks.
//
// When the iterator ends, `on_finished(num_elements, cache_chunks)` is called once from the
// producer thread. Thread-safe.
#ifndef GRANARY_WORKER_TASK_RUNNER_H_
#define GRANARY_WORKER_TASK_RUNNER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/cache_put.h"
#include "checkpoint/checkpoint_store.h"
#include "common/env.h"
#include "pipeline/pipeline.h"
#include "proto/dispatcher.pb.h"
#include "proto/worker.pb.h"
#include "worker/dispatcher_connection.h"

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
  // Where checkpoints go; null = no checkpoints. Must outlive the runner.
  CheckpointStore* checkpoints = nullptr;
  int64_t checkpoint_interval_ms = 1000;
  // A deliberately broken worker, for proving that the chaos harness can fail: a run that starts
  // at from_index > 0 (a restore, or a recompute after a restart) silently drops the first
  // element it would serve. Never set outside tests (`--testonly_skip_element_after_restore`).
  bool testonly_skip_element_after_restore = false;
};

class TaskRunner {
 public:
  // Produces nothing until the first GetElements. `pipeline` and `dispatcher` must outlive the
  // runner.
  using OnFinished =
      std::function<void(int64_t num_elements, const std::vector<CacheChunk>& cache_chunks)>;

  TaskRunner(const TaskDef& def, std::shared_ptr<const Pipeline> pipeline,
             DispatcherConnection* dispatcher, const TaskRunnerOptions& options,
             OnFinished on_finished);
  ~TaskRunner();
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  const TaskDef& def() const { return def_; }

  // REQUIRES: request.generation() == def().generation() (WorkerImpl checks it).
  absl::Status GetElements(const GetElementsRequest& request, GetElementsResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);
  TaskStatus Status() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the task has ended and the client acknowledged every element.
  bool FullyAcknowledged() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One run of the task's pipeline: its iterator and, in a cache-writing task, the sink of its
  // cache_write op (declared first: the iterator uses it until destroyed).
  struct Run {
    std::unique_ptr<CachePut> cache;
    std::unique_ptr<Iterator> it;
  };

  void StartProducer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopProducer() ABSL_LOCKS_EXCLUDED(mu_);
  void Produce(int64_t run);
  absl::StatusOr<Run> MakeRun(std::function<bool()> cancelled) const;
  // Restores `run` from the newest checkpoint at or before discard_below_, if any; returns the
  // index it restored (0 when it starts fresh, -1 when a checkpoint failed to restore and `run`
  // must be rebuilt).
  int64_t RestoreFromCheckpoint(Run& run);
  // Saves `run` (positioned after `index` elements) and starts writing it in the background.
  void TakeCheckpoint(Run& run, int64_t index);
  // At the iterator's end: commits a cache-writing run's chunks and reports the task finished.
  void Finish(Run& run, int64_t num_elements);
  void JoinCheckpointWriter();
  // Drops window elements before `index`.
  void Acknowledge(int64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TaskDef def_;
  const std::shared_ptr<const Pipeline> pipeline_;
  DispatcherConnection* const dispatcher_;
  const TaskRunnerOptions options_;
  const OnFinished on_finished_;

  // Held through each GetElements call (one at a time per task), before mu_.
  absl::Mutex request_mu_;
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(request_mu_);
  // Incremented for each fresh start of the producer; a producer of an older run exits.
  int64_t run_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<IndexedElement> window_ ABSL_GUARDED_BY(mu_);
  int64_t buffered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Index of the next element the producer makes.
  int64_t produced_ ABSL_GUARDED_BY(mu_) = 0;
  // The producer discards (as recomputed) elements below this index.
  int64_t discard_below_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t recomputed_ ABSL_GUARDED_BY(mu_) = 0;
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
  // Used by the producer thread only.
  std::thread checkpoint_writer_;
  std::thread producer_;
};

}  // namespace granary

#endif  // GRANARY_WORKER_TASK_RUNNER_H_
