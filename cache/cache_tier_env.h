// CacheTierEnv: the Env of a dispatcher or worker process that reaches every cache tier (issue
// 20): a path whose URL scheme names a tier of its CacheTierRegistry is served by that tier's
// Env for the path's server (`redis://HOST:PORT/` is a value in that Redis, cache/redis_env.h;
// one Env per server, made at first use and kept), any other path is a file of `base` (the
// shared filesystem tier, and everything that is not the cache). So `--cache_root` picks the
// tier: a directory, or `redis://HOST:PORT/PREFIX`. A rename between tiers is InvalidArgument.
// Every Redis is reached with the one set of credentials the process was given (RedisEnv
// refuses credentials in a URL, and rediss://).
// Thread-safe if `base` is.
#ifndef GRANARY_CACHE_CACHE_TIER_ENV_H_
#define GRANARY_CACHE_CACHE_TIER_ENV_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cache/cache_tier_registry.h"
#include "cache/redis_connection.h"
#include "common/env_wrapper.h"

namespace granary {

class CacheTierEnv : public EnvWrapper {
 public:
  // `base` must outlive this Env. The built-in tiers (CacheTierRegistry::WithBuiltins): Redis
  // servers are reached as `redis_credentials` say.
  explicit CacheTierEnv(Env* base, RedisCredentials redis_credentials = {})
      : CacheTierEnv(base, CacheTierRegistry::WithBuiltins(std::move(redis_credentials))) {}
  // The tiers of `tiers`.
  CacheTierEnv(Env* base, CacheTierRegistry tiers) : EnvWrapper(base), tiers_(std::move(tiers)) {}

  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    return For(path)->NewSequentialFile(path);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return For(path)->NewWritableFile(path);
  }
  bool FileExists(const std::string& path) override { return For(path)->FileExists(path); }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    return For(path)->GetFileSize(path);
  }
  absl::StatusOr<std::vector<std::string>> Glob(const std::string& pattern) override {
    return For(pattern)->Glob(pattern);
  }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    return For(dir)->GetChildren(dir);
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override { return For(path)->DeleteFile(path); }
  absl::Status CreateDirs(const std::string& dir) override { return For(dir)->CreateDirs(dir); }
  absl::Status DeleteDir(const std::string& dir) override { return For(dir)->DeleteDir(dir); }
  absl::Status SyncDir(const std::string& dir) override { return For(dir)->SyncDir(dir); }

 private:
  // The Env of `path`'s tier.
  Env* For(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);

  const CacheTierRegistry tiers_;
  absl::Mutex mu_;
  // By server ("redis://HOST:PORT", CacheTierRegistry::ServerOf).
  std::map<std::string, std::unique_ptr<Env>> servers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_TIER_ENV_H_
