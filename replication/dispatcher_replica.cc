#include "replication/dispatcher_replica.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/leader_redirect.h"
#include "common/status_macros.h"
#include "etcd/lease_keep_alive.h"
#include "glog/logging.h"
#include "replication/leader_election.h"
#include "replication/shared_capability_key.h"

namespace granary {
namespace {

// How long a new leader waits for its core to apply the records committed before it was
// elected (they are at most a watch event away; a longer wait means etcd is unhealthy).
constexpr absl::Duration kCatchUpTimeout = absl::Seconds(30);
// The pause between terms, so a replica that cannot reach etcd does not spin.
constexpr absl::Duration kBetweenTerms = absl::Milliseconds(100);

// How long a crashed predecessor's key (of a lease of `ttl_seconds`) may outlive it: its last
// keep-alive renewed the lease for a TTL, and etcd's lessor checks expiry only every half second
// or so, so allow three TTLs and a second.
absl::Duration PredecessorKeyLifetime(int64_t ttl_seconds) {
  return absl::Seconds(3 * ttl_seconds + 1);
}

// Deadlines are kept on the Env's steady clock: a wall-clock step must neither end a wait early
// nor stretch it.
uint64_t SteadyDeadline(absl::Duration timeout) {
  return Env::Default()->NowMicros() + absl::ToInt64Microseconds(timeout);
}
bool Passed(uint64_t steady_deadline) { return Env::Default()->NowMicros() >= steady_deadline; }

}  // namespace

std::string DispatcherReplica::ReplicaKey(const std::string& prefix,
                                          const std::string& replica_id) {
  return absl::StrCat(prefix, "/replicas/", replica_id);
}

absl::StatusOr<std::unique_ptr<DispatcherReplica>> DispatcherReplica::Start(
    etcd::EtcdClient* client, DispatcherReplicaOptions options) {
  if (options.me.replica_id().empty() || options.me.address().empty()) {
    return absl::InvalidArgumentError("a dispatcher replica needs an id and an address");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdJournal> journal,
                   EtcdJournal::Open(client, options.journal));
  // Every request the journal makes carries up to max_txn_bytes of records or snapshot.
  RETURN_IF_ERROR(journal->CheckRecordFits(options.journal.max_txn_bytes));
  ASSIGN_OR_RETURN(options.dispatcher.capability_key,
                   SharedCapabilityKey(client, options.journal.prefix));
  std::unique_ptr<DispatcherReplica> replica(
      new DispatcherReplica(client, std::move(options), std::move(journal)));
  ASSIGN_OR_RETURN(const etcdserverpb::LeaseGrantResponse lease, replica->ClaimTerm());
  replica->thread_ = std::thread(
      [r = replica.get(), id = lease.id(), ttl = lease.ttl()] { r->Run(id, ttl); });
  return replica;
}

DispatcherReplica::DispatcherReplica(etcd::EtcdClient* client, DispatcherReplicaOptions options,
                                     std::shared_ptr<EtcdJournal> journal)
    : client_(client), options_(std::move(options)), journal_(std::move(journal)) {}

DispatcherReplica::~DispatcherReplica() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (term_end_.ok()) term_end_ = absl::CancelledError("the replica stops");
  }
  if (thread_.joinable()) thread_.join();
}

void DispatcherReplica::Run(int64_t lease, int64_t ttl_seconds) {
  absl::Status ended = RunTerm(lease, ttl_seconds);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    LOG(WARNING) << "dispatcher replica " << options_.me.replica_id() << ": term ended ("
                 << ended << "); starting the next";
    absl::SleepFor(kBetweenTerms);
    ended = NextTerm();
  }
}

absl::Status DispatcherReplica::NextTerm() {
  ASSIGN_OR_RETURN(const etcdserverpb::LeaseGrantResponse lease, ClaimTerm());
  return RunTerm(lease.id(), lease.ttl());
}

