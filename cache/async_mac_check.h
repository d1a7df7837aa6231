// AsyncMacCheck: a chunk's MAC check (CacheChunkGuard::MacCheck) run on a thread of its own, so
// the cache_read source hashes a chunk's records while it reads the next ones: a chunk's load
// takes about the longer of its read and its hashing, not their sum.
//
// Add hands a record over by reference: it must stay alive and unchanged until Finish returns
// (or this is destroyed). Destroying it without Finish abandons the check. Thread-compatible:
// one loading thread calls it.
#ifndef GRANARY_CACHE_ASYNC_MAC_CHECK_H_
#define GRANARY_CACHE_ASYNC_MAC_CHECK_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cache/cache_chunk_guard.h"

namespace granary {

class AsyncMacCheck {
 public:
  explicit AsyncMacCheck(std::unique_ptr<CacheChunkGuard::MacCheck> check);
  ~AsyncMacCheck();
  AsyncMacCheck(const AsyncMacCheck&) = delete;
  AsyncMacCheck& operator=(const AsyncMacCheck&) = delete;

  // Queues the chunk's next record.
  void Add(const std::string& record);
  // Waits until every record added is hashed; the check's verdict (CacheChunkGuard::MacCheck).
  absl::Status Finish();

 private:
  void Hash();

  const std::unique_ptr<CacheChunkGuard::MacCheck> check_;
  absl::Mutex mu_;
  std::deque<const std::string*> queued_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;     // no more records: hash the rest, then end
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;  // end now
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_ASYNC_MAC_CHECK_H_
