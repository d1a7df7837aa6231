// ConfinedEnv: an Env whose every file operation must stay inside DataRoots — the Env a
// pipeline's sources read through on a worker and the dispatcher, so that no source, glob or
// cache path of an untrusted pipeline reaches a file outside the roots. Operations on a path
// outside are PermissionDenied naming it (DataRoots::Check); a glob whose fixed directory is
// outside is refused before listing, and a match outside (a symlink in a root pointing out) is
// refused naming the match. FileExists answers false outside. Clocks are the base's.
// Thread-safe if the base is.
#ifndef GRANARY_SECURITY_CONFINED_ENV_H_
#define GRANARY_SECURITY_CONFINED_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "common/env_wrapper.h"
#include "security/data_roots.h"

namespace granary {

class ConfinedEnv : public EnvWrapper {
 public:
  // `base` must outlive this Env.
  ConfinedEnv(Env* base, DataRoots roots) : EnvWrapper(base), roots_(std::move(roots)) {}

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
};

}  // namespace granary

#endif  // GRANARY_SECURITY_CONFINED_ENV_H_
