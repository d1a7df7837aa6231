#include "dispatcher/dispatcher_core.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/deterministic_serialization.h"
#include "common/failpoints.h"
#include "common/history_log.h"
#include "common/status_macros.h"
#include "dispatcher/state_invariants.h"
#include "glog/logging.h"

namespace granary {

absl::StatusOr<std::unique_ptr<DispatcherCore>> DispatcherCore::Open(
    std::shared_ptr<DurableLog> log, const DispatcherCoreOptions& options) {
  std::unique_ptr<DispatcherCore> core(new DispatcherCore(std::move(log), options));
  RETURN_IF_ERROR(core->Recover());
  return core;
}

absl::Status DispatcherCore::Recover() {
  const uint64_t start = options_.env->NowMicros();
  const std::string name = log_->Describe();
  GRANARY_HISTORY_RECORD("journal_recover", "invoke", "");
  ASSIGN_OR_RETURN(DurableLog::Recovered recovered, log_->Recover());
  absl::MutexLock lock(&mu_);
  if (recovered.has_snapshot) {
    DispatcherStateProto proto;
    if (!proto.ParseFromString(recovered.snapshot)) {
      return absl::DataLossError(
          absl::StrCat(name, ": snapshot at ", recovered.snapshot_seq, " does not parse"));
    }
    ASSIGN_OR_RETURN(state_, DispatcherState::FromProto(proto));
    RETURN_IF_ERROR(Annotate(CheckStateInvariants(state_),
                             absl::StrCat(name, ": snapshot at ", recovered.snapshot_seq)));
  }
  for (const auto& [seq, bytes] : recovered.records) {
    RETURN_IF_ERROR(ApplyRecord(seq, bytes));
  }
  GRANARY_HISTORY_RECORD("journal_recover", "ok", "last_seq=", state_.applied_seq(),
                         " snapshot_seq=", recovered.snapshot_seq);
  if (!recovered.records.empty()) {
    RETURN_IF_ERROR(Annotate(CheckStateInvariants(state_),
                             absl::StrCat(name, ": after replaying to ", state_.applied_seq())));
  }
  LOG(INFO) << "dispatcher recovered " << recovered.records.size() << " journal records"
            << (recovered.has_snapshot
                    ? absl::StrCat(" after the snapshot at ", recovered.snapshot_seq)
                    : "")
            << " in " << (options_.env->NowMicros() - start) / 1000 << " ms";
  return absl::OkStatus();
}

absl::Status DispatcherCore::ApplyRecord(uint64_t seq, const std::string& bytes) {
  Update update;
  if (!update.ParseFromString(bytes)) {
    return absl::DataLossError(
        absl::StrCat(log_->Describe(), ": record ", seq, " does not parse as an Update"));
  }
  // Apply's own status is informational (a record Apply refused changed nothing); only
  // ordering errors matter.
  const absl::Status status = state_.Apply(seq, update);
  if (state_.applied_seq() != seq) return status;
  GRANARY_HISTORY_RECORD("journal_replay", "ok", "seq=", seq, " crc=", crc32c::Value(bytes));
  if (options_.check_invariants) CheckInvariantsOrDie(seq);
  ++records_since_snapshot_;
  return absl::OkStatus();
}

absl::Status DispatcherCore::ApplyCommitted(uint64_t seq, const std::string& record) {
  absl::MutexLock lock(&mu_);
  if (seq <= state_.applied_seq()) return absl::OkStatus();
  if (seq != state_.applied_seq() + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(log_->Describe(), ": record ", seq, " arrived after record ",
                     state_.applied_seq(), "; the records between are missing"));
  }
  return ApplyRecord(seq, record);
}

uint64_t DispatcherCore::applied_seq() const {
  absl::MutexLock lock(&mu_);
  return state_.applied_seq();
}

absl::Status DispatcherCore::CheckUsable() const {
  absl::MutexLock lock(&mu_);
  return CheckUsableLocked();
}

absl::Status DispatcherCore::CheckUsableLocked() const {
  if (!failure_.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "dispatcher stopped after a journal failure (restart it): ", failure_.message()));
  }
  return absl::OkStatus();
}

void DispatcherCore::Stop(const absl::Status& failure) {
  if (failure_.ok()) failure_ = failure;
  LOG(ERROR) << "journal failed; the dispatcher stops changing state: " << failure;
}

void DispatcherCore::CheckInvariantsOrDie(uint64_t seq) const {
  const absl::Status status = CheckStateInvariants(state_);
  CHECK(status.ok()) << "after journal record " << seq << ": " << status;
}

bool DispatcherCore::Await(const std::function<bool(const DispatcherState&)>& done,
                           absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto settled = [this, &done]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done(state_) || !failure_.ok(); };
  mu_.AwaitWithTimeout(absl::Condition(&settled), timeout);
  return done(state_);
}

