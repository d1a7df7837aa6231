#include "replication/etcd_journal.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "proto/replication.pb.h"

namespace granary {
namespace {

using etcdserverpb::Compare;

// How many keys one Range of a recovery reads: records and snapshot chunks are up to
// max_txn_bytes each, and a response must stay under the client's max_response_bytes.
constexpr int64_t kRecoveryPageKeys = 32;

std::string SeqDigits(uint64_t seq) { return absl::StrFormat("%020u", seq); }

// The first byte of a record key's value (FORMAT.md): the record follows, or it is stored in
// parts and an EtcdRecordParts follows.
constexpr char kWholeRecord = 'R';
constexpr char kPartedRecord = 'P';

}  // namespace

EtcdJournal::EtcdJournal(etcd::EtcdClient* client, EtcdJournalOptions options)
    : client_(client),
      options_(std::move(options)),
      instruments_(JournalMetrics::In(options_.metrics)) {}

std::string EtcdJournal::Describe() const {
  return absl::StrCat("etcd journal ", absl::StrJoin(client_->endpoints(), ","),
                      options_.prefix);
}

std::string EtcdJournal::RecordKey(uint64_t seq) const {
  return absl::StrCat(options_.prefix, "/log/", SeqDigits(seq));
}

absl::StatusOr<std::unique_ptr<EtcdJournal>> EtcdJournal::Open(etcd::EtcdClient* client,
                                                               EtcdJournalOptions options) {
  if (options.prefix.empty() || options.prefix.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd journal prefix '", options.prefix, "' must be non-empty without a trailing '/'"));
  }
  std::unique_ptr<EtcdJournal> journal(new EtcdJournal(client, std::move(options)));
  const std::string& prefix = journal->options_.prefix;
  const std::string format_key = prefix + "/format";
  EtcdJournalFormat format;
  format.set_version(kEtcdJournalFormatVersion);
  etcdserverpb::TxnRequest create;
  *create.add_compare() = etcd::txn::CreateRevision(format_key, Compare::EQUAL, 0);
  *create.add_success() = etcd::txn::PutOp(format_key, format.SerializeAsString());
  *create.add_failure() = etcd::txn::RangeOp(format_key);
  ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse existing,
                   client->Range(format_key));
  if (existing.kvs_size() == 0) {
    // A new journal, unless something else writes under the prefix.
    ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse other,
                     client->Range(prefix + "/", etcd::PrefixRangeEnd(prefix + "/"), 0, 1));
    if (other.kvs_size() > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          journal->Describe(), ": the prefix holds keys Granary did not write (e.g. '",
          other.kvs(0).key(), "') and no ", format_key,
          ": give the dispatchers a prefix of their own (--journal etcd://.../PREFIX)"));
    }
  }
  ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse created, client->Txn(create));
  if (!created.succeeded()) {
    const auto& kvs = created.responses(0).response_range().kvs();
    EtcdJournalFormat found;
    if (kvs.empty() || !found.ParseFromString(kvs[0].value()) ||
        found.version() != kEtcdJournalFormatVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          journal->Describe(), ": ", format_key, " does not name format version ",
          kEtcdJournalFormatVersion, " (found ",
          kvs.empty() ? "nothing" : absl::StrCat("version ", found.version()),
          "): the prefix holds another program's data or another Granary's journal format"));
    }
  }
  return journal;
}

