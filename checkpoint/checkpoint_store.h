// CheckpointStore: a worker's local store of task checkpoints (DESIGN.md §5), one file per
// checkpoint in one directory. A checkpoint is (task id, generation, element index, the
// serialized iterator state after that many elements), written for an owner (the cluster); the
// state is opaque here. The file
// format and naming are documented in checkpoint/FORMAT.md.
//
// Write protocol walkthrough
// --------------------------
// Write(task, gen, index, state) encodes the file (magic, header, state, masked CRC-32C) and
//   1. writes it to a temporary `<final name>.tmp-<pid>-<n>` in the store's directory;
//   2. Sync()s the temporary (its bytes are durable) and closes it;
//   3. renames it to its final name `task-<task>-idx-<index, 20 digits>-gen-<gen>.ckpt`
//      (atomic: a reader sees no file or the whole file, never a partial one);
//   4. SyncDir()s the directory (the new name is durable);
//   5. prunes: deletes this task's checkpoints beyond the newest `keep`, ordered by (index,
//      generation) from the file names, except the newest one at or before the index the
//      caller names (the client's acknowledged index: what a restarted run restores from); the
//      file just written is never pruned by its own Write.
// If step 1, 2 or 3 fails, the temporary is deleted (best effort) and no final-named file was
// created. A crash at any point leaves either the old set of checkpoints plus perhaps a stray
// temporary, or the new checkpoint in full. Readers never open temporaries, and never trust a
// file without checking its CRC and that its header agrees with its name; a file that fails
// is logged (LOG(WARNING), with its path and why) and skipped in favour of an older one.
// Deletions (pruning, GarbageCollect) are not followed by SyncDir: a crash may bring an old
// checkpoint back, which is harmless; DeleteAll does sync the directory.
//
// A task's element stream does not depend on who computes it, so any generation's checkpoint
// of a task at index i is a valid restore point for every later generation.
//
// Thread-safe. Calls for the same task are serialized by a per-task mutex; calls for different
// tasks run in parallel. Several processes may read the same directory (e.g. a standby
// restoring from a shared filesystem), but only one store may write a given task's checkpoints
// at a time.
#ifndef GRANARY_CHECKPOINT_CHECKPOINT_STORE_H_
#define GRANARY_CHECKPOINT_CHECKPOINT_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"

namespace granary {

struct CheckpointOptions {
  // The newest `keep` checkpoints of each task are kept by Write. REQUIRES: >= 1.
  int keep = 3;
  // Whose checkpoints these are: written into every file and required on read (a file of
  // another owner is skipped like a corrupt one). A worker uses its dispatcher's cluster id:
  // task ids are unique within a cluster's journal but start at 1 again in a new one, so the
  // owner is what keeps a task from restoring another cluster's checkpoint.
  std::string owner;
};

struct Checkpoint {
  int64_t task_id = 0;
  int64_t generation = 0;
  int64_t index = 0;  // the state is the iterator's after this many elements
  std::string state;  // opaque serialized iterator state
  std::string path;   // the file it was read from
};

// Decodes the bytes of a checkpoint file (checkpoint/FORMAT.md): magic, header, owner, state and
// CRC, with nothing before or after, and sets *owner (if non-null) to the owner it was written
// for. Does not compare the header with a file name or the owner with a store's (the store
// does). DataLoss "checkpoint <path>: <problem>" naming what does not verify: bad magic,
// truncated, trailing bytes, CRC mismatch. Pure; `path` is only used in errors and copied into
// the result.
absl::StatusOr<Checkpoint> DecodeCheckpointFile(absl::string_view data, const std::string& path,
                                                std::string* owner = nullptr);

class CheckpointStore {
 public:
  // Opens the store over `dir`, creating it (and its parents) if missing. Does not read or
  // delete anything in it. `env` must outlive the store.
  // Errors: InvalidArgument if options.keep < 1; the Env's error if `dir` cannot be created.
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Open(Env* env, const std::string& dir,
                                                               CheckpointOptions options = {});

  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  // Durably writes the checkpoint of `task_id` taken after `index` elements by generation
  // `generation` (protocol above), replacing a file of the same (task, index, generation).
  // Pruning keeps the newest `keep` and the newest checkpoint with index <= keep_at_or_before
  // (a worker passes its client's acknowledged index: a reader slower than the checkpoints would
  // otherwise find every kept one past its position).
  // Returns the number of bytes in the file. REQUIRES: task_id, generation, index >= 0
  // (else InvalidArgument). Errors from the Env (create, write, fsync, rename, fsync of the
  // directory) are returned annotated with the checkpoint's final path; after an error, the
  // checkpoint may be absent (steps 1-3) or present but not yet durable (step 4). A pruning
  // failure is only logged: the checkpoint itself was written.
  absl::StatusOr<int64_t> Write(int64_t task_id, int64_t generation, int64_t index,
                                absl::string_view state, int64_t keep_at_or_before = -1);

