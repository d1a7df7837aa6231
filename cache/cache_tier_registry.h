// CacheTierRegistry: the cache tiers a cache root can name, by URL scheme — `redis://HOST:PORT/
// PREFIX` is a value in that Redis (cache/redis_env.h). A path with no scheme, or with one no
// tier is registered for, is not on a tier: CacheTierEnv serves it from its base Env (the shared
// filesystem tier, and everything that is not the cache).
//
// A new tier is one Env (the model is cache/redis_env.h) and one Register call in WithBuiltins.
// Thread-compatible: register everything first, then share it read-only.
#ifndef GRANARY_CACHE_CACHE_TIER_REGISTRY_H_
#define GRANARY_CACHE_CACHE_TIER_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/redis_connection.h"
#include "common/env.h"

namespace granary {

class CacheTierRegistry {
 public:
  // Makes the Env of the paths under `server` ("SCHEME://AUTHORITY", ServerOf), over `base`
  // (which outlives it).
  using EnvFactory = std::function<std::unique_ptr<Env>(const std::string& server, Env* base)>;

  // The built-in tiers: redis, and rediss, whose Env refuses it naming the reason (no TLS).
  // Redis servers are reached as `redis_credentials` say.
  static CacheTierRegistry WithBuiltins(RedisCredentials redis_credentials = {});

  // AlreadyExists naming the scheme when it is taken.
  absl::Status Register(const std::string& scheme, EnvFactory factory);
  // The tier of `scheme` ("redis"); InvalidArgument naming it and the registered schemes when
  // unknown.
  absl::StatusOr<const EnvFactory*> Find(const std::string& scheme) const;
  // In sorted order.
  std::vector<std::string> Schemes() const;

  // The server of `path` when its scheme names a registered tier ("redis://HOST:PORT" for
  // "redis://HOST:PORT/PREFIX/x"); "" for any other path.
  std::string ServerOf(const std::string& path) const;
  // A new Env of `server` (a non-empty ServerOf), over `base` (which must outlive it).
  std::unique_ptr<Env> NewEnv(const std::string& server, Env* base) const;

 private:
  std::map<std::string, EnvFactory> tiers_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_TIER_REGISTRY_H_
