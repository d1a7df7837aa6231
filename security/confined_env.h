// ConfinedEnv: an Env whose every file operation must stay inside DataRoots — the Env a
// pipeline's sources read through on a worker and the dispatcher, so that no source, glob or
// cache path of an untrusted pipeline reaches a file outside the roots. Operations on a path
// outside are PermissionDenied naming it (DataRoots::Check); a glob whose fixed directory is
// outside is refused before listing, and a match outside (a symlink in a root pointing out) is
// refused naming the match. FileExists answers false outside. Clocks are the base's.
//
// A file is read only if it is a regular file of data (common/regular_file.h): a FIFO, a device,
// a socket, a directory or a file of /proc or /sys inside a root is InvalidArgument naming it
// and what it is, without blocking in open(). And it is checked again once open, by where the
// system says its descriptor leads: a symlink swapped in (by someone who can write inside a
// root) between the check and the open is PermissionDenied "file '<path>' was opened as
// '<real>', outside ..." or "... is a symbolic link, which is not followed" — nothing outside is
// read. Like the check itself (DataRoots resolves paths on the POSIX filesystem), opening a local
// file goes to the POSIX filesystem, not through `base`; paths of a cache tier's URL
// (redis://...) are checked lexically and opened through `base`. Thread-safe if the base is.
#ifndef GRANARY_SECURITY_CONFINED_ENV_H_
#define GRANARY_SECURITY_CONFINED_ENV_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/env_wrapper.h"
#include "common/regular_file.h"
#include "security/data_roots.h"

namespace granary {

class ConfinedEnv : public EnvWrapper {
 public:
  // How a local file is opened for reading: OpenRegularFile, or for tests a function that also
  // changes the files first (what someone writing inside a root could do after the check).
  using FileOpener = std::function<absl::StatusOr<OpenedRegularFile>(const std::string& path)>;

  // `base` must outlive this Env.
  ConfinedEnv(Env* base, DataRoots roots, FileOpener open_file = OpenRegularFile)
      : EnvWrapper(base), roots_(std::move(roots)), open_file_(std::move(open_file)) {}

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

  const DataRoots& roots() const { return roots_; }

 private:
  const DataRoots roots_;
  const FileOpener open_file_;
};

}  // namespace granary

#endif  // GRANARY_SECURITY_CONFINED_ENV_H_