absl::StatusOr<etcdserverpb::LeaseGrantResponse> DispatcherReplica::ClaimTerm() {
  const std::string key = ReplicaKey(options_.journal.prefix, options_.me.replica_id());
  const uint64_t deadline = SteadyDeadline(PredecessorKeyLifetime(options_.lease_ttl_seconds));
  for (;;) {
    // Wait for the id to be free first: a lease granted now would expire, unrefreshed, while
    // a crashed predecessor's key outlives it.
    ASSIGN_OR_RETURN(etcdserverpb::RangeResponse holder, client_->Range(key));
    if (holder.kvs_size() == 0) {
      ASSIGN_OR_RETURN(const etcdserverpb::LeaseGrantResponse lease,
                       client_->LeaseGrant(options_.lease_ttl_seconds));
      etcdserverpb::TxnRequest claim;
      *claim.add_compare() = etcd::txn::CreateRevision(key, etcdserverpb::Compare::EQUAL, 0);
      *claim.add_success() = etcd::txn::PutOp(key, options_.me.SerializeAsString(), lease.id());
      *claim.add_failure() = etcd::txn::RangeOp(key);
      const absl::StatusOr<etcdserverpb::TxnResponse> claimed = client_->Txn(claim);
      if (claimed.ok() && claimed->succeeded()) return lease;
      (void)client_->LeaseRevoke(lease.id());
      RETURN_IF_ERROR(claimed.status());
      *holder.mutable_kvs() = claimed->responses(0).response_range().kvs();
    }
    if (Passed(deadline)) {
      ReplicaCampaign campaign;
      if (holder.kvs_size() > 0) campaign.ParseFromString(holder.kvs(0).value());
      return absl::AlreadyExistsError(absl::StrCat(
          "dispatcher replica id '", options_.me.replica_id(), "' is in use by a live replica at ",
          campaign.address().empty() ? "an unknown address" : campaign.address(), " (", key,
          "): give each replica its own --replica_id"));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

void DispatcherReplica::EndTerm(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (term_end_.ok()) term_end_ = why;
}

void DispatcherReplica::LeadershipChanged(bool is_me, const ReplicaCampaign& leader) {
  absl::MutexLock lock(&mu_);
  leader_ = leader;
  if (elected_ && !is_me && term_end_.ok()) {
    term_end_ = absl::AbortedError(
        absl::StrCat("the election names another leader (", leader.replica_id(), ")"));
  }
  elected_ = is_me;
}

absl::Status DispatcherReplica::AwaitTermEvent(bool until_leader) {
  absl::MutexLock lock(&mu_);
  struct Wait {
    DispatcherReplica* self;
    bool until_leader;
  } wait{this, until_leader};
  mu_.Await(absl::Condition(
      +[](Wait* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->self->mu_) {
        return !w->self->term_end_.ok() || (w->until_leader && w->self->elected_);
      },
      &wait));
  return term_end_;
}

absl::Status DispatcherReplica::RunTerm(int64_t lease, int64_t ttl_seconds) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("the replica stops");
    term_end_ = absl::OkStatus();
    elected_ = false;
  }
  const std::string& id = options_.me.replica_id();
  absl::Status ended = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<etcd::LeaseKeepAlive> keep_alive,
                     etcd::LeaseKeepAlive::Start(client_, lease, ttl_seconds,
                                                 [this](const absl::Status& why) {
                                                   EndTerm(Annotate(why, "the lease is lost"));
                                                 }));
    // 1. Follow.
    ASSIGN_OR_RETURN(std::unique_ptr<DispatcherCore> core,
                     DispatcherCore::Open(journal_, DispatcherImpl::CoreOptions(options_.dispatcher)));
    DispatcherCore* const following = core.get();
    {
      absl::MutexLock lock(&mu_);
      follower_applied_seq_ = core->applied_seq();
    }
    ASSIGN_OR_RETURN(
        std::unique_ptr<etcd::EtcdWatch> follow,
        journal_->Follow(
            journal_->recovered_revision() + 1,
            [this, following](uint64_t seq, const absl::StatusOr<std::string>& record) {
              const absl::Status applied =
                  record.ok() ? following->ApplyCommitted(seq, *record) : record.status();
              if (!applied.ok()) {
                EndTerm(applied);
                return;
              }
              absl::MutexLock lock(&mu_);
              follower_applied_seq_ = seq;
            },
            [this](const absl::Status& why) { EndTerm(Annotate(why, "following the journal")); }));
    ASSIGN_OR_RETURN(
        std::unique_ptr<LeaderElection> election,
        LeaderElection::Campaign(
            client_, options_.journal.prefix, lease, options_.me,
            [this](const Leadership& now) { LeadershipChanged(now.is_me, now.leader); },
            [this](const absl::Status& why) {
              EndTerm(Annotate(why, "following the election"));
            }));
    RETURN_IF_ERROR(AwaitTermEvent(/*until_leader=*/true));

    // 2. Lead: catch up on what the previous leaders committed, stop following, fence, serve.
    ASSIGN_OR_RETURN(const uint64_t last, journal_->LastSeq());
    const uint64_t give_up = SteadyDeadline(kCatchUpTimeout);
    while (!core->Await([last](const DispatcherState& state) { return state.applied_seq() >= last; },
                        absl::Milliseconds(100))) {
      {
        absl::MutexLock lock(&mu_);
        RETURN_IF_ERROR(term_end_);
      }
      if (Passed(give_up)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "elected, but the state did not catch up with record ", last, " in ",
            absl::FormatDuration(kCatchUpTimeout), " (applied ", core->applied_seq(), ")"));
      }
    }
    follow.reset();
    RETURN_IF_ERROR(AwaitTermEvent(/*until_leader=*/true));
    journal_->Lead(election->key(), election->create_revision(), core->applied_seq() + 1,
                   [this](const absl::Status& why) { EndTerm(why); });
    absl::StatusOr<std::unique_ptr<DispatcherImpl>> impl =
        DispatcherImpl::Serve(options_.dispatcher, std::move(core));
    if (!impl.ok()) {
      journal_->StopLeading(impl.status());
      return impl.status();
    }
    LOG(INFO) << "dispatcher replica " << id << " leads (" << journal_->Describe() << ", from record "
              << last + 1 << ")";
    {
      absl::MutexLock lock(&mu_);
      serving_ = std::move(impl).value();
      ++terms_led_;
      follower_applied_seq_ = 0;
    }
    const absl::Status why = AwaitTermEvent(/*until_leader=*/false);
    // Stop answering before anything else: the lease may be about to expire.
    std::shared_ptr<DispatcherImpl> served;
    {
      absl::MutexLock lock(&mu_);
      served = std::move(serving_);
      serving_ = nullptr;
    }
    journal_->StopLeading(absl::UnavailableError(
        absl::StrCat("dispatcher replica ", id, " stopped leading: ", why.message())));
    return why;
  }();
  // Resign: a successor campaigns on at once instead of after a TTL.
  (void)client_->LeaseRevoke(lease);
  absl::MutexLock lock(&mu_);
  ++terms_ended_;
  elected_ = false;
  return ended;
}

