// TaskRun: one run of a task's pipeline on a worker — its iterator (leasing the task's splits
// from the dispatcher), its RunHooks, and the checkpoints it takes (DESIGN.md §5). The
// TaskRunner makes a run when the task starts and a new one whenever it must start over; the
// run is cancelled through the `cancelled` callback its split leases check, and destroyed by
// the thread that produced from it.
//
// Checkpoints: TakeCheckpoint(index) saves the iterator's state between two elements — the
// pipeline is quiet there — and hands it to a writer thread, so the pipeline is held up only
// for the Save itself (stall_us). The writer runs the hooks' BeforeCheckpointWrite, writes the
// checkpoint into the store, runs AfterCheckpointWrite and garbage-collects the task's
// checkpoints below what the client acknowledged. One write is in flight at a time; the
// destructor and Finish wait for it.
//
// Restore: Make(…, from) restores the new run from the newest checkpoint at or before `from`
// (any generation: the stream does not depend on who computes it); a corrupt checkpoint is
// skipped for an older one, and one that does not restore makes the run start from index 0.
// Checkpoints only make recovery faster; correctness never depends on one.
//
// Thread-compatible: one producer thread calls everything.
#ifndef GRANARY_WORKER_TASK_RUN_H_
#define GRANARY_WORKER_TASK_RUN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_store.h"
#include "common/env.h"
#include "pipeline/pipeline.h"
#include "proto/dispatcher.pb.h"
#include "transport/buffer_pool.h"
#include "transport/elements_reply.h"
#include "worker/dispatcher_connection.h"
#include "worker/run_hooks.h"

namespace granary {

// What every run of one task needs. All pointers must outlive the runs.
struct TaskRunSpec {
  TaskDef def;
  const Pipeline* pipeline = nullptr;
  DispatcherConnection* dispatcher = nullptr;
  Env* env = Env::Default();
  int64_t lease_size = 4;
  // Null: no checkpoints.
  CheckpointStore* checkpoints = nullptr;
  RunHooksFactory hooks;
  // Where element images are allocated (the worker's pool: shared memory for local clients).
  BufferPool* pool = BufferPool::Default();
  // Whether `pipeline` is the task's without its trainer-side tail (TrainerTailOffer): its
  // checkpoints say so, and a run restores only checkpoints that say the same.
  bool trainer_tail = false;
};

// What a checkpoint write did, for the runner's status.
struct CheckpointWritten {
  int64_t index = 0;
  int64_t bytes = 0;
};

class TaskRun {
 public:
  // `cancelled` is polled while leasing splits; `acknowledged` (called on the writer thread)
  // gives the index below which the client has everything; `on_written` reports each
  // checkpoint written.
  struct Callbacks {
    std::function<bool()> cancelled;
    std::function<int64_t()> acknowledged;
    std::function<void(const CheckpointWritten&)> on_written;
  };

  // A run positioned at its newest usable checkpoint at or before `from` (restored_index()),
  // or at index 0. Errors are the pipeline's (building its iterator).
  static absl::StatusOr<std::unique_ptr<TaskRun>> Make(const TaskRunSpec& spec, int64_t from,
                                                       Callbacks callbacks);
  ~TaskRun();
  TaskRun(const TaskRun&) = delete;
  TaskRun& operator=(const TaskRun&) = delete;

  // The index the run was restored to (0: a fresh start).
  int64_t restored_index() const { return restored_index_; }

  // The next element as the wire carries it: its image and, unless it is in shared memory, its
  // XXH3 (index left to the caller), or *end. Errors are the pipeline's, or ResourceExhausted
  // when no buffer can be had.
  absl::Status Next(ReplyElement* element, bool* end);

  // Saves the run, positioned after `index` elements, and writes it in the background. Returns
  // how long the pipeline was held up (the Save), in microseconds. A failed Save is logged and
  // no checkpoint taken.
  int64_t TakeCheckpoint(int64_t index);

  // At the iterator's end: the hooks' Finish (after any checkpoint write in flight).
  absl::StatusOr<std::vector<CacheChunk>> Finish();

 private:
  TaskRun(const TaskRunSpec& spec, Callbacks callbacks);
  // Builds the iterator and the hooks afresh.
  absl::Status Build();
  // Restores from the newest checkpoint at or before `from`; false if one was found but did
  // not restore (the iterator may be half restored: rebuild it).
  bool Restore(int64_t from);
  void JoinWriter();

  const TaskRunSpec& spec_;
  const Callbacks callbacks_;
  // Declared before the iterator, which uses its cache sink until destroyed.
  std::unique_ptr<RunHooks> hooks_;
  std::unique_ptr<Iterator> it_;
  int64_t restored_index_ = 0;
  std::thread writer_;
};

}  // namespace granary

#endif  // GRANARY_WORKER_TASK_RUN_H_
