#include "security/confined_env.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {

absl::StatusOr<std::unique_ptr<SequentialFile>> ConfinedEnv::NewSequentialFile(
    const std::string& path) {
  ASSIGN_OR_RETURN(const std::string resolved, roots_.Resolve("file", path));
  // A cache tier's value (redis://...) is no file: nothing to swap, nothing special to open.
  if (IsUrl(path)) return EnvWrapper::NewSequentialFile(path);
  // The resolved path has no symlink left, so one in its last component was swapped in since
  // the check and is not followed; one swapped in earlier on the way shows in real_path.
  absl::StatusOr<OpenedRegularFile> opened = open_file_(resolved);
  if (!opened.ok()) {
    if (resolved == path) return opened.status();
    return Annotate(opened.status(), absl::StrCat("file '", path, "'"));
  }
  RETURN_IF_ERROR(roots_.CheckOpened("file", path, opened->real_path));
  return std::move(opened->file);
}

absl::StatusOr<std::unique_ptr<WritableFile>> ConfinedEnv::NewWritableFile(
    const std::string& path) {
  RETURN_IF_ERROR(roots_.Check("file", path));
  return EnvWrapper::NewWritableFile(path);
}

bool ConfinedEnv::FileExists(const std::string& path) {
  return roots_.Check("file", path).ok() && EnvWrapper::FileExists(path);
}

absl::StatusOr<uint64_t> ConfinedEnv::GetFileSize(const std::string& path) {
  RETURN_IF_ERROR(roots_.Check("file", path));
  return EnvWrapper::GetFileSize(path);
}

absl::StatusOr<std::vector<std::string>> ConfinedEnv::Glob(const std::string& pattern) {
  RETURN_IF_ERROR(roots_.CheckPattern("file pattern", pattern));
  ASSIGN_OR_RETURN(std::vector<std::string> matches, EnvWrapper::Glob(pattern));
  for (const std::string& match : matches) {
    RETURN_IF_ERROR(roots_.Check("file", match));
  }
  return matches;
}

absl::StatusOr<std::vector<std::string>> ConfinedEnv::GetChildren(const std::string& dir) {
  RETURN_IF_ERROR(roots_.Check("directory", dir));
  return EnvWrapper::GetChildren(dir);
}

absl::Status ConfinedEnv::RenameFile(const std::string& from, const std::string& to) {
  RETURN_IF_ERROR(roots_.Check("file", from));
  RETURN_IF_ERROR(roots_.Check("file", to));
  return EnvWrapper::RenameFile(from, to);
}

absl::Status ConfinedEnv::DeleteFile(const std::string& path) {
  RETURN_IF_ERROR(roots_.Check("file", path));
  return EnvWrapper::DeleteFile(path);
}

absl::Status ConfinedEnv::CreateDirs(const std::string& dir) {
  RETURN_IF_ERROR(roots_.Check("directory", dir));
  return EnvWrapper::CreateDirs(dir);
}

absl::Status ConfinedEnv::DeleteDir(const std::string& dir) {
  RETURN_IF_ERROR(roots_.Check("directory", dir));
  return EnvWrapper::DeleteDir(dir);
}

absl::Status ConfinedEnv::SyncDir(const std::string& dir) {
  RETURN_IF_ERROR(roots_.Check("directory", dir));
  return EnvWrapper::SyncDir(dir);
}

}  // namespace granary