void DispatcherCore::AwaitNoBuild() {
  mu_.Await(absl::Condition(
      +[](DispatcherCore* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
        return !self->building_ || !self->failure_.ok();
      },
      this));
}

absl::Status DispatcherCore::Propose(const Update& update, const Then& then) {
  {
    absl::MutexLock lock(&mu_);
    AwaitNoBuild();
    RETURN_IF_ERROR(CheckUsableLocked());
    RETURN_IF_ERROR(state_.Validate(update));
    ++in_flight_;
  }
  return AppendAndApply(update, /*built=*/false, then);
}

absl::Status DispatcherCore::Propose(const Build& build, const Then& then) {
  Update update;
  {
    absl::MutexLock lock(&mu_);
    // One built proposal at a time; it waits for every proposal validated before it.
    AwaitNoBuild();
    RETURN_IF_ERROR(CheckUsableLocked());
    building_ = true;
    mu_.Await(absl::Condition(
        +[](DispatcherCore* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
          return self->in_flight_ == 0 || !self->failure_.ok();
        },
        this));
    absl::Status built = CheckUsableLocked();
    if (built.ok()) {
      absl::StatusOr<Update> proposed = build(state_);
      built = proposed.ok() ? state_.Validate(*proposed) : proposed.status();
      if (built.ok()) update = *std::move(proposed);
    }
    if (!built.ok()) {
      building_ = false;
      return built;
    }
    ++in_flight_;
  }
  return AppendAndApply(update, /*built=*/true, then);
}

absl::Status DispatcherCore::AppendAndApply(const Update& update, bool built, const Then& then) {
  absl::StatusOr<uint64_t> seq = log_->Append(SerializeDeterministically(update));
  if (seq.ok()) {
    GRANARY_HISTORY_RECORD("journal_commit", "ok", "seq=", *seq,
                           " crc=", crc32c::Value(SerializeDeterministically(update)));
  }
  // An injected error here is an apply that cannot happen: like a failed append, it stops the
  // core (the record is durable; a restart replays it).
  if (seq.ok()) {
    if (absl::Status injected = HitFailpoint(kJournalAfterWriteBeforeApply); !injected.ok()) {
      seq = injected;
    }
  }
  absl::Status applied;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    if (built) building_ = false;
    if (absl::IsUnavailable(seq.status())) {
      // Not written (a full disk), and the log makes sure it never will be: nothing to apply,
      // no fail-stop. The client retries; the log resumes once space is freed — or, if its
      // files were deleted under it, refuses every later append the same way (its own
      // fail-stop).
      --in_flight_;
      LOG_EVERY_N(WARNING, 100) << "journal append refused, state unchanged: " << seq.status();
      return seq.status();
    }
    if (!seq.ok()) {
      --in_flight_;
      Stop(seq.status());
      return CheckUsableLocked();
    }
    // Apply in sequence order: wait for every earlier record's proposer to apply its own (or for
    // a log failure, after which an earlier record may never be applied).
    struct Turn {
      const DispatcherCore* self;
      uint64_t previous;
    } turn{this, *seq - 1};
    mu_.Await(absl::Condition(
        +[](Turn* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->self->mu_) {
          return t->self->state_.applied_seq() == t->previous || !t->self->failure_.ok();
        },
        &turn));
    --in_flight_;
    RETURN_IF_ERROR(CheckUsableLocked());
    applied = state_.Apply(*seq, update);
    if (options_.check_invariants) CheckInvariantsOrDie(*seq);
    ++records_since_snapshot_;
    if (applied.ok() && then != nullptr) then(state_);
    snapshot = SnapshotIfDue();
  }
  // Written outside the lock (leveldb's LogAndApply writes its MANIFEST so): a large state's
  // write and fsync never stall the readers.
  if (snapshot.has_value()) RETURN_IF_ERROR(WriteSnapshot(*snapshot));
  return applied;
}

std::optional<DispatcherCore::Snapshot> DispatcherCore::SnapshotIfDue() {
  if (records_since_snapshot_ < options_.snapshot_every || snapshot_in_flight_) {
    return std::nullopt;
  }
  snapshot_in_flight_ = true;
  records_since_snapshot_ = 0;
  return Snapshot{state_.applied_seq(), SerializeDeterministically(state_.ToProto())};
}

absl::Status DispatcherCore::WriteSnapshot(const Snapshot& snapshot) {
  const absl::Status status = log_->WriteSnapshot(snapshot.seq, snapshot.bytes);
  absl::MutexLock lock(&mu_);
  snapshot_in_flight_ = false;
  if (absl::IsUnavailable(status)) {
    // Not written (a full disk): the records stay in the log; retried after the next one.
    LOG_EVERY_N(WARNING, 100) << "journal snapshot postponed: " << status;
    records_since_snapshot_ = options_.snapshot_every;
    return absl::OkStatus();
  }
  if (!status.ok()) {
    Stop(status);
    return CheckUsableLocked();
  }
  return absl::OkStatus();
}

}  // namespace granary
