#include "replication/leader_election.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace granary {
namespace {

std::string ElectionPrefix(const std::string& prefix) { return prefix + "/election/"; }

// The oldest campaign under `prefix`: its key and value (none: an empty key).
struct Oldest {
  std::string key;
  ReplicaCampaign campaign;
};
absl::StatusOr<Oldest> OldestCampaign(etcd::EtcdClient* client, const std::string& prefix) {
  etcdserverpb::RangeRequest oldest;
  oldest.set_key(ElectionPrefix(prefix));
  oldest.set_range_end(etcd::PrefixRangeEnd(ElectionPrefix(prefix)));
  oldest.set_limit(1);
  oldest.set_sort_order(etcdserverpb::RangeRequest::ASCEND);
  oldest.set_sort_target(etcdserverpb::RangeRequest::CREATE);
  ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse found, client->Range(oldest));
  Oldest result;
  if (found.kvs_size() == 0) return result;
  result.key = found.kvs(0).key();
  if (!result.campaign.ParseFromString(found.kvs(0).value())) {
    return absl::DataLossError(
        absl::StrCat("etcd key ", result.key, " is not a dispatcher replica's campaign"));
  }
  return result;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LeaderElection>> LeaderElection::Campaign(
    etcd::EtcdClient* client, const std::string& prefix, int64_t lease, ReplicaCampaign me,
    ChangeCallback on_change, EndCallback on_end) {
  const std::string key = absl::StrFormat("%s%016x", ElectionPrefix(prefix), lease);
  etcdserverpb::TxnRequest create;
  *create.add_compare() =
      etcd::txn::CreateRevision(key, etcdserverpb::Compare::EQUAL, 0);
  *create.add_success() = etcd::txn::PutOp(key, me.SerializeAsString(), lease);
  *create.add_failure() = etcd::txn::RangeOp(key);
  ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse created, client->Txn(create));
  // A lease campaigns once; a repeated Campaign with it finds its own key.
  const int64_t create_revision =
      created.succeeded() ? created.header().revision()
                          : created.responses(0).response_range().kvs(0).create_revision();
  std::unique_ptr<LeaderElection> election(
      new LeaderElection(client, prefix, key, create_revision, std::move(on_change)));
  election->Refresh();
  ASSIGN_OR_RETURN(
      election->watch_,
      etcd::EtcdWatch::Start(
          client, ElectionPrefix(prefix), etcd::PrefixRangeEnd(ElectionPrefix(prefix)),
          create_revision + 1,
          [e = election.get()](const google::protobuf::RepeatedPtrField<mvccpb::Event>&) {
            e->Refresh();
          },
          std::move(on_end),
          // Who leads is re-read on every change, so a compacted history loses nothing: a
          // stream resumed after etcd compacted (each snapshot does) goes on from there.
          etcd::EtcdWatch::OnCompacted::kResumeAtCompactRevision));
  // A campaign that ended between the first Refresh and the watch's start is seen here.
  election->Refresh();
  return election;
}

LeaderElection::LeaderElection(etcd::EtcdClient* client, std::string prefix, std::string key,
                               int64_t create_revision, ChangeCallback on_change)
    : client_(client),
      prefix_(std::move(prefix)),
      key_(std::move(key)),
      create_revision_(create_revision),
      on_change_(std::move(on_change)) {}

LeaderElection::~LeaderElection() { watch_.reset(); }

void LeaderElection::Refresh() {
  // One refresh at a time, so changes are reported in the order they were read.
  absl::MutexLock lock(&mu_);
  const absl::StatusOr<Oldest> oldest = OldestCampaign(client_, prefix_);
  if (!oldest.ok()) {
    // The watch delivers the next change again; a replica that cannot read etcd cannot lead
    // anyway (its appends fail, its lease ends).
    LOG(WARNING) << "reading the dispatcher election: " << oldest.status();
    return;
  }
  Leadership now;
  now.leader = oldest->campaign;
  now.is_me = oldest->key == key_;
  if (now.is_me == reported_.is_me &&
      now.leader.SerializeAsString() == reported_.leader.SerializeAsString()) {
    return;
  }
  reported_ = now;
  on_change_(now);
}

}  // namespace granary
