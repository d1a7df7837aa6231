// RedisEnv: the in-memory cache tier (issue 20) — an Env whose files are values in a Redis
// server, for cache roots named `redis://HOST:PORT/PREFIX` (CacheTierEnv routes them here).
// The cache's code is written against Env, so Put (cache_write's temp chunk, Sync, rename to
// its committed name), Get (cache_read loads a chunk whole), eviction and garbage collection
// work on either tier unchanged.
//
// Mapping: the file `redis://HOST:PORT/D/N` (D its directory, N its name) is the string value
// under the key `{D/S}T`, where S is N up to its last '-' (all of N if it has none) and T the
// rest: the braces are a Redis Cluster hash tag, so a cache's temporary chunk
// `t1-g0-i0-r<run>.tmp` and its committed name `t1-g0-i0-n<count>.chunk` share a slot (their
// RENAME is atomic) while a cache's chunks spread over the cluster's masters. Paths with `{` or
// `}` are refused. Directories are implied by key prefixes: CreateDirs and SyncDir do nothing,
// GetChildren lists the next path components of the keys under `{D/` (SCAN, never KEYS),
// DeleteDir deletes those keys, and renaming a "directory" renames every key under it, one at
// a time (not atomic as a whole; the dispatcher renames a cache's directory only under its
// lock, when no epoch reads or writes it). A rename between two slots of a cluster is a copy:
// GET, SET of the new key (whole: a reader sees it complete or not at all), DEL of the old.
//
// Servers: HOST:PORT is one Redis server or any node of a Redis Cluster (cache/redis_nodes.h
// finds out which, routes by slot and follows MOVED/ASK); PORT defaults to 6379.
//
// Authentication: every connection authenticates with the credentials the Env is given (the
// operator's --redis_user and --redis_password_file), never with any in the URL. A URL with a
// user or password (`redis://USER:PASSWORD@HOST…`) is refused — the cache root is journaled,
// shown by `granary status` and sent to every worker, so a password in it would reach every
// client — and so is `rediss://` (TLS): Debian 12's hiredis (0.14) has no TLS. Every call on a
// refused URL fails InvalidArgument naming the part at fault (with any password elided).
//
// Durability: a WritableFile buffers its bytes; Flush, Sync and Close SET the whole value (Redis'
// SET is atomic: a reader sees the old value or the new, never a part), so a chunk "is durable in
// the tier" once Redis acknowledged its SET. A Redis without persistence loses everything when
// it restarts, and a maxmemory policy other than noeviction may drop values: a lost chunk is
// a missing file to the cache's readers, which the cache's checks (record count, MAC, index
// sequence: cache/FORMAT.md) turn into a recompute — never wrong data.
//
// Reads: a SequentialFile streams the value off the socket into the reader's buffer.
//
// Errors: Unavailable naming the server when it cannot be reached; NotFound for a missing key;
// Unauthenticated naming the server when it refuses the credentials (or wants some);
// PermissionDenied when an ACL forbids a command or key; Internal for any other Redis error
// reply (e.g. OOM under noeviction), with its text.
//
// Thread-safe (connections are pooled per node).
#ifndef GRANARY_CACHE_REDIS_ENV_H_
#define GRANARY_CACHE_REDIS_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/redis_nodes.h"
#include "common/env.h"

namespace granary {

// The server part of a cache tier path or root (`redis://HOST:PORT/...`, or `rediss://...`),
// "redis://HOST:PORT"; "" for any other path (a file).
std::string RedisServerOf(const std::string& path);

// The "HOST:PORT" a server "redis://HOST[:PORT]" (RedisServerOf) names. InvalidArgument naming
// the unsupported part: rediss:// (TLS), a user or password before '@' (elided in the message),
// an empty host or a port that is not a number in 1..65535.
absl::StatusOr<std::string> RedisAddressOf(const std::string& server);

class RedisEnv : public Env {
 public:
  // For paths under `server` ("redis://HOST:PORT"); clock and sleep from `clock`. Connects at
  // the first call, authenticating with `credentials`. A `server` RedisAddressOf refuses makes
  // every call fail with its error.
  RedisEnv(std::string server, Env* clock, RedisCredentials credentials = {});
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

  // SET `path` to `value`, or to the concatenation of its pieces (what a WritableFile's Sync
  // does).
  absl::Status Put(const std::string& path, absl::string_view value);
  absl::Status Put(const std::string& path, const std::vector<absl::string_view>& value);

  // The key of `path` (see Mapping above); InvalidArgument for a path not under this server, or
  // when the server's URL is refused.
  absl::StatusOr<std::string> KeyOf(const std::string& path) const;

 private:
  // A value read by GET, as a SequentialFile streaming it.
  class ValueFile;
  // The path of the key `key` (KeyOf's inverse).
  std::string PathOf(const std::string& key) const;
  // The value of the file `path`, to be read (its size known); NotFound naming it if none.
  absl::StatusOr<std::unique_ptr<RedisNodes::Value>> OpenValue(const std::string& path);
  // The key pattern matching the keys of every path under the directory `dir`.
  absl::StatusOr<std::string> KeysUnder(const std::string& dir) const;
  // Renames the value under `from` to `to` (RENAME, or a copy between slots).
  absl::Status RenameKey(const std::string& from, const std::string& to);

  const std::string server_;  // "redis://HOST:PORT"
  Env* const clock_;
  const absl::StatusOr<std::string> address_;  // RedisAddressOf(server_)
  RedisNodes nodes_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_REDIS_ENV_H_
