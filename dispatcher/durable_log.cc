#include "dispatcher/durable_log.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {

absl::StatusOr<DurableLog::Recovered> JournalLog::Recover() const {
  ASSIGN_OR_RETURN(Journal::Recovered journal, journal_->Recover());
  Recovered recovered;
  recovered.has_snapshot = journal.has_snapshot;
  recovered.snapshot_seq = journal.snapshot_seq;
  recovered.snapshot = std::move(journal.snapshot);
  recovered.records = std::move(journal.records);
  return recovered;
}

absl::StatusOr<uint64_t> JournalLog::Append(std::string record) {
  return journal_->Append(std::move(record));
}

absl::Status JournalLog::WriteSnapshot(uint64_t seq, std::string snapshot) {
  return journal_->WriteSnapshot(seq, std::move(snapshot));
}

std::string JournalLog::Describe() const { return absl::StrCat("journal ", dir_); }

}  // namespace granary
