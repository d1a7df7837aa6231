// CachePut: the worker side of a cache-writing task (DESIGN.md §5) — the CacheSink behind its
// cache_write op. It writes the elements flowing through cache_write into chunk files in the
// cache directory and commits them with the task's checkpoints, so that what is committed is
// exactly what a checkpoint (or the task's end) covers. Names and formats: cache/FORMAT.md.
//
// Commit protocol walkthrough
// ---------------------------
// Append(i, e) writes record i — the next of the chain, else InvalidArgument — to the open
//   chunk, a temporary `t<task>-g<gen>-i<first>.tmp`
//   (opened at the first append after a seal; a chunk is also sealed when it reaches
//   `max_chunk_bytes`). Sealing flushes it; its record count and MAC are then known.
// Save(writer) — cache_write's part of a checkpoint, between two elements — seals the open
//   chunk and writes the list of every chunk sealed so far (the chain) into the state.
// The task runner then, off the pipeline's thread:
//   1. SyncSealed(n): fsyncs the first n chain chunks (n = sealed() right after Save) and the
//      directory (their temporary names must survive a crash for step 3 to be rolled forward);
//   2. writes the checkpoint (checkpoint_store.h), whose state holds the chain;
//   3. CommitSealed(n): renames each of those temporaries to its final name
//      `t<task>-g<gen>-i<first>-n<count>.chunk` and fsyncs the directory.
// Restore(reader) — a runner resuming from that checkpoint — rolls the commit forward: every
//   chain chunk still under its temporary name is renamed (a chunk found under neither name
//   makes Restore fail with DataLoss, and the runner starts the task over); then it deletes
//   every other temporary of this task from this or an earlier generation (the uncommitted
//   work of a run that died).
// A fresh start (no Restore) deletes those temporaries at its first Append.
// Finish() — at the task's end — seals, syncs and commits everything and returns the chain,
//   which the worker reports with TaskFinished: it enters the cache's manifest when every task
//   of the epoch has finished. Chunks not in a finishing generation's chain (those of a run
//   that lost its task) are never listed.
//
// A chunk's bytes are a pure function of (task, first index, count) — the task's stream does not
// depend on who computes it — so the final name determines the content, and re-committing a
// name (two runs of one task) writes the same bytes.
//
// Thread-compatible, except that SyncSealed and CommitSealed may run on another thread
// concurrently with Append and Save (one of them at a time).
#ifndef GRANARY_CACHE_CACHE_PUT_H_
#define GRANARY_CACHE_CACHE_PUT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/cache_sink.h"
#include "common/env.h"
#include "pipeline/sources/tfrecord_writer.h"
#include "proto/cache.pb.h"
#include "security/chunk_mac.h"

namespace granary {

struct CachePutOptions {
  Env* env = Env::Default();
  // The cache's directory; created if missing.
  std::string dir;
  int64_t task_id = 0;
  int64_t generation = 0;
  // Names this CachePut's temporaries; empty: a random one. Distinct runs of a task (a restarted
  // worker keeps the task's generation) must never write a temporary an older checkpoint names.
  std::string run_id;
  // A chunk is sealed once it holds this many bytes (it is also sealed at every checkpoint).
  int64_t max_chunk_bytes = 64 << 20;
  // Keys each chunk's MAC (security/chunk_mac.h): the dispatcher's, for the manifest.
  ChunkMacKey mac_key;
};

class CachePut : public CacheSink {
 public:
  explicit CachePut(const CachePutOptions& options);
  ~CachePut() override;

  absl::Status Append(int64_t index, const Element& element) override;
  absl::Status Save(StateWriter& writer) override;
  absl::Status Restore(const StateReader& reader) override;

  // Chunks sealed so far (the chain's length).
  int64_t sealed() const ABSL_LOCKS_EXCLUDED(mu_);
  // Steps 1 and 3 above, for the first n chain chunks (those already done are skipped).
  absl::Status SyncSealed(int64_t n) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CommitSealed(int64_t n) ABSL_LOCKS_EXCLUDED(mu_);
  // Seals, syncs and commits every chunk; returns the chain. REQUIRES: no SyncSealed or
  // CommitSealed runs concurrently.
  absl::StatusOr<std::vector<CacheChunk>> Finish() ABSL_LOCKS_EXCLUDED(mu_);

  // File names (cache/FORMAT.md).
  static std::string TemporaryName(int64_t task_id, int64_t generation, int64_t first_index,
                                   const std::string& run_id);
  static std::string FinalName(int64_t task_id, int64_t generation, int64_t first_index,
                               int64_t num_elements);

 private:
  struct Chunk {
    CacheChunk meta;  // path = the final path
    std::string temporary;
    // Open until synced.
    std::unique_ptr<TfRecordWriter> writer;
    bool synced = false;
    bool committed = false;
  };

  // Deletes this task's temporaries from this or earlier generations.
  absl::Status DeleteStaleTemporaries();
  // Creates the directory and deletes stale temporaries, once.
  absl::Status StartOnce();
  absl::Status Seal() ABSL_LOCKS_EXCLUDED(mu_);
  // The index the next Append must have: the open chunk's next, else the chain's.
  int64_t NextIndex() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string Path(const std::string& name) const;

  CachePutOptions options_;  // run_id filled in by the constructor.
  bool started_ = false;
  // The open chunk (producer thread only).
  std::unique_ptr<Chunk> open_;
  std::optional<ChunkMac> open_mac_;  // the open chunk's

  mutable absl::Mutex mu_;
  // The chain: every sealed chunk, in order. Entries are never moved once added.
  std::deque<std::unique_ptr<Chunk>> chain_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_PUT_H_
