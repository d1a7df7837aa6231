// LeaderElection: which dispatcher replica leads, decided in etcd (issue 32; keys in
// replication/FORMAT.md). Not a consensus algorithm of ours: etcd's own election recipe.
//
// Each campaigning replica creates <prefix>/election/<its lease id, 16 hex digits>, attached to
// its lease, holding its ReplicaCampaign (replica id, address). The leader is the replica whose
// key has the lowest create revision among the keys that exist: when the leader's lease ends
// (it crashed, was cut off for a TTL, or resigned), etcd deletes its key and the next oldest
// campaign leads. The journal fences every write of a leader with its key's create revision
// (etcd_journal.h), so a replica that believes it leads after its key is gone writes nothing.
//
// The election watches the election prefix on its own thread and reports every change of
// leader through `on_change`.
//
// Thread-safe. Callbacks run on the watch's thread and must not destroy the election.
#ifndef GRANARY_REPLICATION_LEADER_ELECTION_H_
#define GRANARY_REPLICATION_LEADER_ELECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "etcd/etcd_client.h"
#include "etcd/etcd_watch.h"
#include "proto/replication.pb.h"

namespace granary {

// Who leads, as a replica sees it.
struct Leadership {
  // The leader's campaign; empty replica_id: no campaign exists (none leads).
  ReplicaCampaign leader;
  // Whether the leader is this replica.
  bool is_me = false;
};

class LeaderElection {
 public:
  using ChangeCallback = std::function<void(const Leadership& now)>;
  // Why the election stopped following (its watch ended: see EtcdWatch).
  using EndCallback = std::function<void(const absl::Status& why)>;

  // Campaigns under `prefix` with `lease` (which the caller keeps alive; `client` must outlive
  // the election) as `me`, then follows the election. Errors: the client's (Unavailable naming
  // the endpoints).
  static absl::StatusOr<std::unique_ptr<LeaderElection>> Campaign(
      etcd::EtcdClient* client, const std::string& prefix, int64_t lease, ReplicaCampaign me,
      ChangeCallback on_change, EndCallback on_end);
  ~LeaderElection();
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // This replica's election key and its create revision: the journal's fence while it leads.
  const std::string& key() const { return key_; }
  int64_t create_revision() const { return create_revision_; }

 private:
  LeaderElection(etcd::EtcdClient* client, std::string prefix, std::string key,
                 int64_t create_revision, ChangeCallback on_change);
  // Reads who leads now and reports a change.
  void Refresh() ABSL_LOCKS_EXCLUDED(mu_);

  etcd::EtcdClient* const client_;
  const std::string prefix_;
  const std::string key_;
  const int64_t create_revision_;
  const ChangeCallback on_change_;

  // Held through a whole Refresh (from the watch's thread, and Campaign's), so changes are
  // reported once each, in the order they were read.
  absl::Mutex mu_;
  // What on_change_ was last told.
  Leadership reported_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<etcd::EtcdWatch> watch_;
};

}  // namespace granary

#endif  // GRANARY_REPLICATION_LEADER_ELECTION_H_
