// ReaderLease: a reader's claim on one consumer of a job (one reader per consumer, DESIGN.md
// §6; dispatcher/reader_leases.h is the dispatcher's half). Internal to the client library.
//
// A Job claims each consumer it reads at every ReadEpoch and keeps the lease; its EpochReaders
// share it (std::shared_ptr) and send its reader id with their heartbeats, which renew it, and
// its generation with their GetElements calls, which workers use to fence older readers. The
// last owner's destruction releases the consumer (best effort: a reader that dies without it
// leaves a lease that expires after the dispatcher's --worker_timeout_ms of silence).
#ifndef GRANARY_CLIENT_READER_LEASE_H_
#define GRANARY_CLIENT_READER_LEASE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/connection.h"

namespace granary {

// Who a reader is: a random id (128 bits, hex), unique per Job, and "host:pid" for messages.
struct ReaderIdentity {
  std::string id;
  std::string description;

  static ReaderIdentity New();
};

// Thread-safe.
class ReaderLease {
 public:
  // Claims `consumer` of job `job_id` for `reader` (ClaimConsumer). A consumer a live other
  // reader holds is FailedPrecondition naming it — unless `takeover`, which takes it and fences
  // that reader. A holder that looks gone (silent, its lease not yet expired) is waited for, up
  // to ClientOptions.stall_timeout_ms, logging once why: the claim is granted at the expiry.
  static absl::StatusOr<std::shared_ptr<ReaderLease>> Claim(std::shared_ptr<Connection> connection,
                                                            int64_t job_id, int32_t consumer,
                                                            const ReaderIdentity& reader,
                                                            bool takeover);
  ~ReaderLease();
  ReaderLease(const ReaderLease&) = delete;
  ReaderLease& operator=(const ReaderLease&) = delete;

  // Claims the consumer again, as Claim without takeover: granted as it stands while this
  // reader holds it (e.g. at the next epoch), refused if another reader took it meanwhile.
  absl::Status Reclaim();

  const std::string& reader_id() const { return reader_.id; }
  // Bumped by the dispatcher at every change of the consumer's holder.
  int64_t generation() const { return generation_.load(); }

 private:
  ReaderLease(std::shared_ptr<Connection> connection, int64_t job_id, int32_t consumer,
              ReaderIdentity reader)
      : connection_(std::move(connection)),
        job_id_(job_id),
        consumer_(consumer),
        reader_(std::move(reader)) {}

  // ClaimConsumer; sets generation_.
  absl::Status CallClaim(bool takeover);

  const std::shared_ptr<Connection> connection_;
  const int64_t job_id_;
  const int32_t consumer_;
  const ReaderIdentity reader_;
  std::atomic<int64_t> generation_{0};
};

}  // namespace granary

#endif  // GRANARY_CLIENT_READER_LEASE_H_
