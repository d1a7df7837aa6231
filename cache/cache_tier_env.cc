#include "cache/cache_tier_env.h"

#include "absl/strings/str_cat.h"

namespace granary {

Env* CacheTierEnv::For(const std::string& path) {
  const std::string server = tiers_.ServerOf(path);
  if (server.empty()) return base();
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Env>& env = servers_[server];
  if (env == nullptr) env = tiers_.NewEnv(server, base());
  return env.get();
}

absl::Status CacheTierEnv::RenameFile(const std::string& from, const std::string& to) {
  if (tiers_.ServerOf(from) != tiers_.ServerOf(to)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rename ", from, " to ", to, ": they are in different cache tiers"));
  }
  return For(from)->RenameFile(from, to);
}

}  // namespace granary