absl::StatusOr<DurableLog::Recovered> EtcdJournal::Recover() const {
  const std::string& prefix = options_.prefix;
  ASSIGN_OR_RETURN(const SnapshotHeadRead read, ReadSnapshotHead());
  // Every later read is at this revision: one consistent view of the journal.
  const int64_t revision = read.revision;
  Recovered recovered;
  if (read.head.has_value()) {
    const EtcdSnapshotHead& head = *read.head;
    ASSIGN_OR_RETURN(recovered.snapshot,
                     ReadChunks(SnapshotPrefix(head.seq()), revision,
                                absl::StrCat("the snapshot at record ", head.seq()), head.chunks(),
                                head.bytes(), head.xxh64()));
    recovered.has_snapshot = true;
    recovered.snapshot_seq = head.seq();
  }
  const std::string log_prefix = prefix + "/log/";
  uint64_t expected = recovered.snapshot_seq + 1;
  RETURN_IF_ERROR(ForEachKey(
      RecordKey(expected), log_prefix, revision,
      [&](const mvccpb::KeyValue& kv) -> absl::Status {
        uint64_t seq = 0;
        if (!absl::SimpleAtoi(absl::string_view(kv.key()).substr(log_prefix.size()), &seq) ||
            seq != expected) {
          return absl::DataLossError(absl::StrCat(Describe(), ": after record ", expected - 1,
                                                  " the next key is '", kv.key(), "', not ",
                                                  RecordKey(expected)));
        }
        ASSIGN_OR_RETURN(std::string record, RecordOf(seq, kv.value(), revision));
        recovered.records.emplace_back(seq, std::move(record));
        ++expected;
        return absl::OkStatus();
      }));
  absl::MutexLock lock(&mu_);
  recovered_revision_ = revision;
  return recovered;
}

int64_t EtcdJournal::recovered_revision() const {
  absl::MutexLock lock(&mu_);
  return recovered_revision_;
}

absl::StatusOr<uint64_t> EtcdJournal::LastSeq() const {
  const std::string log_prefix = options_.prefix + "/log/";
  etcdserverpb::RangeRequest last;
  last.set_key(log_prefix);
  last.set_range_end(etcd::PrefixRangeEnd(log_prefix));
  last.set_limit(1);
  last.set_keys_only(true);
  last.set_sort_order(etcdserverpb::RangeRequest::DESCEND);
  last.set_sort_target(etcdserverpb::RangeRequest::KEY);
  ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse found, client_->Range(last));
  if (found.kvs_size() > 0) {
    uint64_t seq = 0;
    if (!absl::SimpleAtoi(absl::string_view(found.kvs(0).key()).substr(log_prefix.size()),
                          &seq)) {
      return absl::DataLossError(
          absl::StrCat(Describe(), ": '", found.kvs(0).key(), "' is not a record key"));
    }
    return seq;
  }
  // No record after the snapshot: the snapshot's seq.
  ASSIGN_OR_RETURN(const SnapshotHeadRead read, ReadSnapshotHead());
  return read.head.has_value() ? read.head->seq() : 0;
}

absl::StatusOr<EtcdJournal::SnapshotHeadRead> EtcdJournal::ReadSnapshotHead() const {
  const std::string key = options_.prefix + "/snapshot_head";
  ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse found, client_->Range(key));
  SnapshotHeadRead read;
  read.revision = found.header().revision();
  if (found.kvs_size() > 0) {
    read.head.emplace();
    if (!read.head->ParseFromString(found.kvs(0).value())) {
      return absl::DataLossError(absl::StrCat(Describe(), ": ", key, " does not parse"));
    }
  }
  return read;
}

absl::StatusOr<std::unique_ptr<etcd::EtcdWatch>> EtcdJournal::Follow(
    int64_t from_revision, RecordCallback on_record, etcd::EtcdWatch::EndCallback on_end) {
  const std::string log_prefix = options_.prefix + "/log/";
  return etcd::EtcdWatch::Start(
      client_, log_prefix, etcd::PrefixRangeEnd(log_prefix), from_revision,
      [this, log_prefix, on_record = std::move(on_record)](
          const google::protobuf::RepeatedPtrField<mvccpb::Event>& events) {
        for (const mvccpb::Event& event : events) {
          // Deletes are the records a snapshot covers, being dropped.
          if (event.type() != mvccpb::Event::PUT) continue;
          uint64_t seq = 0;
          if (!absl::SimpleAtoi(absl::string_view(event.kv().key()).substr(log_prefix.size()),
                                &seq)) {
            LOG(ERROR) << "skipping '" << event.kv().key() << "': not a journal record key";
            continue;
          }
          // A parted record's parts were committed before its key: read as of its revision.
          absl::StatusOr<std::string> record =
              RecordOf(seq, event.kv().value(), event.kv().mod_revision());
          on_record(seq, record);
        }
      },
      std::move(on_end));
}