absl::StatusOr<std::shared_ptr<DispatcherImpl>> DispatcherReplica::Leader() const {
  absl::MutexLock lock(&mu_);
  if (serving_ != nullptr) return serving_;
  const std::string why =
      absl::StrCat("dispatcher replica ", options_.me.replica_id(), " does not lead");
  if (leader_.replica_id() == options_.me.replica_id()) {
    // Elected, still catching up: no other address to offer.
    return WithAppliedSeq(NotLeaderError(absl::StrCat(why, " yet (it was just elected)"), ""),
                          follower_applied_seq_);
  }
  return WithAppliedSeq(NotLeaderError(why, leader_.address()), follower_applied_seq_);
}

DispatcherReplica::Status DispatcherReplica::status() const {
  absl::MutexLock lock(&mu_);
  return Status{.leading = serving_ != nullptr,
                .leader = leader_,
                .terms_led = terms_led_,
                .terms_ended = terms_ended_};
}

void DispatcherReplica::CollectMetrics(MetricSamples& out) const {
  // The journal's last committed seq, read before taking the lock (a Range may take up to the
  // client's call_timeout) and only while following: nothing is ahead of a leader.
  const absl::StatusOr<uint64_t> committed =
      status().leading ? absl::FailedPreconditionError("leading") : journal_->LastSeq();
  absl::MutexLock lock(&mu_);
  const MetricLabels replica = {{"replica", options_.me.replica_id()}};
  out.AddGauge("granary_dispatcher_is_leader",
               "1 while this dispatcher replica leads and serves, else 0.", replica,
               serving_ != nullptr ? 1 : 0);
  out.AddCounter("granary_dispatcher_terms_led_total",
                 "Terms this replica led (it was elected and served).", replica, terms_led_);
  out.AddCounter("granary_dispatcher_terms_ended_total",
                 "Terms of this replica that ended: a failover seen from here, or a recovery.",
                 replica, terms_ended_);
  if (serving_ == nullptr) {
    out.AddGauge("granary_dispatcher_follower_applied_seq",
                 "The last journal record this following replica applied.", replica,
                 static_cast<double>(follower_applied_seq_));
  }
  if (serving_ != nullptr || committed.ok()) {
    const uint64_t lag = serving_ == nullptr && *committed > follower_applied_seq_
                             ? *committed - follower_applied_seq_
                             : 0;
    out.AddGauge("granary_dispatcher_replica_lag_records",
                 "Journal records committed in etcd that this replica has not applied yet (0 "
                 "while it leads).",
                 replica, static_cast<double>(lag));
  }
}

bool DispatcherReplica::AwaitLeading(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](const DispatcherReplica* self)
              ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) { return self->serving_ != nullptr; },
          this),
      timeout);
}

}  // namespace granary
