#include "journal/fault_injection_fs.h"

#include <utility>

#include "absl/strings/match.h"

namespace granary {
namespace {

// A WAL file whose syncs fail while the shared state says so.
class FailableWalFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FailableWalFile(std::unique_ptr<rocksdb::FSWritableFile> file,
                  std::shared_ptr<FaultInjectionFileSystem::State> state)
      : FSWritableFileOwnerWrapper(std::move(file)), state_(std::move(state)) {}

  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
    if (ShouldFail()) return Injected(*state_);
    return FSWritableFileOwnerWrapper::Sync(options, dbg);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (ShouldFail()) return Injected(*state_);
    return FSWritableFileOwnerWrapper::Fsync(options, dbg);
  }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    if (ShouldFail()) return Injected(*state_);
    return FSWritableFileOwnerWrapper::RangeSync(offset, nbytes, options, dbg);
  }

 private:
  bool ShouldFail() {
    if (!state_->fail_wal_syncs.load()) return false;
    state_->wal_syncs_failed.fetch_add(1);
    return true;
  }
  static rocksdb::IOStatus Injected(const FaultInjectionFileSystem::State& state) {
    if (state.no_space.load()) return rocksdb::IOStatus::NoSpace("injected WAL sync failure");
    return rocksdb::IOStatus::IOError("injected WAL sync failure");
  }

  std::shared_ptr<FaultInjectionFileSystem::State> state_;
};

}  // namespace

FaultInjectionFileSystem::FaultInjectionFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
    : FileSystemWrapper(std::move(base)) {}

rocksdb::IOStatus FaultInjectionFileSystem::MaybeWrap(
    const std::string& fname, rocksdb::IOStatus status,
    std::unique_ptr<rocksdb::FSWritableFile>* result) {
  if (status.ok() && absl::EndsWith(fname, ".log")) {
    *result = std::make_unique<FailableWalFile>(std::move(*result), state_);
  }
  return status;
}

rocksdb::IOStatus FaultInjectionFileSystem::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return MaybeWrap(fname, target()->NewWritableFile(fname, options, result, dbg), result);
}

rocksdb::IOStatus FaultInjectionFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return MaybeWrap(fname, target()->ReopenWritableFile(fname, options, result, dbg), result);
}

rocksdb::IOStatus FaultInjectionFileSystem::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return MaybeWrap(fname, target()->ReuseWritableFile(fname, old_fname, options, result, dbg),
                   result);
}

}  // namespace granary