void EtcdJournal::Lead(std::string election_key, int64_t election_revision, uint64_t next_seq,
                       std::function<void(const absl::Status&)> on_deposed) {
  absl::MutexLock lock(&mu_);
  leading_ = true;
  not_leading_ = absl::OkStatus();
  election_key_ = std::move(election_key);
  election_revision_ = election_revision;
  next_seq_ = next_seq;
  on_deposed_ = std::move(on_deposed);
}

void EtcdJournal::StopLeading(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (leading_) not_leading_ = why;
  leading_ = false;
  on_deposed_ = nullptr;
}

bool EtcdJournal::leading() const {
  absl::MutexLock lock(&mu_);
  return leading_;
}

void EtcdJournal::Depose(const absl::Status& why) {
  std::function<void(const absl::Status&)> on_deposed;
  {
    absl::MutexLock lock(&mu_);
    if (!leading_) return;
    leading_ = false;
    not_leading_ = absl::UnavailableError(
        absl::StrCat(Describe(), ": this replica stopped leading: ", why.message()));
    on_deposed = std::move(on_deposed_);
    on_deposed_ = nullptr;
  }
  LOG(WARNING) << Describe() << ": this replica stops leading: " << why;
  if (on_deposed) on_deposed(why);
}

absl::Status EtcdJournal::CheckLeading() const {
  if (leading_) return absl::OkStatus();
  if (!not_leading_.ok()) return not_leading_;
  return absl::UnavailableError(absl::StrCat(Describe(), ": this replica does not lead"));
}

void EtcdJournal::AddFence(etcdserverpb::TxnRequest& txn) const {
  *txn.add_compare() = etcd::txn::CreateRevision(election_key_, Compare::EQUAL, election_revision_);
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdJournal::FencedTxn(
    const etcdserverpb::TxnRequest& txn, const std::string& what) {
  absl::StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
  if (!response.ok()) {
    const absl::StatusCode code = response.status().code();
    if (code == absl::StatusCode::kUnknown || code == absl::StatusCode::kDeadlineExceeded) {
      // It may have committed: only a recovery can tell. Stop leading before anything else.
      const absl::Status indeterminate = absl::UnknownError(absl::StrCat(
          Describe(), ": ", what, " may or may not be committed: ", response.status().message()));
      Depose(indeterminate);
      return indeterminate;
    }
    // Refused before anything was applied (unreachable, too large, over quota, not allowed).
    return absl::UnavailableError(absl::StrCat(Describe(), ": ", what,
                                               " not written: ", response.status().message()));
  }
  if (!response->succeeded()) {
    std::string fence;
    {
      absl::MutexLock lock(&mu_);
      fence = absl::StrCat(election_key_, " (create revision ", election_revision_, ")");
    }
    const absl::Status deposed = absl::UnavailableError(absl::StrCat(
        Describe(), ": ", what, " not written: this replica no longer leads (its election key ",
        fence, " is gone, or the next record exists)"));
    Depose(deposed);
    return deposed;
  }
  return response;
}

absl::StatusOr<uint64_t> EtcdJournal::Append(std::string record) {
  Pending pending;
  pending.record = std::move(record);
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckLeading());
  queue_.push_back(&pending);
  struct Turn {
    const EtcdJournal* self;
    const Pending* pending;
  } turn{this, &pending};
  while (!pending.done) {
    mu_.Await(absl::Condition(
        +[](Turn* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->self->mu_) {
          return t->pending->done ||
                 (!t->self->committing_ && t->self->queue_.front() == t->pending);
        },
        &turn));
    if (!pending.done) CommitFront();
  }
  return pending.seq;
}

