// RedisEnv: the in-memory cache tier (issue 20) — an Env whose files are values in a Redis
// server, for cache roots named `redis://HOST:PORT/PREFIX` (CacheTierEnv routes them here).
// The cache's code is written against Env, so Put (cache_write's temp chunk, Sync, rename to
// its committed name), Get (cache_read loads a chunk whole), eviction and garbage collection
// work on either tier unchanged.
//
// Mapping: the file `redis://HOST:PORT/a/b/c.chunk` is the string value under the key
// `a/b/c.chunk` (the path after HOST:PORT/). Directories are implied by key prefixes: CreateDirs
// and SyncDir do nothing, GetChildren lists the next path components of the keys under
// `dir/` (SCAN, never KEYS), DeleteDir deletes those keys, and renaming a "directory" renames
// every key under it, one RENAME each (not atomic as a whole; the dispatcher renames a cache's
// directory only under its lock, when no epoch reads or writes it).
//
// Durability: a WritableFile buffers its bytes; Sync and Close SET the whole value (Redis' SET
// is atomic: a reader sees the old value or the new, never a part), so a chunk "is durable in
// the tier" once Redis acknowledged its SET. A Redis without persistence loses everything when
// it restarts, and a maxmemory policy other than noeviction may drop values: a lost chunk is
// a missing file to the cache's readers, which the cache's checks (record count, MAC, index
// sequence: cache/FORMAT.md) turn into a recompute — never wrong data.
//
// Errors: Unavailable naming the server when it cannot be reached (or a command fails on the
// connection, which is then reopened at the next call); NotFound for a missing key; Internal
// for a Redis error reply (e.g. OOM under noeviction), with its text.
//
// Thread-safe: one connection, used under a mutex (a chunk is one command each way).
#ifndef GRANARY_CACHE_REDIS_ENV_H_
#define GRANARY_CACHE_REDIS_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"

struct redisContext;

namespace granary {

// "redis://HOST:PORT" of a path or root `redis://HOST:PORT/...`; nullopt-like "" otherwise.
std::string RedisServerOf(const std::string& path);

class RedisEnv : public Env {
 public:
  // For paths under `server` ("redis://HOST:PORT"); clock and sleep from `clock`. Connects at
  // the first call (and again after a failed one).
  RedisEnv(std::string server, Env* clock);
  ~RedisEnv() override;

  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> Glob(const std::string& pattern) override;
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status CreateDirs(const std::string& dir) override;
  absl::Status DeleteDir(const std::string& dir) override;
  absl::Status SyncDir(const std::string& dir) override;
  uint64_t NowMicros() override { return clock_->NowMicros(); }
  void SleepForMicros(uint64_t micros) override { clock_->SleepForMicros(micros); }

  // SET `path` to `value` (what a WritableFile's Sync does).
  absl::Status Put(const std::string& path, const std::string& value);

 private:
  // A command's reply, owned.
  struct Reply;
  // A value read by GET, as a SequentialFile over its reply.
  class ValueFile;
  // Runs the command `args` (binary-safe); Unavailable or Internal as above.
  absl::StatusOr<std::unique_ptr<Reply>> Command(const std::vector<std::string>& args)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The key of `path`; InvalidArgument for a path not under this server.
  absl::StatusOr<std::string> Key(const std::string& path) const;
  // Every key matching the glob `pattern` (SCAN).
  absl::StatusOr<std::vector<std::string>> Scan(const std::string& pattern);

  const std::string server_;  // "redis://HOST:PORT"
  std::string host_;
  int port_ = 0;
  Env* const clock_;
  absl::Mutex mu_;
  redisContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace granary

#endif  // GRANARY_CACHE_REDIS_ENV_H_