  // The newest valid checkpoint of `task_id`, of any generation, with index <= max_index:
  // the highest index, and among equal indexes the highest generation. Files that fail
  // verification (bad magic, truncated, trailing bytes, CRC mismatch, header disagreeing with
  // the file name, or a task-prefixed name that is not a checkpoint name) and this task's
  // temporaries are logged with LOG(WARNING), skipped, and appended to `*skipped` if non-null.
  // A file that vanishes while being read (deleted by another process) is skipped silently.
  // Errors: NotFound if no valid checkpoint qualifies; other Env errors (listing the
  // directory, reading a file other than NotFound) are returned as they are.
  absl::StatusOr<Checkpoint> Newest(int64_t task_id, int64_t max_index,
                                    std::vector<std::string>* skipped = nullptr) const;

  // Called once the client acknowledged every element up to index `acknowledged`: among this
  // task's checkpoints with index <= acknowledged, keeps only the newest one that verifies
  // (reading it) and deletes the others, including corrupt ones; keeps every checkpoint with
  // index > acknowledged. Reads nothing when at most one checkpoint is <= acknowledged, and
  // deletes nothing if none of them verifies. Errors: the Env's, naming the path.
  absl::Status GarbageCollect(int64_t task_id, int64_t acknowledged);

  // Deletes every checkpoint and temporary of `task_id` (the task is done), then syncs the
  // directory. OK if there were none. Errors: the Env's, naming the path.
  absl::Status DeleteAll(int64_t task_id);

  const std::string& dir() const { return dir_; }

 private:
  // A file of one task in the directory, classified by its name alone.
  struct Entry {
    std::string path;
    int64_t index = 0;
    int64_t generation = 0;
  };
  struct Listing {
    std::vector<Entry> checkpoints;  // well-named; newest (index, generation) first
    std::vector<std::string> temporaries;
    std::vector<std::string> malformed;  // "task-<id>-" prefix but not a checkpoint name
  };

  CheckpointStore(Env* env, std::string dir, CheckpointOptions options);

  absl::Mutex* TaskMutex(int64_t task_id) const;
  absl::StatusOr<Listing> List(int64_t task_id) const;
  // Reads and verifies one checkpoint file (DataLoss naming the path if it does not verify).
  absl::StatusOr<Checkpoint> Read(const Entry& entry, int64_t task_id) const;
  absl::Status Prune(int64_t task_id, const std::string& just_written,
                     int64_t keep_at_or_before);

  Env* const env_;
  const std::string dir_;
  const CheckpointOptions options_;

  mutable absl::Mutex map_mu_;
  // One mutex per task ever used (never erased: a few bytes per task).
  mutable std::map<int64_t, std::unique_ptr<absl::Mutex>> task_mu_ ABSL_GUARDED_BY(map_mu_);
};

}  // namespace granary

#endif  // GRANARY_CHECKPOINT_CHECKPOINT_STORE_H_