void EtcdJournal::CommitFront() {
  committing_ = true;
  std::vector<Pending*> batch;
  int64_t bytes = 0;
  while (!queue_.empty() && static_cast<int>(batch.size()) < options_.max_records_per_txn &&
         (batch.empty() ||
          bytes + static_cast<int64_t>(queue_.front()->record.size()) <= options_.max_txn_bytes)) {
    bytes += static_cast<int64_t>(queue_.front()->record.size());
    batch.push_back(queue_.front());
    queue_.pop_front();
  }
  absl::StatusOr<uint64_t> first = next_seq_;
  if (absl::Status leading = CheckLeading(); !leading.ok()) first = leading;
  if (first.ok()) {
    // A record too large for one request goes alone, its parts first (each fenced).
    std::vector<etcdserverpb::TxnRequest> txns;
    std::string record_value;
    if (batch.size() == 1 && bytes > options_.max_txn_bytes) {
      const std::string& record = batch[0]->record;
      txns = ChunkTxns(PartsPrefix(next_seq_), record);
      EtcdRecordParts parts;
      parts.set_parts(static_cast<uint32_t>(txns.size()));
      parts.set_bytes(record.size());
      parts.set_xxh64(Hash64(record));
      record_value = std::string(1, kPartedRecord) + parts.SerializeAsString();
    }
    etcdserverpb::TxnRequest& txn = txns.emplace_back();
    AddFence(txn);
    *txn.add_compare() = etcd::txn::CreateRevision(RecordKey(next_seq_), Compare::EQUAL, 0);
    for (size_t i = 0; i < batch.size(); ++i) {
      *txn.add_success() = etcd::txn::PutOp(
          RecordKey(next_seq_ + i),
          record_value.empty() ? kWholeRecord + batch[i]->record : record_value);
    }
    const std::string what =
        batch.size() == 1 ? absl::StrCat("record ", next_seq_)
                          : absl::StrCat("records ", next_seq_, "..", next_seq_ + batch.size() - 1);
    mu_.Unlock();
    const absl::Time start = absl::Now();
    absl::Status committed;
    for (const etcdserverpb::TxnRequest& request : txns) {
      committed = FencedTxn(request, what).status();
      if (!committed.ok()) break;
    }
    if (committed.ok() && instruments_.appends != nullptr) {
      instruments_.appends->Add(static_cast<double>(batch.size()));
      instruments_.group_size->Observe(static_cast<double>(batch.size()));
      instruments_.commit_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - start));
    }
    mu_.Lock();
    if (committed.ok()) {
      next_seq_ = *first + batch.size();
    } else {
      first = committed;
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i]->seq = first.ok() ? absl::StatusOr<uint64_t>(*first + i) : first.status();
    batch[i]->done = true;
  }
  committing_ = false;
}

std::string EtcdJournal::SnapshotPrefix(uint64_t seq) const {
  return absl::StrCat(options_.prefix, "/snapshots/", SeqDigits(seq), "/");
}

