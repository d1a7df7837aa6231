// MemoryLog: a DurableLog (durable_log.h) in memory, for tests of the dispatcher core and the
// classes around it: the test keeps the LogContents to look at the records and snapshot and
// to make appends fail.
#ifndef GRANARY_DISPATCHER_MEMORY_LOG_H_
#define GRANARY_DISPATCHER_MEMORY_LOG_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/durable_log.h"
#include "gtest/gtest.h"

namespace granary {

// What an in-memory log holds, shared by the test and the log the core owns.
struct LogContents {
  absl::Mutex mu;
  std::vector<std::string> records ABSL_GUARDED_BY(mu);  // Record seq i + 1 at index i.
  uint64_t snapshot_seq ABSL_GUARDED_BY(mu) = 0;
  std::string snapshot ABSL_GUARDED_BY(mu);
  // While not OK, every Append fails with it (and stores nothing).
  absl::Status fail_append ABSL_GUARDED_BY(mu);

  size_t size() {
    absl::MutexLock lock(&mu);
    return records.size();
  }
  void FailAppends(absl::Status status) {
    absl::MutexLock lock(&mu);
    fail_append = std::move(status);
  }
};

class MemoryLog final : public DurableLog {
 public:
  explicit MemoryLog(std::shared_ptr<LogContents> contents) : contents_(std::move(contents)) {}

  absl::StatusOr<Recovered> Recover() const override {
    absl::MutexLock lock(&contents_->mu);
    Recovered recovered;
    recovered.has_snapshot = contents_->snapshot_seq > 0;
    recovered.snapshot_seq = contents_->snapshot_seq;
    recovered.snapshot = contents_->snapshot;
    for (uint64_t seq = contents_->snapshot_seq + 1; seq <= contents_->records.size(); ++seq) {
      recovered.records.emplace_back(seq, contents_->records[seq - 1]);
    }
    return recovered;
  }
  absl::StatusOr<uint64_t> Append(std::string record) override {
    absl::MutexLock lock(&contents_->mu);
    if (!contents_->fail_append.ok()) return contents_->fail_append;
    contents_->records.push_back(std::move(record));
    return contents_->records.size();
  }
  absl::Status WriteSnapshot(uint64_t seq, std::string snapshot) override {
    absl::MutexLock lock(&contents_->mu);
    contents_->snapshot_seq = seq;
    contents_->snapshot = std::move(snapshot);
    return absl::OkStatus();
  }
  std::string Describe() const override { return "memory log"; }

 private:
  const std::shared_ptr<LogContents> contents_;
};

// A core over a MemoryLog of `contents` (the test fails, and nullptr is returned, if it does
// not open).
inline std::unique_ptr<DispatcherCore> OpenMemoryCore(std::shared_ptr<LogContents> contents,
                                                      const DispatcherCoreOptions& options = {}) {
  auto core = DispatcherCore::Open(std::make_unique<MemoryLog>(std::move(contents)), options);
  EXPECT_TRUE(core.ok()) << core.status();
  return core.ok() ? *std::move(core) : nullptr;
}

}  // namespace granary

#endif  // GRANARY_DISPATCHER_MEMORY_LOG_H_
