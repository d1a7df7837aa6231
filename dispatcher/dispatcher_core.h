// DispatcherCore: the dispatcher's replicated-state-machine core (DESIGN.md §3). It owns the
// durable log (durable_log.h), the DispatcherState, the apply-in-sequence wait, snapshots and
// fail-stop, and has one way to change the state — Propose(update) — and one to look at it —
// Read(fn), under its lock. The dispatcher's handlers and subsystems (dispatcher_impl.h) talk
// to it only through these.
//
// Propose(update): under the lock, refuses an update DispatcherState::Validate refuses (nothing
// is journaled); else appends it to the log — concurrent proposals are group-committed by the
// log — and, once it is durable and every earlier record is applied, applies it, runs `then`
// on the state it produced (still under the lock) and returns. An acknowledged change is
// never lost: a restarted dispatcher recovers the newest snapshot and replays the records
// after it. The update's Validate ran against the state at proposal; should a concurrently
// proposed record change the state first, Apply refuses it as Validate would (it changes
// nothing) and Propose returns that refusal without running `then`. Every `snapshot_every`
// records the state is serialized under the lock and written to the log outside it.
//
// Propose(build): for an update that is itself a decision on the state (which mode an epoch
// uses its cache in): under the lock, once every proposal validated before it is applied, runs
// build(state) and proposes what it returns as above; later proposals wait for its record to
// be appended before they are validated. So the state it was built on is the state it is
// applied to: it is never overtaken. Such proposals are serialized with each other, and stall
// the others for one append: for rare decisions, not the hot path.
//
// Fail-stop: if the log fails an append or a snapshot (an indeterminate record), the core
// stops changing state: every later Propose is refused with Unavailable naming the first
// failure (CheckUsable), until the process is restarted; Read goes on. Except on a full disk:
// an update the log refuses with Unavailable was not written, so it is not applied, Propose
// returns that Unavailable and later proposals are tried again.
//
// A replicated log plugs in under it (issue 32): the core assumes only that Append returns the
// record's position once it is committed, in order, and that any other failure means this
// replica may no longer change state — a deposed leader then fail-stops like a failed disk.
//
// Thread-safe.
#ifndef GRANARY_DISPATCHER_DISPATCHER_CORE_H_
#define GRANARY_DISPATCHER_DISPATCHER_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "dispatcher/dispatcher_state.h"
#include "dispatcher/durable_log.h"
#include "proto/journal.pb.h"

namespace granary {

struct DispatcherCoreOptions {
  // Write a full state snapshot every this many records.
  int64_t snapshot_every = 10000;
  // Checks the state invariants (state_invariants.h) after every applied record and aborts the
  // process on a violation. For tests: the check walks the whole state.
  bool check_invariants = false;
  // Times the recovery (for its log line).
  Env* env = Env::Default();
};

class DispatcherCore {
 public:
  // Recovers the state from `log`: its newest snapshot, then every record after it. DataLoss
  // names a snapshot or record that does not parse, or a recovered state that breaks an
  // invariant (state_invariants.h); the log's own Recover errors are returned as they are.
  // `log` may be shared with its owner (a replica leads and follows through its journal).
  static absl::StatusOr<std::unique_ptr<DispatcherCore>> Open(std::shared_ptr<DurableLog> log,
                                                              const DispatcherCoreOptions& options);
  DispatcherCore(const DispatcherCore&) = delete;
  DispatcherCore& operator=(const DispatcherCore&) = delete;

