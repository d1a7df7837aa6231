#include "security/data_roots.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace granary {
namespace {

std::string Parent(const std::string& dir) {
  const size_t slash = dir.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
}

std::string Child(const std::string& dir, absl::string_view name) {
  return dir == "/" ? absl::StrCat("/", name) : absl::StrCat(dir, "/", name);
}

bool Inside(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (absl::StartsWith(path, root) && path[root.size()] == '/');
}

// The system sees a path only up to its first NUL: "<root>/../../etc/passwd\0/../<root>/x"
// would be checked as a path inside the root and opened as /etc/passwd.
absl::Status HoldsNul(const std::string& what, const std::string& path) {
  return absl::PermissionDeniedError(absl::StrCat(
      what, " '", absl::CEscape(path), "' holds a NUL byte (the system would see another path)"));
}

bool HasWildcard(absl::string_view component) {
  return component.find_first_of("*?[") != absl::string_view::npos;
}

}  // namespace

bool IsUrl(absl::string_view path) {
  const size_t scheme = path.find("://");
  if (scheme == absl::string_view::npos || scheme == 0 || !absl::ascii_isalpha(path[0])) {
    return false;
  }
  for (const char c : path.substr(0, scheme)) {
    if (!absl::ascii_isalnum(c) && c != '+' && c != '-' && c != '.') return false;
  }
  return true;
}

std::string ResolvePath(const std::string& path) {
  // A URL (a cache tier's, redis://HOST:PORT/PREFIX) names no local file: its path part is
  // normalized lexically ("." dropped, ".." climbing, never above the authority), so a root
  // and the paths under it compare as paths do.
  if (IsUrl(path)) {
    const size_t scheme = path.find("://");
    const size_t slash = path.find('/', scheme + 3);
    std::vector<absl::string_view> kept;
    if (slash != std::string::npos) {
      for (absl::string_view component :
           absl::StrSplit(absl::string_view(path).substr(slash), '/', absl::SkipEmpty())) {
        if (component == ".") continue;
        if (component == "..") {
          if (!kept.empty()) kept.pop_back();
          continue;
        }
        kept.push_back(component);
      }
    }
    const std::string authority = path.substr(0, slash);
    return kept.empty() ? authority : absl::StrCat(authority, "/", absl::StrJoin(kept, "/"));
  }
  std::string absolute = path;
  if (!absl::StartsWith(path, "/")) {
    char cwd[PATH_MAX];
    absolute = absl::StrCat(getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "/", "/", path);
  }
  // A path that exists — every file a source opens or a glob matches — resolves in one call;
  // the walk below is for paths with components that do not exist (yet), and for those with a
  // NUL byte, which the system would cut short.
  char real[PATH_MAX];
  if (!absl::StrContains(absolute, '\0') && realpath(absolute.c_str(), real) != nullptr) {
    return real;
  }
  std::string resolved = "/";
  // `resolved` is canonical as long as every component so far existed; past a missing one it
  // is extended lexically — until ".." climbs back to the canonical part (`last_existing`), from
  // where components are resolved again (else "<root>/missing/../link" would keep `link`, a
  // symlink out of the root, unresolved).
  bool exists = true;
  std::string last_existing;
  for (absl::string_view component : absl::StrSplit(absolute, '/', absl::SkipEmpty())) {
    if (component == ".") continue;
    if (component == "..") {
      resolved = Parent(resolved);
      if (!exists && resolved.size() <= last_existing.size()) exists = true;
      continue;
    }
    std::string next = Child(resolved, component);
    if (exists) {
      if (realpath(next.c_str(), real) != nullptr) {
        resolved = real;
        continue;
      }
      exists = false;
      last_existing = resolved;
    }
    resolved = std::move(next);
  }
  return resolved;
}

absl::StatusOr<DataRoots> DataRoots::Create(const std::vector<std::string>& roots) {
  std::vector<std::string> canonical;
  for (const std::string& root : roots) {
    if (root.empty()) continue;
    char real[PATH_MAX];
    struct stat info;
    if (realpath(root.c_str(), real) == nullptr || stat(real, &info) != 0 ||
        !S_ISDIR(info.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("data root '", root, "' is not an existing directory"));
    }
    canonical.emplace_back(real);
  }
  return DataRoots(std::move(canonical));
}

DataRoots DataRoots::With(const std::string& dir) const {
  DataRoots copy = *this;
  if (!dir.empty()) copy.roots_.push_back(ResolvePath(dir));
  return copy;
}

absl::Status DataRoots::Check(const std::string& what, const std::string& path) const {
  return Resolve(what, path).status();
}

absl::StatusOr<std::string> DataRoots::Resolve(const std::string& what,
                                               const std::string& path) const {
  if (absl::StrContains(path, '\0')) return HoldsNul(what, path);
  std::string resolved = ResolvePath(path);
  RETURN_IF_ERROR(CheckResolved(absl::StrCat(what, " '", path, "' resolves to"), resolved));
  return resolved;
}

absl::Status DataRoots::CheckOpened(const std::string& what, const std::string& path,
                                    const std::string& real_path) const {
  return CheckResolved(absl::StrCat(what, " '", path, "' was opened as"), real_path);
}

absl::Status DataRoots::CheckPattern(const std::string& what, const std::string& pattern) const {
  if (absl::StrContains(pattern, '\0')) return HoldsNul(what, pattern);
  std::vector<absl::string_view> fixed;
  for (absl::string_view component : absl::StrSplit(pattern, '/')) {
    if (HasWildcard(component)) break;
    fixed.push_back(component);
  }
  if (fixed.size() == static_cast<size_t>(absl::c_count(pattern, '/')) + 1) {
    return Check(what, pattern);  // no wildcard: the pattern names one path
  }
  std::string directory = absl::StrJoin(fixed, "/");
  if (directory.empty()) directory = absl::StartsWith(pattern, "/") ? "/" : ".";
  return CheckResolved(absl::StrCat(what, " '", pattern, "' lists"), ResolvePath(directory));
}

absl::Status DataRoots::CheckResolved(const std::string& subject,
                                      const std::string& resolved) const {
  for (const std::string& root : roots_) {
    if (Inside(resolved, root)) return absl::OkStatus();
  }
  const std::string outside =
      roots_.empty() ? "but no data roots are configured (--data_roots)"
                     : absl::StrCat("outside the data roots (", absl::StrJoin(roots_, ", "), ")");
  return absl::PermissionDeniedError(absl::StrCat(subject, " '", resolved, "', ", outside));
}

}  // namespace granary
