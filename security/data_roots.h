// DataRoots: the directories a pipeline's files may come from (`--data_roots` of the dispatcher
// and the workers; SECURITY.md). A pipeline is untrusted input: without this, any client could
// have a worker read /etc/passwd through a text_lines source, or list the dispatcher's
// directories through a glob. Paths are compared after resolving symlinks and "..", so neither a
// "../.." pattern nor a symlink inside a root that points out of it escapes.
//
// A root is a directory — or a cache tier's URL (redis://HOST:PORT/PREFIX, the cache root the
// dispatcher names), whose paths are compared lexically. A path is checked when it is used;
// ConfinedEnv checks a file it opens a second time, by the path the system gives the open
// descriptor (CheckOpened), so a symlink swapped in between is caught too. Hard links are not
// (a link is a name inside the root like any other; SECURITY.md says why that is accepted).
#ifndef GRANARY_SECURITY_DATA_ROOTS_H_
#define GRANARY_SECURITY_DATA_ROOTS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace granary {

class DataRoots {
 public:
  // No roots: every path is refused.
  DataRoots() = default;

  // Each root canonicalized (absolute, symlinks and ".." resolved). InvalidArgument naming a
  // root that does not exist or is not a directory. Empty strings are skipped (so an empty
  // comma-separated flag gives no roots).
  static absl::StatusOr<DataRoots> Create(const std::vector<std::string>& roots);

  // A copy that also allows `dir` (e.g. the cache root the dispatcher names). `dir` need not
  // exist yet: its longest existing ancestor is resolved and the rest appended.
  DataRoots With(const std::string& dir) const;

  // OK when `path` (absolute or relative to the working directory; it need not exist) resolves
  // inside a root. A path holding a NUL byte is PermissionDenied (the system would open the
  // part before it). PermissionDenied "<what> '<path>' resolves to '<real>', outside the data
  // roots (<roots>)" otherwise — or "... no data roots are configured (--data_roots)".
  absl::Status Check(const std::string& what, const std::string& path) const;

  // Check, returning the path `path` resolves to on success.
  absl::StatusOr<std::string> Resolve(const std::string& what, const std::string& path) const;

  // OK when `real_path` — where a file opened as `path` really is, as the system names its
  // descriptor — is inside a root. PermissionDenied "<what> '<path>' was opened as '<real>',
  // outside the data roots (<roots>)" otherwise: something was swapped on the way since `path`
  // was checked.
  absl::Status CheckOpened(const std::string& what, const std::string& path,
                           const std::string& real_path) const;

  // A glob pattern: the directory before its first wildcard component must resolve inside a
  // root, so nothing outside is even listed. PermissionDenied "<what> '<pattern>' lists
  // '<real>', outside ...". (The files it matches are checked one by one when used.)
  absl::Status CheckPattern(const std::string& what, const std::string& pattern) const;

  const std::vector<std::string>& roots() const { return roots_; }

 private:
  explicit DataRoots(std::vector<std::string> roots) : roots_(std::move(roots)) {}
  // OK when `resolved` is inside a root; else PermissionDenied "<subject> '<resolved>', ...".
  absl::Status CheckResolved(const std::string& subject, const std::string& resolved) const;

  std::vector<std::string> roots_;
};

// Whether `path` is a URL (a cache tier's, redis://HOST:PORT/PREFIX): it starts with a scheme —
// a letter, then letters, digits, '+', '-' or '.' — followed by "://". Only such a path is
// compared lexically and handed to the tier; "/data/x://etc/passwd" is a local path (with a
// directory named "x:"), resolved and opened as every other one.
bool IsUrl(absl::string_view path);

// `path` made absolute with symlinks and "." / ".." resolved as far as it exists; components
// after the longest existing ancestor are appended with "." and ".." applied lexically. A URL
// (a cache tier's root, redis://HOST:PORT/PREFIX) is normalized lexically, never above its
// authority.
std::string ResolvePath(const std::string& path);

}  // namespace granary

#endif  // GRANARY_SECURITY_DATA_ROOTS_H_