  // Runs under the lock on the state just produced by a proposed update.
  using Then = std::function<void(const DispatcherState&)>;
  // Journals and applies `update` (see the header comment); runs `then`, if any, once it
  // applied. Errors: Validate's refusal (nothing journaled), or Apply's when a concurrent
  // record overtook it (journaled, no effect); Unavailable after fail-stop or when the log
  // refused the record (a full disk).
  absl::Status Propose(const Update& update, const Then& then = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // Returns the update to propose, decided on `state`; runs under the lock.
  using Build = std::function<absl::StatusOr<Update>(const DispatcherState&)>;
  // Journals and applies the update build(state) returns (see the header comment), which
  // applies as built: errors are build's own, Validate's refusal of it (nothing journaled),
  // and Unavailable as above. `build` and `then` must not call back into the core.
  absl::Status Propose(const Build& build, const Then& then = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // Returns fn(state) with fn run under the lock. `fn` must not call back into the core.
  template <typename Fn>
  auto Read(Fn&& fn) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return fn(state_);
  }

  // Waits, releasing the lock, until `done(state)` holds or the core has stopped, for at most
  // `timeout`. Returns whether `done` holds.
  bool Await(const std::function<bool(const DispatcherState&)>& done, absl::Duration timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // OK, or Unavailable naming the log failure that stopped the core (fail-stop).
  absl::Status CheckUsable() const ABSL_LOCKS_EXCLUDED(mu_);

  // For a replica that follows (replication/dispatcher_replica.h): applies `record`, which the
  // leader committed at `seq`, as recovery replays records. Records must come in order: a seq
  // at or below the applied one is ignored (delivered twice); one past the next is
  // FailedPrecondition naming the gap (the follower reloads from the log's snapshot); a record
  // that does not parse is DataLoss. Not while this core's own proposals are in flight: a
  // replica follows or leads, never both at once.
  absl::Status ApplyCommitted(uint64_t seq, const std::string& record) ABSL_LOCKS_EXCLUDED(mu_);
  // The seq of the last record applied.
  uint64_t applied_seq() const ABSL_LOCKS_EXCLUDED(mu_);
  // The log's name for messages (DurableLog::Describe).
  std::string DescribeLog() const { return log_->Describe(); }

 private:
  DispatcherCore(std::shared_ptr<DurableLog> log, const DispatcherCoreOptions& options)
      : options_(options), log_(std::move(log)) {}
  absl::Status Recover() ABSL_LOCKS_EXCLUDED(mu_);
  // Applies a committed record at `seq` = applied_seq + 1 (recovery and ApplyCommitted):
  // DataLoss, naming the log, if it does not parse.
  absl::Status ApplyRecord(uint64_t seq, const std::string& bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckUsableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until no built proposal is under way (or the core has stopped).
  void AwaitNoBuild() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends the validated `update` (counted in in_flight_; built: it holds building_), applies
  // it in sequence and runs `then` (Propose's second half, outside the lock).
  absl::Status AppendAndApply(const Update& update, bool built, const Then& then)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records the first failure of the log: the core stops (fail-stop).
  void Stop(const absl::Status& failure) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For options_.check_invariants: aborts, naming record `seq`, if the state is inconsistent.
  void CheckInvariantsOrDie(uint64_t seq) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A serialized state, to be written as the log's snapshot at `seq`.
  struct Snapshot {
    uint64_t seq;
    std::string bytes;
  };
  // Every snapshot_every records (unless a snapshot is being written): the state, serialized
  // under the lock.
  std::optional<Snapshot> SnapshotIfDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes it to the log, outside the lock; a failure stops the core like a failed append.
  absl::Status WriteSnapshot(const Snapshot& snapshot) ABSL_LOCKS_EXCLUDED(mu_);

  const DispatcherCoreOptions options_;
  const std::shared_ptr<DurableLog> log_;

  mutable absl::Mutex mu_;
  DispatcherState state_ ABSL_GUARDED_BY(mu_);
  // Set when the log failed: the core refuses to go on (fail-stop).
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  int64_t records_since_snapshot_ ABSL_GUARDED_BY(mu_) = 0;
  // Proposals validated and not yet applied (or failed).
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Set from when a built proposal starts waiting for in_flight_ to drain until its record is
  // appended: no other proposal is validated meanwhile.
  bool building_ ABSL_GUARDED_BY(mu_) = false;
  // Set while a snapshot is written outside the lock: one at a time, in order.
  bool snapshot_in_flight_ ABSL_GUARDED_BY(mu_) = false;
};

// A proposal refused because its effect is there already (AlreadyExists: the same update was
// proposed twice, e.g. a report repeated) did what its caller wanted: OK; else `proposed`.
inline absl::Status OkIfAlreadyDone(const absl::Status& proposed) {
  return absl::IsAlreadyExists(proposed) ? absl::OkStatus() : proposed;
}

}  // namespace granary

#endif  // GRANARY_DISPATCHER_DISPATCHER_CORE_H_
