#include "cache/cache_tier_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/redis_env.h"

namespace granary {
namespace {

constexpr char kSchemeEnd[] = "://";

// "redis" for "redis://HOST:PORT/x"; "" for a path without a scheme.
std::string SchemeOf(const std::string& path) {
  const size_t end = path.find(kSchemeEnd);
  return end == std::string::npos ? "" : path.substr(0, end);
}

}  // namespace

CacheTierRegistry CacheTierRegistry::WithBuiltins(RedisCredentials redis_credentials) {
  CacheTierRegistry registry;
  const EnvFactory redis = [redis_credentials](const std::string& server, Env* base) {
    return std::make_unique<RedisEnv>(server, base, redis_credentials);
  };
  for (const char* scheme : {"redis", "rediss"}) registry.Register(scheme, redis).IgnoreError();
  return registry;
}

absl::Status CacheTierRegistry::Register(const std::string& scheme, EnvFactory factory) {
  if (!tiers_.emplace(scheme, std::move(factory)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("cache tier scheme '", scheme, "' is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const CacheTierRegistry::EnvFactory*> CacheTierRegistry::Find(
    const std::string& scheme) const {
  const auto it = tiers_.find(scheme);
  if (it != tiers_.end()) return &it->second;
  return absl::InvalidArgumentError(absl::StrCat(
      "no cache tier for scheme '", scheme, "' (known: ", absl::StrJoin(Schemes(), ", "),
      "; tiers are registered by CacheTierRegistry::WithBuiltins in "
      "cache/cache_tier_registry.h)"));
}

std::vector<std::string> CacheTierRegistry::Schemes() const {
  std::vector<std::string> schemes;
  for (const auto& [scheme, factory] : tiers_) schemes.push_back(scheme);
  return schemes;
}

std::string CacheTierRegistry::ServerOf(const std::string& path) const {
  const std::string scheme = SchemeOf(path);
  if (!tiers_.count(scheme)) return "";
  const size_t slash = path.find('/', scheme.size() + sizeof(kSchemeEnd) - 1);
  return slash == std::string::npos ? path : path.substr(0, slash);
}

std::unique_ptr<Env> CacheTierRegistry::NewEnv(const std::string& server, Env* base) const {
  return tiers_.at(SchemeOf(server))(server, base);
}

}  // namespace granary