absl::Status EtcdJournal::ForEachKey(
    std::string from, const std::string& prefix, int64_t revision,
    const std::function<absl::Status(const mvccpb::KeyValue& kv)>& visit) const {
  for (bool more = true; more;) {
    ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse page,
                     client_->Range(from, etcd::PrefixRangeEnd(prefix), revision,
                                    kRecoveryPageKeys));
    for (const mvccpb::KeyValue& kv : page.kvs()) {
      RETURN_IF_ERROR(visit(kv));
      from = kv.key() + std::string(1, '\0');
    }
    more = page.more();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> EtcdJournal::ReadChunks(const std::string& chunk_prefix,
                                                    int64_t revision, const std::string& what,
                                                    uint32_t chunks, uint64_t bytes,
                                                    uint64_t xxh64) const {
  std::string joined;
  uint32_t read = 0;
  RETURN_IF_ERROR(ForEachKey(chunk_prefix, chunk_prefix, revision,
                             [&](const mvccpb::KeyValue& kv) {
                               joined += kv.value();
                               ++read;
                               return absl::OkStatus();
                             }));
  if (read != chunks || joined.size() != bytes || Hash64(joined) != xxh64) {
    return absl::DataLossError(absl::StrCat(
        Describe(), ": ", what, " should have ", chunks, " chunks of ", bytes,
        " bytes in all; ", chunk_prefix, " holds ", read, " chunks of ", joined.size(), " bytes",
        read == chunks ? " that do not hash to its XXH64" : ""));
  }
  return joined;
}

std::vector<etcdserverpb::TxnRequest> EtcdJournal::ChunkTxns(const std::string& chunk_prefix,
                                                             const std::string& bytes) const {
  const size_t chunk_bytes = static_cast<size_t>(options_.max_txn_bytes);
  std::vector<etcdserverpb::TxnRequest> txns;
  for (size_t offset = 0; offset < bytes.size() || txns.empty(); offset += chunk_bytes) {
    etcdserverpb::TxnRequest& txn = txns.emplace_back();
    AddFence(txn);
    *txn.add_success() = etcd::txn::PutOp(absl::StrFormat("%s%08u", chunk_prefix, txns.size() - 1),
                                          bytes.substr(offset, chunk_bytes));
  }
  return txns;
}

std::string EtcdJournal::PartsPrefix(uint64_t seq) const {
  return absl::StrCat(options_.prefix, "/parts/", SeqDigits(seq), "/");
}

absl::StatusOr<std::string> EtcdJournal::RecordOf(uint64_t seq, const std::string& value,
                                                  int64_t revision) const {
  if (!value.empty() && value[0] == kWholeRecord) return value.substr(1);
  EtcdRecordParts parts;
  if (value.empty() || value[0] != kPartedRecord || !parts.ParseFromString(value.substr(1))) {
    return absl::DataLossError(absl::StrCat(Describe(), ": ", RecordKey(seq),
                                            " holds neither a record nor its parts' list"));
  }
  return ReadChunks(PartsPrefix(seq), revision, absl::StrCat("record ", seq), parts.parts(),
                    parts.bytes(), parts.xxh64());
}

absl::Status EtcdJournal::WriteSnapshot(uint64_t seq, std::string snapshot) {
  const std::string& prefix = options_.prefix;
  const std::string chunk_prefix = SnapshotPrefix(seq);
  const absl::Time start = absl::Now();
  std::vector<etcdserverpb::TxnRequest> chunks;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckLeading());
    chunks = ChunkTxns(chunk_prefix, snapshot);
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    RETURN_IF_ERROR(
        FencedTxn(chunks[i], absl::StrCat("chunk ", i, " of the snapshot at record ", seq))
            .status());
  }
  EtcdSnapshotHead head;
  head.set_seq(seq);
  head.set_chunks(static_cast<uint32_t>(chunks.size()));
  head.set_bytes(snapshot.size());
  head.set_xxh64(Hash64(snapshot));
  etcdserverpb::TxnRequest txn;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckLeading());
    AddFence(txn);
  }
  *txn.add_success() = etcd::txn::PutOp(prefix + "/snapshot_head", head.SerializeAsString());
  // The records the snapshot covers (and their parts), and every older snapshot.
  *txn.add_success() = etcd::txn::DeleteOp(prefix + "/log/", RecordKey(seq + 1));
  *txn.add_success() = etcd::txn::DeleteOp(prefix + "/parts/", PartsPrefix(seq + 1));
  *txn.add_success() = etcd::txn::DeleteOp(prefix + "/snapshots/", chunk_prefix);
  ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse committed,
                   FencedTxn(txn, absl::StrCat("the snapshot at record ", seq)));
  if (instruments_.snapshot_seconds != nullptr) {
    instruments_.snapshot_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - start));
  }
  // etcd's history before it is of no use to a replica any more (one that was following from
  // earlier recovers from this snapshot): housekeeping, so a failure is only logged.
  const absl::StatusOr<etcdserverpb::CompactionResponse> compacted =
      client_->Compact(committed.header().revision(), /*physical=*/false);
  if (!compacted.ok() && !absl::IsOutOfRange(compacted.status())) {
    LOG(WARNING) << Describe() << ": compacting etcd's history after the snapshot at record "
                 << seq << ": " << compacted.status();
  }
  return absl::OkStatus();
}

absl::Status EtcdJournal::CheckRecordFits(int64_t bytes) const {
  const std::string key = absl::StrCat(options_.prefix, "/scratch/record-size-check");
  const absl::StatusOr<etcdserverpb::PutResponse> put =
      client_->Put(key, std::string(static_cast<size_t>(bytes), 'x'));
  if (!put.ok()) {
    if (absl::IsInvalidArgument(put.status()) || absl::IsResourceExhausted(put.status())) {
      return absl::InvalidArgumentError(absl::StrCat(
          Describe(), ": etcd refuses a record of ", bytes,
          " bytes (", put.status().message(),
          "): raise etcd's --max-request-bytes above it, or lower the bound that allows it"));
    }
    return put.status();
  }
  return client_->DeleteRange(key).status();
}

}  // namespace granary
