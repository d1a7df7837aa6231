// Env: the one door to the outside world (files, clock, sleep), injectable so tests can drop
// unsynced writes, fail an fsync or advance time (DESIGN.md §8). Modelled on leveldb's Env.
//
// Every error names the path it concerns. Env implementations are thread-safe; the file objects
// they return are thread-compatible.
#ifndef GRANARY_COMMON_ENV_H_
#define GRANARY_COMMON_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary {

// A file read front to back.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Reads up to `n` bytes into `scratch`; returns the number read, 0 only at end of file.
  virtual absl::StatusOr<size_t> Read(size_t n, char* scratch) = 0;
  // Skips `n` bytes. Skipping past the end leaves the file at its end (later reads return 0).
  virtual absl::Status Skip(uint64_t n) = 0;
  virtual const std::string& path() const = 0;
};

// A file written front to back. Data is durable only after Sync() returns OK.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
  // Pushes buffered data to the OS (not to the disk).
  virtual absl::Status Flush() = 0;
  // Makes everything appended so far durable (fsync).
  virtual absl::Status Sync() = 0;
  virtual absl::Status Close() = 0;
  virtual const std::string& path() const = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX Env. Never deleted.
  static Env* Default();

  // NotFound if `path` does not exist.
  virtual absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) = 0;
  // Creates or truncates `path`.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;

  virtual bool FileExists(const std::string& path) = 0;
  virtual absl::StatusOr<uint64_t> GetFileSize(const std::string& path) = 0;
  // Paths matching the shell pattern `pattern`, sorted. An empty vector when none match.
  virtual absl::StatusOr<std::vector<std::string>> Glob(const std::string& pattern) = 0;
  // Names (not paths) of the entries of `dir`, sorted, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) = 0;
  // Atomically replaces `to` with `from`.
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;
  virtual absl::Status DeleteFile(const std::string& path) = 0;
  // Creates `dir` and its missing parents; OK if it exists.
  virtual absl::Status CreateDirs(const std::string& dir) = 0;
  // Removes the empty directory `dir`.
  virtual absl::Status DeleteDir(const std::string& dir) = 0;
  // Makes the directory's entries (creations, renames) durable.
  virtual absl::Status SyncDir(const std::string& dir) = 0;

  virtual uint64_t NowMicros() = 0;
  virtual void SleepForMicros(uint64_t micros) = 0;
};

// Reads the whole of `path`.
absl::StatusOr<std::string> ReadFileToString(Env* env, const std::string& path);
// Writes `data` to `path`, replacing it; with `sync`, fsyncs the file before returning.
absl::Status WriteStringToFile(Env* env, const std::string& path, absl::string_view data,
                               bool sync);

}  // namespace granary

#endif  // GRANARY_COMMON_ENV_H_
