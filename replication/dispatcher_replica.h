// DispatcherReplica: one dispatcher replica of a replicated dispatcher (issue 32; docs/design.md
// "The replicated dispatcher"). Three (or five) replicas share one EtcdJournal; etcd elects
// one of them (leader_election.h); it serves every dispatcher RPC, and the others are hot
// standbys that refuse RPCs with the leader's address (common/leader_redirect.h).
//
// A replica lives in terms. A term has one etcd lease (kept alive by LeaseKeepAlive), one
// campaign and one DispatcherCore:
//   1. Follow: the core recovers from the journal (snapshot + records) and then applies every
//      record the leader commits as the journal's watch delivers it (DispatcherCore::
//      ApplyCommitted), so its state is never more than a watch event behind.
//   2. Lead, once the election names this replica: read the newest record's seq, wait until the
//      core has applied it, stop following, fence the journal with this campaign's key and
//      serve: DispatcherImpl::Serve over the core, which gives every worker a full
//      worker_timeout_ms before any is declared lost.
//   3. The term ends when the lease is lost (etcd unreachable for a TTL: the replica stops
//      serving before etcd may expire it), the journal is deposed (a fenced write failed, or a
//      write's outcome is unknown), the watch breaks (a compacted revision: recover again), or
//      the replica stops. Then it stops serving, revokes its lease (so the next replica takes
//      over at once instead of after a TTL), and starts the next term from step 1 with a fresh
//      core recovered from etcd.
// Exactly once across failovers rests on the journal: every state change the old leader
// acknowledged is in etcd, and its successor answers retried RPCs from that state.
//
// Thread-safe.
#ifndef GRANARY_REPLICATION_DISPATCHER_REPLICA_H_
#define GRANARY_REPLICATION_DISPATCHER_REPLICA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dispatcher/dispatcher_impl.h"
#include "etcd/etcd_client.h"
#include "obs/metrics.h"
#include "proto/replication.pb.h"
#include "replication/etcd_journal.h"

namespace granary {

struct DispatcherReplicaOptions {
  // What the leader serves with (journal_dir unused: the journal is in etcd). Its
  // capability_key is replaced by the key every replica of the journal shares
  // (shared_capability_key.h).
  DispatcherOptions dispatcher;
  // This replica: its id (unique among the live replicas of the journal) and the host:port
  // where its dispatcher RPCs are served (what followers redirect callers to).
  ReplicaCampaign me;
  EtcdJournalOptions journal;
  // The TTL of each term's lease: a crashed leader is replaced about this long after its last
  // keep-alive. etcd raises it to its own minimum (1.5 election timeouts).
  int64_t lease_ttl_seconds = 1;
};

class DispatcherReplica {
 public:
  // Opens the journal (its errors), reads or creates the shared capability key, claims
  // options.me.replica_id — AlreadyExists naming the
  // address of the live replica that holds it — and starts the first term on a thread of its
  // own. `client` must outlive the replica.
  static absl::StatusOr<std::unique_ptr<DispatcherReplica>> Start(
      etcd::EtcdClient* client, DispatcherReplicaOptions options);
  // Stops serving, revokes the term's lease (a successor leads at once) and joins the thread.
  ~DispatcherReplica();
  DispatcherReplica(const DispatcherReplica&) = delete;
  DispatcherReplica& operator=(const DispatcherReplica&) = delete;

  // The DispatcherImpl while this replica leads and serves; else Unavailable naming the leader
  // it knows (NotLeaderError) and carrying the seq of the last record this replica applied
  // (WithAppliedSeq; `granary status` shows each follower's lag from it): the gRPC service's
  // DispatcherImplSource.
  absl::StatusOr<std::shared_ptr<DispatcherImpl>> Leader() const ABSL_LOCKS_EXCLUDED(mu_);

  struct Status {
    bool leading = false;
    ReplicaCampaign leader;
    // How many terms this replica led.
    int64_t terms_led = 0;
    // How many terms ended (a failover seen from here, or a recovery).
    int64_t terms_ended = 0;
  };
  Status status() const ABSL_LOCKS_EXCLUDED(mu_);

  // granary_dispatcher_is_leader, granary_dispatcher_terms_led_total,
  // granary_dispatcher_terms_ended_total (each failover seen from here, or a recovery) and,
  // while following, granary_dispatcher_follower_applied_seq (the leader's own metrics say
  // where it is) and granary_dispatcher_replica_lag_records: the journal's last committed seq,
  // read from etcd at collection (one Range), minus the last record this replica applied (0
  // while leading; absent while following when etcd cannot be read, each endpoint given the
  // client's call_timeout).
  void CollectMetrics(MetricSamples& out) const ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until this replica leads and serves, for at most `timeout`; returns whether it does.
  bool AwaitLeading(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);

  // The key under `prefix` that holds replica `replica_id`'s campaign while it runs.
  static std::string ReplicaKey(const std::string& prefix, const std::string& replica_id);

 private:
  DispatcherReplica(etcd::EtcdClient* client, DispatcherReplicaOptions options,
                    std::shared_ptr<EtcdJournal> journal);

  // Runs the first term, with `lease` (claimed by Start), then further terms until the
  // replica stops.
  void Run(int64_t lease, int64_t ttl_seconds);
  // A term with a new lease and claim.
  absl::Status NextTerm();
  // One term (the file comment); returns why it ended.
  absl::Status RunTerm(int64_t lease, int64_t ttl_seconds);
  // Waits until no live replica holds this replica's id (a crashed predecessor's key lasts until
  // its lease expires), then grants the term's lease and claims the id with it. AlreadyExists
  // naming the holder's address if the id is still held after PredecessorKeyLifetime.
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> ClaimTerm();

  // What ends a term or moves it on, signalled by callbacks on other threads.
  void EndTerm(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  void LeadershipChanged(bool is_me, const ReplicaCampaign& leader) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until the term ends or (`until_leader`) the election names this replica; returns
  // OK for the latter, why the term ended for the former.
  absl::Status AwaitTermEvent(bool until_leader) ABSL_LOCKS_EXCLUDED(mu_);

  etcd::EtcdClient* const client_;
  const DispatcherReplicaOptions options_;
  const std::shared_ptr<EtcdJournal> journal_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Why the current term ends (OK: it goes on).
  absl::Status term_end_ ABSL_GUARDED_BY(mu_);
  bool elected_ ABSL_GUARDED_BY(mu_) = false;
  ReplicaCampaign leader_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<DispatcherImpl> serving_ ABSL_GUARDED_BY(mu_);
  int64_t terms_led_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t terms_ended_ ABSL_GUARDED_BY(mu_) = 0;
  // The last record the following core applied (0 while leading).
  uint64_t follower_applied_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_REPLICATION_DISPATCHER_REPLICA_H_
