// LeasedSplitProvider: a task's splits, leased from the dispatcher (DESIGN.md §3).
//
// The dispatcher answers GetSplits(task, seq) idempotently, so the sequence this provider
// yields is the task's journaled split sequence, whichever worker asks and however often: a
// restarted worker or one that took the task over replays exactly the splits the task had.
// Leases are fetched `lease_size` at a time to keep the journal off the hot path. An
// unreachable dispatcher (Unavailable, DeadlineExceeded) is retried with backoff until
// `cancelled` returns true, sleeping on `env`'s clock; other errors are returned. State: the next
// sequence number.
// Thread-compatible.
#ifndef GRANARY_WORKER_LEASED_SPLIT_PROVIDER_H_
#define GRANARY_WORKER_LEASED_SPLIT_PROVIDER_H_

#include <cstdint>
#include <deque>
#include <functional>

#include "common/env.h"
#include "pipeline/core/split_provider.h"
#include "worker/dispatcher_connection.h"

namespace granary {

class LeasedSplitProvider : public SplitProvider {
 public:
  // `dispatcher` and `env` must outlive the provider.
  LeasedSplitProvider(DispatcherConnection* dispatcher, Env* env, int64_t task_id,
                      int64_t lease_size, std::function<bool()> cancelled);

  absl::Status GetNext(Split* split, bool* end) override;
  absl::Status Save(StateWriter& writer) override;
  absl::Status Restore(const StateReader& reader) override;

 private:
  DispatcherConnection* const dispatcher_;
  Env* const env_;
  const int64_t task_id_;
  const int64_t lease_size_;
  const std::function<bool()> cancelled_;
  // Sequence number of the next split GetNext returns; fetched_ holds next_seq_, next_seq_+1, ...
  int64_t next_seq_ = 0;
  std::deque<Split> fetched_;
  bool end_ = false;
};

}  // namespace granary

#endif  // GRANARY_WORKER_LEASED_SPLIT_PROVIDER_H_
